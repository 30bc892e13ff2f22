package rooms

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// countScripts counts the EVALSHA calls of a client: one a join batch.
type countScripts struct{ n atomic.Int64 }

func (c *countScripts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *countScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *countScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

var nextItem atomic.Int64

// batcher is item's room on rdb with a join batcher in front, as an
// instance of the service has it; the test closes it.
func batcher(t *testing.T, rdb redis.UniversalClient, prefix string, item int64, timeout time.Duration) *joinBatcher {
	t.Helper()
	rm, err := room.New(rdb, item, &room.Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	g := &goroutines{}
	t.Cleanup(g.Close)
	return &joinBatcher{room: rm, spawn: g, base: context.Background(), timeout: timeout, now: time.Now}
}

func setUpRoom(t *testing.T, j *joinBatcher) {
	t.Helper()
	if err := j.room.Setup(context.Background(), room.NewSeed().Commitment(), time.Minute); err != nil {
		t.Fatal(err)
	}
}

// queued is how many joins wait for the next batch.
func (j *joinBatcher) queued() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.queue)
}

// awaitQueued waits until n joins wait for the next batch.
func awaitQueued(t *testing.T, j *joinBatcher, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for j.queued() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d joins queued, want %d", j.queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Many goroutines join one room at once through two instances' batchers,
// every user several times: every user has exactly one ticket, the tickets
// are 1..users, and joining again answers the same ticket.
func TestJoinBatchesOnePlacePerUser(t *testing.T) {
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		item := 500 + nextItem.Add(1)
		a := batcher(t, b.Universal(t), b.KeyPrefix, item, 10*time.Second)
		c := batcher(t, b.Universal(t), b.KeyPrefix, item, 10*time.Second)
		setUpRoom(t, a)
		const users, repeats = 300, 3
		var (
			mu      sync.Mutex
			ticket  = map[string]int64{}
			owner   = map[int64]string{}
			wg      sync.WaitGroup
			answers atomic.Int64
		)
		for r := range repeats {
			for u := range users {
				j := a
				if (u+r)%2 == 1 {
					j = c
				}
				wg.Go(func() {
					user := fmt.Sprintf("u%d", u)
					st, _, err := j.join(context.Background(), user, 0)
					if err != nil {
						t.Errorf("join %s: %v", user, err)
						return
					}
					answers.Add(1)
					mu.Lock()
					defer mu.Unlock()
					if st.User != user {
						t.Errorf("join %s answered %s's ticket %d", user, st.User, st.Ticket)
					}
					if prev, ok := ticket[user]; ok && prev != st.Ticket {
						t.Errorf("%s got tickets %d and %d: two places for one user", user, prev, st.Ticket)
					}
					if prev, ok := owner[st.Ticket]; ok && prev != user {
						t.Errorf("ticket %d given to %s and %s", st.Ticket, prev, user)
					}
					ticket[user], owner[st.Ticket] = st.Ticket, user
				})
			}
		}
		wg.Wait()
		if n := answers.Load(); n != users*repeats {
			t.Fatalf("%d joins answered, want %d", n, users*repeats)
		}
		for tk := int64(1); tk <= users; tk++ {
			if _, ok := owner[tk]; !ok {
				t.Fatalf("ticket %d never given: the tickets are not 1..%d", tk, users)
			}
		}
		if len(owner) != users {
			t.Fatalf("%d tickets given to %d users", len(owner), users)
		}
		st, _, err := c.join(context.Background(), "u7", 0)
		if err != nil || st.Ticket != ticket["u7"] || st.Waiting != users {
			t.Errorf("u7 joins again: ticket %d of %d waiting (%v), want %d of %d", st.Ticket, st.Waiting, err, ticket["u7"], users)
		}
	})
}

// stalledBatcher is a batcher on the machine's Redis through a proxy, its
// script loaded and its calls counted.
func stalledBatcher(t *testing.T, timeout time.Duration) (*joinBatcher, *testenv.Proxy, *countScripts) {
	t.Helper()
	b := testenv.Real(t)
	opt, err := redis.ParseURL(b.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, opt.Addr)
	opt.Addr = proxy.Addr()
	// Deadlines do not cut a read short, as on the service's client, and
	// reads wait long: only the batcher's own bound ends a wait.
	opt.ContextTimeoutEnabled = false
	opt.ReadTimeout = time.Minute
	opt.MaxRetries = -1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	calls := &countScripts{}
	rdb.AddHook(calls)
	j := batcher(t, rdb, b.KeyPrefix, 500+nextItem.Add(1), timeout)
	setUpRoom(t, j)
	if st, _, err := j.join(context.Background(), "first", 0); err != nil || st.Ticket != 1 {
		t.Fatalf("first join: ticket %d, %v", st.Ticket, err)
	}
	calls.n.Store(0)
	return j, proxy, calls
}

