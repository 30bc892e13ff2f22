package lock_test

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

func newClient(tb testing.TB, rdb lock.RedisClient, opts *lock.ClientOptions) *lock.Client {
	tb.Helper()
	c := lock.New(rdb, opts)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func TestObtainRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)

	l, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	if l.Key() != key {
		t.Errorf("Key() = %q, want %q", l.Key(), key)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(l.Token()) {
		t.Errorf("Token() = %q, want 128 random bits in hex", l.Token())
	}
	if l.Fence() < 1 {
		t.Errorf("Fence() = %d, want >= 1", l.Fence())
	}
	redisKey := "{" + key + "}"
	if owner := rdb.HGet(ctx, redisKey, "owner").Val(); owner != l.Token() {
		t.Errorf("owner in Redis = %q, want %q", owner, l.Token())
	}
	if d := pttl(t, rdb, redisKey); d <= 59*time.Second || d > time.Minute {
		t.Errorf("PTTL right after Obtain = %v, want (59s, 1m]", d)
	}
	if held, err := l.Held(ctx); err != nil || !held {
		t.Errorf("Held = %v, %v; want true", held, err)
	}
	if d, err := l.TTL(ctx); err != nil || d <= 59*time.Second || d > time.Minute {
		t.Errorf("TTL = %v, %v; want (59s, 1m]", d, err)
	}
	if err := l.Context().Err(); err != nil {
		t.Errorf("lease context already done: %v", err)
	}

	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if exists(t, rdb, redisKey) {
		t.Error("lock key still exists after Release")
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrReleased) || !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second Release = %v, want ErrReleased (an ErrNotHeld)", err)
	}
	if held, err := l.Held(ctx); held {
		t.Errorf("Held after Release = true, %v", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, lock.ErrReleased) {
		t.Errorf("lease context cause after Release = %v, want ErrReleased", cause)
	}
	if err := l.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Refresh after Release = %v, want ErrNotHeld", err)
	}
	if exists(t, rdb, redisKey) {
		t.Error("Refresh after Release recreated the lock")
	}
}

func TestObtainHeldElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)

	first, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Obtain(ctx, key, time.Minute, nil)
	if !errors.Is(err, lock.ErrNotObtained) || second != nil {
		t.Fatalf("second Obtain = %v, %v; want nil, ErrNotObtained", second, err)
	}
	waited, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Wait: 150 * time.Millisecond})
	if !errors.Is(err, lock.ErrNotObtained) || waited != nil {
		t.Fatalf("Obtain with Wait = %v, %v; want nil, ErrNotObtained", waited, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("Wait running out is not a context error, got %v", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatalf("Obtain after Release: %v", err)
	}
	if third.Fence() <= first.Fence() {
		t.Errorf("fence after re-obtain = %d, want > %d", third.Fence(), first.Fence())
	}
	if err := third.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNilLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var l *lock.Lock
	if l.Key() != "" || l.Token() != "" || l.Fence() != 0 {
		t.Error("nil Lock returned non-zero identity")
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release = %v, want ErrNotHeld", err)
	}
	if err := l.Refresh(ctx, time.Second); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Refresh = %v, want ErrNotHeld", err)
	}
	if d, err := l.TTL(ctx); d != 0 || err != nil {
		t.Errorf("TTL = %v, %v; want 0, nil", d, err)
	}
	if held, err := l.Held(ctx); held || err != nil {
		t.Errorf("Held = %v, %v; want false, nil", held, err)
	}
	if l.Context().Err() == nil {
		t.Error("nil Lock's Context is not cancelled")
	}
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)

	if _, err := c.Obtain(ctx, "", time.Second, nil); !errors.Is(err, lock.ErrInvalidKey) {
		t.Errorf("empty key: %v, want ErrInvalidKey", err)
	}
	for _, ttl := range []time.Duration{0, -1, 30 * time.Nanosecond, 999 * time.Microsecond, -time.Second} {
		if l, err := c.Obtain(ctx, key, ttl, nil); !errors.Is(err, lock.ErrInvalidTTL) || l != nil {
			t.Errorf("ttl %v: %v, %v; want ErrInvalidTTL", ttl, l, err)
		}
	}
	if exists(t, rdb, "{"+key+"}") {
		t.Fatal("a rejected Obtain created the lock")
	}
	for name, opt := range map[string]*lock.Options{
		"negative wait":            {Wait: -time.Second},
		"min above max":            {MinBackoff: time.Second, MaxBackoff: time.Millisecond},
		"negative poll":            {PollInterval: -time.Second},
		"reentrant without owner":  {Reentrant: true},
		"watchdog interval >= ttl": {Watchdog: &lock.WatchdogOptions{Interval: time.Second}},
	} {
		if _, err := c.Obtain(ctx, key, time.Second, opt); !errors.Is(err, lock.ErrInvalidOptions) {
			t.Errorf("%s: %v, want ErrInvalidOptions", name, err)
		}
	}

	l, err := c.Obtain(ctx, key, time.Millisecond, nil)
	if err != nil {
		t.Fatalf("1ms TTL: %v", err)
	}
	if l.Fence() < 1 {
		t.Errorf("1ms lock has fence %d", l.Fence())
	}
	_ = l.Release(ctx) // may well have expired already
	if err := l.Refresh(ctx, 999*time.Microsecond); !errors.Is(err, lock.ErrInvalidTTL) {
		t.Errorf("Refresh 999µs: %v, want ErrInvalidTTL", err)
	}
}

