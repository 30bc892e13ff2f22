package shop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// stallGuard is a writeGuard that holds every write before its
// transaction until released: a database as slow as the test wants.
type stallGuard struct {
	entered chan struct{} // one receive per write that reached the guard
	release chan struct{} // closed: the writes go on
	fail    chan struct{} // a send fails one write
}

func newStallGuard() *stallGuard {
	return &stallGuard{entered: make(chan struct{}, 16), release: make(chan struct{}), fail: make(chan struct{})}
}

// errStalledWrite is the stalled writes' failure once failed.
var errStalledWrite = fmt.Errorf("test: write failed: %w", stock.ErrUnavailable)

func (g *stallGuard) hold(ctx context.Context, _ writeKey) (int64, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return 0, nil // 0: no fence
	case <-g.fail:
		return 0, errStalledWrite
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (g *stallGuard) raiseFence(ctx context.Context, wk writeKey) (int64, error) {
	return g.hold(ctx, wk)
}

func (g *stallGuard) done(writeKey, bool) {}

// Promise 4 with a slow first request (found by TestConcurrencyProof on lua
// items with 8 buckets under load, where moves between bucket rows made a
// write outlast the replay's wait): a replay whose twin still holds the
// user's reservation but has not written its order after ReplayWait must
// not be refused (already_purchased, or sold_out after the sell-out). That
// would give one key a refusal and an order; it answers 503, and the retry
// with the same key after the write gets the order. It is older than the
// bucket rows: a slow database did it on one bucket too.
func TestReplayOfSlowTwinIsNeverRefused(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, k := range []int{1, 8} {
			for _, soldOut := range []bool{false, true} {
				t.Run(fmt.Sprintf("buckets=%d/soldOut=%v", k, soldOut), func(t *testing.T) {
					replayOfSlowTwin(t, b, k, soldOut)
				})
			}
		}
	})
}

func replayOfSlowTwin(t *testing.T, b testenv.Backend, k int, soldOut bool) {
	ctx := context.Background()
	s := newTestService(t, b, Config{ReplayWait: 50 * time.Millisecond, WriteTimeout: time.Minute}, nil)
	guard := newStallGuard()
	s.lua.writer.guard = guard // before any write
	units := int64(k) + 5
	if soldOut {
		units = 1
		// Bob's sold_out below must be remembered: a subscription confirmed
		// between his request and its mark voids the mark (the memo's
		// epoch), and without one a mark holds only a second (under load,
		// CI saw "the sell-out is not known here").
		waitFor(t, "the sold-out memo subscribed", s.soldOut.Subscribed)
	}
	it, err := s.CreateItem(ctx, stock.NewItem{Name: "slow twin", Stock: units, Strategy: stock.StrategyLua, Buckets: k})
	if err != nil {
		t.Fatal(err)
	}
	req := stock.OrderRequest{ItemID: it.ID, UserID: "Ann", IdempotencyKey: "ann-key-1"}
	type answer struct {
		o   *stock.Order
		err error
	}
	first := make(chan answer, 1)
	go func() {
		o, _, err := s.PlaceOrder(ctx, req)
		first <- answer{o, err}
	}()
	released := false
	release := func() {
		if !released {
			released = true
			close(guard.release)
		}
	}
	defer release()
	<-guard.entered // the first request holds Ann's reservation and is writing
	if soldOut {
		// The last unit is Ann's: this process learns the sell-out.
		if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "Bob"}); !errors.Is(err, stock.ErrSoldOut) {
			t.Fatalf("Bob after the last unit was reserved: got %v, want sold out", err)
		}
		if !s.KnownSoldOut(it.ID) {
			t.Fatal("the sell-out is not known here; the replay would not take the sold-out path")
		}
	}

	// The replay while the first request is still writing, past ReplayWait.
	o, _, err := s.PlaceOrder(ctx, req)
	if o != nil || !errors.Is(err, stock.ErrUnavailable) {
		t.Errorf("replay while its twin still writes: got %v, %v; want a 503 (ErrUnavailable) to retry with the same key, not a refusal", o, err)
	}

	release()
	a := <-first
	if a.err != nil {
		t.Fatalf("first request: %v", a.err)
	}
	again, replayed, err := s.PlaceOrder(ctx, req)
	if err != nil || !replayed || again.ID != a.o.ID {
		t.Errorf("retry with the same key after the write: got %v replayed=%v, %v; want order %s replayed", again, replayed, err, a.o.ID)
	}
	// Another key of Ann's now hears the plain refusal: her order is written.
	other := req
	other.IdempotencyKey = "ann-key-2"
	want := stock.ErrAlreadyPurchased
	if soldOut {
		want = stock.ErrSoldOut
	}
	if _, _, err := s.PlaceOrder(ctx, other); !errors.Is(err, want) {
		t.Errorf("Ann with another key after her order: got %v, want %v", err, want)
	}
}

