package lock_test

// The lease: a lock's TTL, its refresh and expiry, and the lease context
// that ends before Redis would drop the key.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

func TestRefreshAndExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	redisKey := "{" + key + "}"

	// The refreshed lease is test-sized: a Refresh never shortens a lock
	// (TestReentryAndRefreshNeverShorten), so the expiry below waits it out.
	const refreshed = 2 * time.Second
	l, err := c.Obtain(ctx, key, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refresh(ctx, refreshed); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if d := pttl(t, rdb, redisKey); d <= refreshed-time.Second || d > refreshed {
		t.Errorf("PTTL after Refresh(%v) = %v", refreshed, d)
	}
	// The lease now follows the refresh: well past the first 100ms it is alive.
	time.Sleep(200 * time.Millisecond)
	if err := l.Context().Err(); err != nil {
		t.Errorf("lease cancelled despite refresh: %v", context.Cause(l.Context()))
	}
	if err := l.Refresh(ctx, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	<-l.Context().Done()
	for exists(t, rdb, redisKey) {
		time.Sleep(5 * time.Millisecond)
	}

	if err := l.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrExpired) {
		t.Errorf("Refresh after expiry = %v, want ErrExpired", err)
	}
	if exists(t, rdb, redisKey) {
		t.Error("Refresh revived an expired lock")
	}
	if d, err := l.TTL(ctx); d != 0 || err != nil {
		t.Errorf("TTL after expiry = %v, %v; want 0, nil", d, err)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrExpired) {
		t.Errorf("Release after expiry = %v, want ErrExpired", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrExpired) {
		t.Errorf("Release repeated after expiry = %v, want ErrExpired again", err)
	}
}

// Every acquire, first or re-entrant, leaves the key with a TTL.
func TestKeyHasTTLAfterEveryAcquire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	redisKey := "{" + key + "}"
	owner := lock.NewOwner()

	for i := range 50 {
		opt := &lock.Options{Owner: owner, Reentrant: i%2 == 1}
		l, err := c.Obtain(ctx, key, 10*time.Second, opt)
		if err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		if l.Fence() < 1 {
			t.Fatalf("acquire %d: fence %d", i, l.Fence())
		}
		if d := pttl(t, rdb, redisKey); d <= 0 || d > 10*time.Second {
			t.Fatalf("acquire %d: PTTL = %v", i, d)
		}
		if i%2 == 1 {
			if err := owner.ReleaseAll(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The lease context ends before the key can expire in Redis: when it fires,
// the key is still there (the margin is TTL/100 + 1ms, here 51ms).
func TestLeaseEndsBeforeKeyExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)

	start := time.Now()
	l, err := c.Obtain(ctx, key, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-l.Context().Done()
	if d := pttl(t, rdb, "{"+key+"}"); d <= 0 {
		t.Errorf("lease context outlived the key (PTTL %v)", d)
	}
	if since := time.Since(start); since < 4900*time.Millisecond {
		t.Errorf("lease context ended after %v of a 5s TTL", since)
	}
	_ = l.Release(ctx) // nil or ErrExpired, depending on how fast this runs
}
