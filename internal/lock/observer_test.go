package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

type recorder struct {
	mu       sync.Mutex
	obtained []lock.ObtainEvent
	released []lock.ReleaseEvent
	failed   []lock.RefreshEvent
	lost     []lock.LeaseEvent
}

func (r *recorder) Obtained(ev lock.ObtainEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obtained = append(r.obtained, ev)
}

func (r *recorder) Released(ev lock.ReleaseEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, ev)
}

func (r *recorder) RefreshFailed(ev lock.RefreshEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, ev)
}

func (r *recorder) LeaseLost(ev lock.LeaseEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = append(r.lost, ev)
}

func TestObserverEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	var rec recorder
	c := newClient(t, rdb, &lock.ClientOptions{Observer: &rec})
	key := testKey(t, rdb)

	// A lease long enough that second surely finds it held, however slow
	// the machine is between the two calls; then second waits it out.
	first, err := c.Obtain(ctx, key, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Waits for first to expire: several attempts, measurable wait.
	second, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Wait: 5 * time.Second, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	<-first.Context().Done() // its lease timer fired on its own; nothing else could end it yet
	if err := first.Refresh(ctx, time.Second); !errors.Is(err, lock.ErrHeldByOther) {
		t.Fatalf("Refresh = %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.obtained) != 2 {
		t.Fatalf("%d obtain events, want 2", len(rec.obtained))
	}
	if ev := rec.obtained[0]; ev.Attempts != 1 || ev.Err != nil || ev.Key != key || ev.Waited != 0 {
		t.Errorf("first obtain event %+v", ev)
	}
	if ev := rec.obtained[1]; ev.Attempts < 2 || ev.Waited <= 0 || ev.Latency < ev.Waited || ev.Err != nil {
		t.Errorf("second obtain event %+v: want >= 2 attempts and a wait", ev)
	}
	if len(rec.failed) != 1 || !errors.Is(rec.failed[0].Err, lock.ErrHeldByOther) || rec.failed[0].Watchdog {
		t.Errorf("refresh failures %+v", rec.failed)
	}
	// first's lease ended on its own deadline (before second could obtain).
	if len(rec.lost) != 1 || !errors.Is(rec.lost[0].Cause, lock.ErrLeaseExpired) {
		t.Errorf("lost leases %+v, want first's ErrLeaseExpired", rec.lost)
	}
	if len(rec.released) != 1 || rec.released[0].Err != nil || rec.released[0].Held < 20*time.Millisecond {
		t.Errorf("release events %+v", rec.released)
	}
}
