package shop

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// stuckGuard is a writeGuard whose hold waits for the test and then fails
// as unavailable (a lock that could not be had, a stalled database): the
// batch it guards writes nothing.
type stuckGuard struct {
	holds   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (g *stuckGuard) hold(ctx context.Context, _ writeKey) (int64, error) {
	g.holds.Add(1)
	g.entered <- struct{}{}
	<-g.release
	// The worst cause for the orders behind: an outcome not known.
	return 0, fmt.Errorf("commit cut: %w: %w", store.ErrMaybeCommitted, stock.ErrUnavailable)
}

func (g *stuckGuard) raiseFence(context.Context, writeKey) (int64, error) { return 0, nil }
func (g *stuckGuard) done(writeKey, bool)                                 {}

// TestOrdersBehindAnUnavailableBatchFailAtOnce: orders queued while a batch
// waits on a backend that then refuses it as unavailable are answered 503
// with it, not after a second wait of the same length (the stall promise:
// within the step's timeout plus the lock wait already spent); an order
// queued after that gets a new try.
func TestOrdersBehindAnUnavailableBatchFailAtOnce(t *testing.T) {
	t.Parallel()
	g := &stuckGuard{entered: make(chan struct{}, 4), release: make(chan struct{})}
	w := newOrderWriter(nil, g)
	t.Cleanup(w.close)
	order := func(user string) *stock.Order { return &stock.Order{ID: "o-" + user, ItemID: 1, UserID: user} }
	answers := make(chan error, 3)
	go func() { answers <- w.write(context.Background(), order("first"), "", false, 1, nil) }()
	<-g.entered // the first batch waits on the guard
	behind := make(chan error, 1)
	go func() { behind <- w.write(context.Background(), order("behind"), "", false, 1, nil) }()
	waitQueued(t, w, 1)
	close(g.release)
	if err := <-answers; !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("the first order: got %v, want unavailable", err)
	}
	if err := <-behind; !errors.Is(err, stock.ErrUnavailable) || errors.Is(err, store.ErrMaybeCommitted) {
		t.Fatalf("the order queued behind it: got %v, want unavailable, and not written (its unit goes back at once)", err)
	}
	if n := g.holds.Load(); n != 1 {
		t.Fatalf("guard holds: got %d, want 1 (the order behind answered with the failed batch, not tried again)", n)
	}
	// A new order is tried again.
	go func() { answers <- w.write(context.Background(), order("later"), "", false, 1, nil) }()
	<-g.entered
	if err := <-answers; !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("a later order: got %v, want unavailable", err)
	}
	if n := g.holds.Load(); n != 2 {
		t.Fatalf("guard holds: got %d, want 2 (a later order gets its own try)", n)
	}
}

// waitQueued waits until n orders sit in item 1's queue.
func waitQueued(t *testing.T, w *orderWriter, n int) {
	t.Helper()
	for {
		w.mu.Lock()
		q := w.queues[writeKey{item: 1, buckets: 1}]
		got := 0
		if q != nil {
			got = len(q.ch)
		}
		w.mu.Unlock()
		if got >= n {
			return
		}
		runtime.Gosched()
	}
}
