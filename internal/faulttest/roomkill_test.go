package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// A waiting room shared by two services; one is killed with SIGKILL while
// admission is under way and restarted. No place is lost (every user's
// join answers the ticket it had), nobody is admitted twice, everyone is
// admitted in the end, and the two together never admit more than R in a
// second (counted from Redis: a live pass's score is its admission time
// plus the TTL).
func TestRoomServiceKilledDuringAdmission(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	be := realBackends(b)
	rdb := redisClient(t, b.RedisURL)
	key := map[string]string{"SECKILL_ROOM_KEY": "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"}
	svcA := startService(t, "service-a", "", be, key)
	svcB := startService(t, "service-b", "", be, key)
	const rate, users, ttl = 10, 60, 120
	r := svcA.c.Must(t, "POST", "/api/v1/admin/items", map[string]any{"name": "roomed", "stock": 1000, "strategy": "lua",
		"waiting_room": map[string]any{"admit_per_second": rate, "pass_ttl_seconds": ttl}}, true, nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var it struct {
		ID int64 `json:"id"`
	}
	r.JSON(t, &it)
	path := fmt.Sprintf("/api/v1/items/%d/queue", it.ID)

	type ticket struct {
		Ticket string `json:"ticket"`
		Number int64  `json:"number"`
		State  string `json:"state"`
	}
	join := func(c *apptest.Client, user string) (ticket, int) {
		r, err := c.Do("POST", path, map[string]string{"user_id": user}, false, nil)
		var tk ticket
		if err == nil && r.Status == http.StatusOK {
			r.JSON(t, &tk)
		}
		return tk, r.Status
	}
	// service-b learns of the room within a second.
	deadline := time.Now().Add(10 * time.Second)
	for _, s := join(svcB.c, "probe"); s != http.StatusOK; _, s = join(svcB.c, "probe") {
		if time.Now().After(deadline) {
			t.Fatalf("service-b never saw the room: %d", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := make(map[string]int64, users)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range users {
		wg.Go(func() {
			c := svcA.c
			if i%2 == 1 {
				c = svcB.c
			}
			u := fmt.Sprintf("user-%02d", i)
			tk, s := join(c, u)
			if s != http.StatusOK {
				t.Errorf("join %s: %d", u, s)
				return
			}
			mu.Lock()
			before[u] = tk.Number
			mu.Unlock()
		})
	}
	wg.Wait()

	meta := fmt.Sprintf("%s:{item:%d}:room", b.KeyPrefix, it.ID)
	admitted := func() int64 {
		n, _ := rdb.HGet(context.Background(), meta, "admitted").Result()
		v, _ := strconv.ParseInt(n, 10, 64)
		return v
	}
	deadline = time.Now().Add(30 * time.Second)
	for admitted() < 15 {
		if time.Now().After(deadline) {
			t.Fatalf("admission never got going: %d admitted", admitted())
		}
		time.Sleep(20 * time.Millisecond)
	}
	svcA.kill()
	if !killedBySIGKILL(svcA.cmd.ProcessState) {
		t.Fatalf("service-a ended with %v, want SIGKILL", svcA.cmd.ProcessState)
	}
	t.Logf("killed service-a with %d of %d admitted", admitted(), users+1)
	restarted := startService(t, "service-a-restarted", svcA.addr, be, key)

	deadline = time.Now().Add(60 * time.Second)
	for admitted() < users+1 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d admitted after the restart", admitted(), users+1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for u, n := range before {
		for _, c := range []*apptest.Client{restarted.c, svcB.c} {
			tk, s := join(c, u)
			if s != http.StatusOK || tk.Number != n || tk.State != "admitted" {
				t.Errorf("%s after the kill: %d ticket %d %s, want ticket %d admitted", u, s, tk.Number, tk.State, n)
			}
		}
	}
	live := meta + ":live"
	zs, err := rdb.ZRangeWithScores(context.Background(), live, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(zs) != users+1 || admitted() != users+1 {
		t.Errorf("%d live passes, admitted counter %d, want %d each: everyone once", len(zs), admitted(), users+1)
	}
	perSecond := map[int64]int{}
	for _, z := range zs {
		perSecond[(int64(z.Score)-ttl*1000)/1000]++
	}
	for sec, n := range perSecond {
		if n > rate {
			t.Errorf("second %d: %d admitted, want at most %d", sec, n, rate)
		}
	}
	var v struct {
		WaitingRoom struct {
			Tickets int64 `json:"tickets"`
		} `json:"waiting_room"`
	}
	r = svcB.c.Must(t, "GET", fmt.Sprintf("/api/v1/admin/items/%d", it.ID), nil, true, nil)
	if err := json.Unmarshal(r.Body, &v); err != nil || v.WaitingRoom.Tickets != users+1 {
		t.Errorf("tickets after the kill: %s, want %d", r.Body, users+1)
	}
}
