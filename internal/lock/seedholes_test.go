package lock_test

// Regression tests, one per hole in the tutorials this package grew from
// (/work/shared/seeds): each would fail against the seed's algorithm.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

// Seed: SETNX, then EXPIRE in a second command; a crash in between leaves a
// lock without TTL forever. Here value and TTL are set by one script: every
// successful acquire, under contention, is seen with a TTL by its holder.
func TestSeedHole_SetnxExpireSplit(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	redisKey := "{" + key + "}"

	var wg sync.WaitGroup
	var acquired atomic.Int32
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				l, err := c.Obtain(ctx, key, 5*time.Second, &lock.Options{Wait: 30 * time.Second})
				if err != nil {
					t.Errorf("Obtain: %v", err)
					return
				}
				acquired.Add(1)
				if d := pttl(t, rdb, redisKey); d <= 0 || d > 5*time.Second {
					t.Errorf("held lock has PTTL %v, want (0, 5s]", d)
				}
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if acquired.Load() != 200 {
		t.Errorf("acquired %d times, want 200", acquired.Load())
	}
	if exists(t, rdb, redisKey) {
		t.Error("lock left behind")
	}
}

// Seed: when TTL < 0 (which also happens when the key just expired, -2),
// every contender "takes over" with SET, so several hold the lock at once.
// Here contenders racing for an expiring lock produce exactly one holder, and
// a lock without TTL (left by old code) is never taken over.
func TestSeedHole_TTLBelowZeroTakeover(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)

	expiring, err := c.Obtain(ctx, key, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		winners atomic.Int32
		mu      sync.Mutex
		held    []*lock.Lock
	)
	stop := time.Now().Add(600 * time.Millisecond)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				l, err := c.Obtain(ctx, key, time.Minute, nil)
				if err == nil {
					winners.Add(1)
					mu.Lock()
					held = append(held, l)
					mu.Unlock()
				} else if !errors.Is(err, lock.ErrNotObtained) {
					t.Errorf("Obtain: %v", err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if n := winners.Load(); n != 1 {
		t.Fatalf("%d contenders obtained the expired lock, want exactly 1", n)
	}
	if held[0].Fence() != expiring.Fence()+1 {
		t.Errorf("winner's fence %d, want %d", held[0].Fence(), expiring.Fence()+1)
	}
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A lock without TTL, as the seed's SETNX-then-crash leaves it.
	legacy := key + ":legacy"
	if err := rdb.HSet(ctx, "{"+legacy+"}", "owner", "crashed-seed-client").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Obtain(ctx, legacy, time.Minute, &lock.Options{Wait: 100 * time.Millisecond}); !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("Obtain over a TTL-less lock = %v, want ErrNotObtained", err)
	}
	if owner := rdb.HGet(ctx, "{"+legacy+"}", "owner").Val(); owner != "crashed-seed-client" {
		t.Errorf("TTL-less lock taken over by %q", owner)
	}
}

// Seed: seconds, milliseconds, microseconds and nanoseconds mixed up (EXPIRE
// in seconds, "UnixNano()/1e6" compared with seconds, and
// time.Sleep(time.Duration(waitIntervalUs)) sleeping nanoseconds, i.e. a
// busy loop). Here TTLs and waits are time.Duration end to end.
func TestSeedHole_UnitMixup(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	obs := &attemptCounter{}
	c := newClient(t, rdb, &lock.ClientOptions{Observer: obs})
	key := testKey(t, rdb)
	redisKey := "{" + key + "}"

	for _, tc := range []struct {
		ttl      time.Duration
		min, max time.Duration
	}{
		{1500 * time.Millisecond, 1400 * time.Millisecond, 1500 * time.Millisecond},
		{30 * time.Second, 29 * time.Second, 30 * time.Second},
		{2500 * time.Microsecond, time.Millisecond, 3 * time.Millisecond}, // PX 3: rounded up, never 2 or 0
	} {
		l, err := c.Obtain(ctx, key, tc.ttl, nil)
		if err != nil {
			t.Fatalf("ttl %v: %v", tc.ttl, err)
		}
		d := pttl(t, rdb, redisKey)
		if tc.ttl > 100*time.Millisecond && (d < tc.min || d > tc.max) {
			t.Errorf("ttl %v stored as PTTL %v, want [%v, %v]", tc.ttl, d, tc.min, tc.max)
		}
		if tc.ttl < 100*time.Millisecond && d > tc.max {
			t.Errorf("ttl %v stored as PTTL %v, want <= %v", tc.ttl, d, tc.max)
		}
		_ = l.Release(ctx)
	}

	// A waiter with a 50ms minimum backoff sleeps: over 300ms it makes a
	// handful of attempts, not thousands.
	holder, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	obs.reset()
	_, err = c.Obtain(ctx, key, time.Minute, &lock.Options{Wait: 300 * time.Millisecond, NoWakeup: true, MinBackoff: 50 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("waiter: %v", err)
	}
	if n := obs.attempts.Load(); n < 2 || n > 10 {
		t.Errorf("waiter made %d attempts in 300ms with a 50ms backoff, want 2..10", n)
	}
}

type attemptCounter struct {
	lock.NopObserver
	attempts atomic.Int64
}

func (a *attemptCounter) Obtained(ev lock.ObtainEvent) { a.attempts.Add(int64(ev.Attempts)) }
func (a *attemptCounter) reset()                       { a.attempts.Store(0) }

// Seed: unlock is a bare DEL, so a holder whose lock expired deletes its
// successor's lock. Here release and refresh check the owner token.
func TestSeedHole_ForeignUnlockAfterExpiry(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	redisKey := "{" + key + "}"

	a, err := c.Obtain(ctx, key, 30*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	for exists(t, rdb, redisKey) {
		time.Sleep(5 * time.Millisecond)
	}
	b, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := pttl(t, rdb, redisKey)
	if err := a.Refresh(ctx, time.Hour); !errors.Is(err, lock.ErrHeldByOther) {
		t.Errorf("expired holder's Refresh = %v, want ErrHeldByOther", err)
	}
	if err := a.Release(ctx); !errors.Is(err, lock.ErrHeldByOther) {
		t.Errorf("expired holder's Release = %v, want ErrHeldByOther", err)
	}
	if owner := rdb.HGet(ctx, redisKey, "owner").Val(); owner != b.Token() {
		t.Fatalf("B's lock was deleted or changed: owner %q", owner)
	}
	if after := pttl(t, rdb, redisKey); after > before {
		t.Errorf("B's PTTL grew from %v to %v: the foreign refresh touched it", before, after)
	}
	if held, _ := b.Held(ctx); !held {
		t.Error("B lost its lock")
	}
	if err := b.Release(ctx); err != nil {
		t.Error(err)
	}
}