// While a batch is in flight the arrivals queue, and the next calls take
// them all, maxJoinBatch at a time: duplicates in one batch get one
// ticket, and a caller that gave up meanwhile returns at once and is not
// sent.
func TestJoinBatchCarriesTheQueue(t *testing.T) {
	j, proxy, calls := stalledBatcher(t, 30*time.Second)
	ctx := context.Background()
	proxy.Stall()
	inFlight := make(chan error, 1)
	go func() { _, _, err := j.join(ctx, "held", 0); inFlight <- err }()
	for calls.n.Load() != 1 {
		time.Sleep(time.Millisecond) // the first join goes at once, alone
	}

	const users = 300 // three batches of at most 128
	type answer struct {
		user string
		st   room.Status
		err  error
	}
	answers := make(chan answer, 2*users)
	var wg sync.WaitGroup
	for u := range users {
		for range 1 + u%2 { // every other user twice
			wg.Go(func() {
				user := fmt.Sprintf("q%d", u)
				st, _, err := j.join(ctx, user, 0)
				answers <- answer{user, st, err}
			})
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { _, _, err := j.join(cctx, "quitter", 0); gaveUp <- err }()
	queued := users + users/2 + 1
	awaitQueued(t, j, queued)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) || !errors.Is(joinErr(err), stock.ErrUnavailable) {
		t.Errorf("the caller who gave up: %v (as the API's: %v), want context.Canceled, unavailable", err, joinErr(err))
	}

	proxy.Heal()
	if err := <-inFlight; err != nil {
		t.Fatalf("the join in flight during the stall: %v", err)
	}
	wg.Wait()
	close(answers)
	ticket := map[string]int64{}
	owner := map[int64]string{}
	for a := range answers {
		if a.err != nil {
			t.Fatalf("join %s: %v", a.user, a.err)
		}
		if prev, ok := ticket[a.user]; ok && prev != a.st.Ticket {
			t.Errorf("%s got tickets %d and %d", a.user, prev, a.st.Ticket)
		}
		if prev, ok := owner[a.st.Ticket]; ok && prev != a.user {
			t.Errorf("ticket %d given to %s and %s", a.st.Ticket, prev, a.user)
		}
		ticket[a.user], owner[a.st.Ticket] = a.st.Ticket, a.user
	}
	// Tickets 1 and 2 went to "first" and "held"; the queue's users have
	// 3..users+2, and "quitter" none.
	for tk := int64(3); tk <= users+2; tk++ {
		if _, ok := owner[tk]; !ok {
			t.Fatalf("ticket %d never given: the queue's tickets are not 3..%d", tk, users+2)
		}
	}
	wantCalls := int64(1 + (queued+maxJoinBatch-1)/maxJoinBatch) // the held one, then the queue (the quitter taken, not sent)
	if n := calls.n.Load(); n != wantCalls {
		t.Errorf("%d script calls for 1 + %d queued joins, want %d (batches of at most %d)", n, queued, wantCalls, maxJoinBatch)
	}
	st, _, err := j.join(ctx, "next", 0)
	if err != nil || st.Ticket != users+3 {
		t.Errorf("the next user: ticket %d (%v), want %d: the one who gave up took no place", st.Ticket, err, users+3)
	}
}

// Redis stalled or down: every waiter, the one in flight and the queued
// ones, has its 503 within the batcher's timeout; nobody hangs.
func TestJoinBatchRedisStalledOrDown(t *testing.T) {
	for _, f := range []struct {
		name  string
		fault func(*testenv.Proxy)
	}{{"stalled", (*testenv.Proxy).Stall}, {"down", (*testenv.Proxy).Cut}} {
		t.Run(f.name, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			j, proxy, _ := stalledBatcher(t, timeout)
			f.fault(proxy)
			var wg sync.WaitGroup
			for u := range 50 {
				wg.Go(func() {
					start := time.Now()
					// No deadline of its own (a request's is 10 s): the
					// batcher's timeout, the Service's RedisTimeout, bounds it.
					_, _, err := j.join(context.Background(), fmt.Sprintf("w%d", u), 0)
					if took := time.Since(start); !errors.Is(joinErr(err), stock.ErrUnavailable) || took > 3*time.Second {
						t.Errorf("join with redis %s: %v after %v, want unavailable within about %v", f.name, err, took, timeout)
					}
				})
			}
			wg.Wait()
			proxy.Heal() // the stalled call ends
		})
	}
}

// A join without the room is ErrNoRoom, and after the service closed its
// batches, a 503.
func TestJoinBatchNoRoomAndShutdown(t *testing.T) {
	b := testenv.Real(t)
	j := batcher(t, b.Universal(t), b.KeyPrefix, 500+nextItem.Add(1), time.Second)
	if _, _, err := j.join(context.Background(), "ann", 0); !errors.Is(err, room.ErrNoRoom) {
		t.Errorf("join without a room: %v, want ErrNoRoom", err)
	}
	if _, _, err := j.join(context.Background(), "a b", 0); !errors.Is(err, room.ErrInvalid) {
		t.Errorf("join with a bad user id: %v, want ErrInvalid", err)
	}
	j.spawn.Close()
	if _, _, err := j.join(context.Background(), "ann", 0); !errors.Is(err, stock.ErrUnavailable) {
		t.Errorf("join after Close: %v, want unavailable", err)
	}
}
