package app_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// Two instances share one room: users join through both at once (one
// place each), and together the instances admit at most R a second (counted from Redis: each live
// pass's score is its admission time plus the pass TTL), everyone once.
func TestRoomTwoInstances(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	a := startRoomApp(t, b)
	c := startRoomApp(t, b)
	const rate, users, ttl = 10, 45, 60
	id := createRoomItem(t, a, 1000, map[string]any{"admit_per_second": rate, "pass_ttl_seconds": ttl})
	// b learns of the room from the database within a second.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := c.Must(t, "POST", roomPath(id, "/queue"), map[string]string{"user_id": "probe"}, false, nil)
		if r.Status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("second instance: join still %d %s", r.Status, r.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every user joins through both instances at once (their joins are
	// batched on each): one place each, the same through both.
	tickets := make([]roomTicket, users)
	again := make([]roomTicket, users)
	var wg sync.WaitGroup
	for i := range users {
		inst, other := a, c
		if i%2 == 1 {
			inst, other = c, a
		}
		user := fmt.Sprintf("user-%02d", i)
		wg.Go(func() { tickets[i] = joinRoom(t, inst, id, user) })
		wg.Go(func() { again[i] = joinRoom(t, other, id, user) })
	}
	wg.Wait()
	numbers := map[int64]bool{}
	for i := range tickets {
		if tickets[i].Number != again[i].Number {
			t.Errorf("user-%02d joined through both instances: tickets %d and %d, want one", i, tickets[i].Number, again[i].Number)
		}
		numbers[tickets[i].Number] = true
	}
	for n := int64(2); n <= users+1; n++ {
		if !numbers[n] {
			t.Errorf("ticket %d given to nobody: the users' tickets are not 2..%d", n, users+1)
		}
	}
	for i, tk := range tickets {
		// Polled through the other instance than the join's.
		inst := c
		if i%2 == 1 {
			inst = a
		}
		awaitTicket(t, inst, id, tk.Ticket, "admitted", 30*time.Second)
	}
	rdb := b.Redis(t)
	live := fmt.Sprintf("%s:{item:%d}:room:live", b.KeyPrefix, id)
	zs, err := rdb.ZRangeWithScores(context.Background(), live, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	perSecond := map[int64]int{}
	seen := map[string]bool{}
	for _, z := range zs {
		member := z.Member.(string)
		if seen[member] {
			t.Errorf("ticket %s admitted twice", member)
		}
		seen[member] = true
		perSecond[(int64(z.Score)-ttl*1000)/1000]++
	}
	if len(zs) != users+1 {
		t.Errorf("%d live passes, want %d (everyone once)", len(zs), users+1)
	}
	for sec, n := range perSecond {
		if n > rate {
			t.Errorf("second %d: %d admitted across both instances, want at most %d", sec, n, rate)
		}
	}
	t.Logf("admissions per second across both instances: %v", perSecond)
	if v := roomAdminView(t, c, id); v.WaitingRoom.Admitted != users+1 || v.WaitingRoom.Tickets != users+1 {
		t.Errorf("admin view: admitted %d tickets %d, want %d each", v.WaitingRoom.Admitted, v.WaitingRoom.Tickets, users+1)
	}
}
