package shop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// stallGuard is a writeGuard that holds every write before its
// transaction until released: a database as slow as the test wants.
type stallGuard struct {
	entered chan struct{} // one receive per write that reached the guard
	release chan struct{} // closed: the writes go on
}

func newStallGuard() *stallGuard {
	return &stallGuard{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *stallGuard) hold(ctx context.Context, _ writeKey) (int64, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return 0, nil // 0: no fence
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