// The other way a twin ends: its write fails and hands the unit back while
// the replay waits. The replay then has nothing left to wait for (the
// reservation is gone without an order) and answers 503 at once, before its
// wait or its context ends, and the retry with the same key buys.
func TestReplayOfFailedTwinAnswersAtOnce(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		rdb := b.Redis(t)
		trap := &pipelineTrap{}
		rdb.AddHook(trap)
		s := newTestService(t, b, Config{ReplayWait: time.Hour, WriteTimeout: time.Minute}, rdb)
		guard := newStallGuard()
		s.lua.writer.guard = guard // before any write
		bg := context.Background()
		it, err := s.CreateItem(bg, stock.NewItem{Name: "failed twin", Stock: 5, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}
		req := stock.OrderRequest{ItemID: it.ID, UserID: "Ann", IdempotencyKey: "ann-key-1"}
		first := make(chan error, 1)
		go func() {
			_, _, err := s.PlaceOrder(bg, req)
			first <- err
		}()
		<-guard.entered // the first request holds Ann's reservation and is writing

		// Once the replay is waiting (it asks whether the reservation is
		// still held), the first request's write fails and hands back.
		trap.arm(func(c redis.Cmder) bool { return c.Name() == "hexists" }, func() {
			guard.fail <- struct{}{}
			if err := <-first; !errors.Is(err, errStalledWrite) {
				t.Errorf("first request: got %v, want its failed write", err)
			}
		})
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		defer cancel()
		o, _, err := s.PlaceOrder(ctx, req)
		if o != nil || !errors.Is(err, stock.ErrUnavailable) {
			t.Errorf("replay of a twin whose write failed: got %v, %v; want a 503 (ErrUnavailable)", o, err)
		}
		if ctx.Err() != nil {
			t.Error("the replay answered only when its context ended, not when the reservation went")
		}
		// The retry buys.
		close(guard.release)
		o, replayed, err := s.PlaceOrder(bg, req)
		if err != nil || replayed {
			t.Fatalf("retry with the same key after the failed write: got %v replayed=%v, %v; want a new order", o, replayed, err)
		}
		if again, replayed, err := s.PlaceOrder(bg, req); err != nil || !replayed || again.ID != o.ID {
			t.Errorf("replay after the retry: got %v replayed=%v, %v; want order %s replayed", again, replayed, err, o.ID)
		}
	})
}

// lua-async: a buyer whose order is queued, not yet written (no writers
// here: as while the database is down), sends another key: the queued
// order's marker names its key, so the answer is already_purchased at
// once, not a 503 after waiting for the database (faulttest's
// TestDatabaseOutageDuringLoad counts such answers). The same key, its
// claim lost (evicted), replays the queued order, again without the
// database.
func TestAsyncOtherKeyOfAQueuedOrderIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{ReplayWait: 50 * time.Millisecond, Queue: queue.Config{Writers: queue.NoWriters}}, nil)
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "queued", Stock: 5, Strategy: stock.StrategyLuaAsync})
		if err != nil {
			t.Fatal(err)
		}
		first, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "ann", IdempotencyKey: "k1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "ann", IdempotencyKey: "k2"}); !errors.Is(err, stock.ErrAlreadyPurchased) {
			t.Errorf("another key of a queued order: %v, want already purchased", err)
		}
		if n, err := s.rdb.Del(ctx, s.keys.Idem(it.ID, "k1")).Result(); err != nil || n != 1 {
			t.Fatalf("delete k1's claim: deleted %d, %v", n, err)
		}
		if o, replay, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "ann", IdempotencyKey: "k1"}); err != nil || !replay || o.ID != first.ID {
			t.Errorf("the same key, its claim lost, the order queued: %+v (replay %v), %v; want order %s", o, replay, err, first.ID)
		}
		if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "ann", IdempotencyKey: "k3"}); !errors.Is(err, stock.ErrAlreadyPurchased) {
			t.Errorf("a third key: %v, want already purchased", err)
		}
	})
}