func TestHashTag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	base := testKey(t, rdb)

	tagged := "seckill:{" + base + ":item:42}:lock"
	l, err := c.Obtain(ctx, tagged, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !exists(t, rdb, tagged) || !exists(t, rdb, tagged+":fence") {
		t.Errorf("tagged key %q was not used as is", tagged)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	plain := base + ":plain"
	l, err = c.Obtain(ctx, plain, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if exists(t, rdb, plain) || !exists(t, rdb, "{"+plain+"}") || !exists(t, rdb, "{"+plain+"}:fence") {
		t.Errorf("untagged key %q was not wrapped as {key}", plain)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !exists(t, rdb, "{"+plain+"}:released") {
		t.Errorf("release record not stored beside the lock")
	}
}

func TestExactlyOneOf100Concurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)

	var (
		start    = make(chan struct{})
		wg       sync.WaitGroup
		obtained atomic.Int32
		mu       sync.Mutex
		winners  []*lock.Lock
	)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l, err := c.Obtain(ctx, key, time.Minute, nil)
			switch {
			case err == nil:
				obtained.Add(1)
				mu.Lock()
				winners = append(winners, l)
				mu.Unlock()
			case !errors.Is(err, lock.ErrNotObtained):
				t.Errorf("Obtain: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := obtained.Load(); n != 1 {
		t.Fatalf("%d of 100 goroutines obtained the lock, want exactly 1", n)
	}
	if err := winners[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Many waiters on two Clients (as if two service instances), each holding
// briefly: never two holders at once, and fences strictly increase in the
// order the lock was held.
func TestMutualExclusionAndFenceOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	clients := []*lock.Client{newClient(t, rdb, nil), newClient(t, newRedis(t), nil)}
	key := testKey(t, rdb)

	var (
		wg        sync.WaitGroup
		inside    atomic.Int32
		mu        sync.Mutex
		lastFence int64
	)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[g%2]
			for range 10 {
				l, err := c.Obtain(ctx, key, 10*time.Second, &lock.Options{Wait: 20 * time.Second})
				if err != nil {
					t.Errorf("Obtain: %v", err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				mu.Lock()
				if l.Fence() <= lastFence {
					t.Errorf("fence %d after %d", l.Fence(), lastFence)
				}
				lastFence = l.Fence()
				mu.Unlock()
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}()
	}
	wg.Wait()
}

// A holder paused past its TTL is fenced off, and its release leaves the
// successor's lock alone.
func TestPausedHolderIsFenced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	resource := key + ":resource"
	redisKey := "{" + key + "}"

	a, err := c.Obtain(ctx, key, 50*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-a.Context().Done() // A "pauses" past its lease
	if cause := context.Cause(a.Context()); !errors.Is(cause, lock.ErrLeaseExpired) {
		t.Errorf("A's lease cause = %v, want ErrLeaseExpired", cause)
	}
	time.Sleep(60 * time.Millisecond)

	b, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("B: %v", err)
	}
	if b.Fence() != a.Fence()+1 {
		t.Errorf("B's fence = %d, want A's %d + 1", b.Fence(), a.Fence())
	}
	if !writeFenced(t, rdb, resource, b.Fence(), "B") {
		t.Fatal("B's write refused")
	}
	if writeFenced(t, rdb, resource, a.Fence(), "A") {
		t.Error("A's late write with an older fence was accepted")
	}
	if v := rdb.HGet(ctx, resource, "value").Val(); v != "B" {
		t.Errorf("resource = %q, want B", v)
	}

	before := pttl(t, rdb, redisKey)
	if err := a.Release(ctx); !errors.Is(err, lock.ErrHeldByOther) || !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("A's Release = %v, want ErrHeldByOther (an ErrNotHeld)", err)
	}
	if err := a.Refresh(ctx, time.Hour); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("A's Refresh after Release = %v, want ErrNotHeld", err)
	}
	if owner := rdb.HGet(ctx, redisKey, "owner").Val(); owner != b.Token() {
		t.Errorf("owner after A's release = %q, want B's %q", owner, b.Token())
	}
	if after := pttl(t, rdb, redisKey); after > before || after < before-5*time.Second {
		t.Errorf("B's PTTL went from %v to %v across A's release", before, after)
	}
	if err := b.Release(ctx); err != nil {
		t.Errorf("B's Release: %v", err)
	}
}

func TestScriptFlushNoScriptFallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := privateRedis(t)
	c := newClient(t, rdb, nil)

	l, err := c.Obtain(ctx, "flush", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Refresh(ctx, time.Minute); err != nil {
		t.Errorf("Refresh after SCRIPT FLUSH: %v", err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release after SCRIPT FLUSH: %v", err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	l2, err := c.Obtain(ctx, "flush", time.Minute, nil)
	if err != nil {
		t.Fatalf("Obtain after SCRIPT FLUSH: %v", err)
	}
	if l2.Fence() != l.Fence()+1 {
		t.Errorf("fence %d after %d", l2.Fence(), l.Fence())
	}
	if err := l2.Release(ctx); err != nil {
		t.Error(err)
	}
}

var _ = redis.Nil
