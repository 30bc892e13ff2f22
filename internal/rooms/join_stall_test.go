package rooms

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// Redis stalls while joins are in flight and queued (every user joins
// twice, at once): each waiter hears a 503 within the bound. Once Redis
// answers again, the batches it held run, and every user joining again
// has exactly one place: tickets are distinct, and the room counts one
// ticket a user, whatever the held batches did.
func TestJoinBatchAfterStallOnePlaceEach(t *testing.T) {
	const timeout, users = 300 * time.Millisecond, 40
	j, proxy, _ := stalledBatcher(t, timeout)
	proxy.Stall()
	var wg sync.WaitGroup
	for u := range 2 * users {
		wg.Go(func() {
			_, _, err := j.join(context.Background(), fmt.Sprintf("s%d", u%users), 0)
			if !errors.Is(joinErr(err), stock.ErrUnavailable) {
				t.Errorf("join with redis stalled: %v, want unavailable", err)
			}
		})
	}
	wg.Wait()
	proxy.Heal()
	tickets := map[int64]string{}
	var mu sync.Mutex
	for u := range 2 * users {
		wg.Go(func() {
			user := fmt.Sprintf("s%d", u%users)
			st, _, err := j.join(context.Background(), user, 0)
			if err != nil {
				t.Errorf("join of %s after the stall: %v", user, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if other, ok := tickets[st.Ticket]; ok && other != user {
				t.Errorf("ticket %d given to %s and %s", st.Ticket, other, user)
			}
			tickets[st.Ticket] = user
		})
	}
	wg.Wait()
	if len(tickets) != users {
		t.Errorf("%d distinct tickets for %d users", len(tickets), users)
	}
	stats, err := j.room.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if stats.Tickets != users+1 { // and the set-up's "first"
		t.Errorf("the room counts %d tickets, want %d", stats.Tickets, users+1)
	}
}

// The service closes while joins stream in: every join returns (a place,
// or a 503), none hangs or panics, Close waits for the batches and returns,
// and no join after it is sent.
func TestJoinBatchCloseUnderLoad(t *testing.T) {
	b := testenv.Real(t)
	j := batcher(t, b.Universal(t), b.KeyPrefix, 500+nextItem.Add(1), time.Second)
	setUpRoom(t, j)
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	j.base = base
	var wg sync.WaitGroup
	var answered atomic.Int64
	for u := range 400 {
		wg.Go(func() {
			_, _, err := j.join(context.Background(), fmt.Sprintf("c%d", u), 0)
			answered.Add(1)
			if err != nil && !errors.Is(joinErr(err), stock.ErrUnavailable) {
				t.Errorf("join during shutdown: %v, want a place or unavailable", err)
			}
		})
		if u == 200 {
			cancel()
			j.spawn.Close()
		}
	}
	wg.Wait()
	if n := answered.Load(); n != 400 {
		t.Errorf("%d joins answered, want 400", n)
	}
	if _, _, err := j.join(context.Background(), "late", 0); !errors.Is(err, stock.ErrUnavailable) {
		t.Errorf("join after Close: %v, want unavailable", err)
	}
	if j.queued() != 0 {
		t.Errorf("%d joins left queued after Close", j.queued())
	}
}
