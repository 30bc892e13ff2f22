package lock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

type lostRecorder struct {
	mu   sync.Mutex
	errs []error
}

func (r *lostRecorder) onLost(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *lostRecorder) get() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

func TestWatchdogKeepsLockAlive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	var lost lostRecorder

	// 300 ms: six and more TTLs pass while it is held, and a refresh every
	// 100 ms survives a 200 ms pause of the process (the package's tests
	// run in parallel on two busy cores; at 100 ms a 67 ms pause lost it).
	l, err := c.Obtain(ctx, key, 300*time.Millisecond, &lock.Options{Watchdog: &lock.WatchdogOptions{OnLost: lost.onLost}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if held, err := l.Held(ctx); err != nil || !held {
		t.Fatalf("after 2s a 300ms lock with watchdog: Held = %v, %v", held, err)
	}
	if err := l.Context().Err(); err != nil {
		t.Errorf("lease context cancelled: %v", context.Cause(l.Context()))
	}
	if d := pttl(t, rdb, "{"+key+"}"); d <= 0 || d > 300*time.Millisecond {
		t.Errorf("PTTL = %v, want (0, 300ms]", d)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond) // three watchdog intervals and more
	if exists(t, rdb, "{"+key+"}") {
		t.Error("watchdog recreated or kept the lock after Release")
	}
	if errs := lost.get(); len(errs) != 0 {
		t.Errorf("OnLost called after a clean Release: %v", errs)
	}
}

func TestWatchdogStopsWhenKeyDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	var lost lostRecorder

	// 1s TTL (refresh every 333ms): slow enough that a loaded machine does
	// not let the lease lapse before the watchdog sees the deletion.
	l, err := c.Obtain(ctx, key, time.Second, &lock.Options{Watchdog: &lock.WatchdogOptions{OnLost: lost.onLost}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := rdb.Del(ctx, "{"+key+"}").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease context still alive 2s after the key was deleted")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, lock.ErrExpired) {
		t.Errorf("lease cause = %v, want ErrExpired", cause)
	}
	time.Sleep(700 * time.Millisecond) // two more watchdog intervals
	if exists(t, rdb, "{"+key+"}") {
		t.Error("watchdog revived a deleted lock")
	}
	errs := lost.get()
	if len(errs) != 1 || !errors.Is(errs[0], lock.ErrNotHeld) {
		t.Errorf("OnLost calls = %v, want one ErrNotHeld", errs)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrExpired) {
		t.Errorf("Release = %v, want ErrExpired", err)
	}
}

func TestWatchdogHoldLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	var lost lostRecorder

	// A 300 ms TTL refreshed every 100 ms up to a 900 ms hold: a pause of
	// the process under 200 ms cannot let it lapse before the limit.
	l, err := c.Obtain(ctx, key, 300*time.Millisecond,
		&lock.Options{Watchdog: &lock.WatchdogOptions{MaxHold: 900 * time.Millisecond, OnLost: lost.onLost}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Context().Done():
	case <-time.After(3 * time.Second):
		t.Fatal("lease context alive 3s into a 900ms hold limit")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, lock.ErrLeaseExpired) {
		t.Errorf("lease cause = %v, want ErrLeaseExpired", cause)
	}
	if errs := lost.get(); len(errs) != 1 || !errors.Is(errs[0], lock.ErrHoldLimit) {
		t.Errorf("OnLost calls = %v, want one ErrHoldLimit", errs)
	}
	for exists(t, rdb, "{"+key+"}") {
		time.Sleep(10 * time.Millisecond) // expires by its TTL; the test timeout catches a hang
	}
	_ = l.Release(ctx)
}

type refreshFailures struct {
	lock.NopObserver
	n atomic.Int32
}

func (r *refreshFailures) RefreshFailed(ev lock.RefreshEvent) {
	if ev.Watchdog {
		r.n.Add(1)
	}
}

// While Redis stalls (CLIENT PAUSE) refreshes time out; the watchdog retries
// them and the lock survives.
func TestWatchdogRetriesTransientErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := privateRedis(t)
	rdb := dial(t, &redis.Options{Addr: admin.Options().Addr, ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	var failures refreshFailures
	c := newClient(t, rdb, &lock.ClientOptions{Observer: &failures})
	var lost lostRecorder

	l, err := c.Obtain(ctx, "paused", 1500*time.Millisecond, &lock.Options{Watchdog: &lock.WatchdogOptions{OnLost: lost.onLost}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 600, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if failures.n.Load() == 0 {
		t.Fatal("no refresh failed during the pause; the test did not exercise retries")
	}
	if held, err := l.Held(ctx); err != nil || !held {
		t.Errorf("after the pause: Held = %v, %v", held, err)
	}
	if err := l.Context().Err(); err != nil {
		t.Errorf("lease cancelled: %v", context.Cause(l.Context()))
	}
	if errs := lost.get(); len(errs) != 0 {
		t.Errorf("OnLost = %v", errs)
	}
	if err := l.Release(ctx); err != nil {
		t.Error(err)
	}
}
