package lock_test

// Regression tests, one per hole in the tutorials this package grew from
// (/work/shared/seeds): each would fail against the seed's algorithm.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// Seed: SETNX, then EXPIRE in a second command; a crash in between leaves a
// lock without TTL forever. Here a client "crashes" after its first 1, 2 or
// 3 commands reached Redis (later ones are never sent, as from a dead
// process): whatever it left has a TTL, and another client obtains the lock
// once that TTL has run out.
func TestSeedHole_SetnxExpireSplit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	healthy := newClient(t, rdb, nil)
	for sent := int32(1); sent <= 3; sent++ {
		key := testKey(t, rdb)
		crashing := redis.NewClient(rdb.Options())
		crash := &crashAfter{}
		crash.left.Store(sent)
		crashing.AddHook(crash)
		c := lock.New(crashing, nil)
		_, _ = c.Obtain(ctx, key, 300*time.Millisecond, nil)
		_ = c.Close()
		_ = crashing.Close()
		if d := pttl(t, rdb, "{"+key+"}"); d == -1 || d > 300*time.Millisecond {
			t.Errorf("crash after %d commands: the lock is left with PTTL %v, want none or (0, 300ms]", sent, d)
		}
		l, err := healthy.Obtain(ctx, key, time.Minute, &lock.Options{Wait: 2 * time.Second})
		if err != nil {
			t.Errorf("crash after %d commands: another client's Obtain with a 2s wait: %v, want the lock once 300ms have passed", sent, err)
			continue
		}
		_ = l.Release(ctx)
	}

	// Under contention, every holder sees its lock with a TTL.
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

var errCrashed = errors.New("test: this client crashed")

// crashAfter lets a client's first `left` commands through and fails every
// later one before it is sent, as if the process had died. Pipelines (the
// connection's own HELLO on dial) are not counted; after the crash they
// fail too.
type crashAfter struct{ left atomic.Int32 }

func (h *crashAfter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *crashAfter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.left.Add(-1) < 0 {
			cmd.SetErr(errCrashed)
			return errCrashed
		}
		return next(ctx, cmd)
	}
}
func (h *crashAfter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.left.Load() < 0 {
			return errCrashed
		}
		return next(ctx, cmds)
	}
}

// Seed: when TTL < 0 (which also happens when the key just expired, -2),
// every contender "takes over" with SET, so several hold the lock at once.
// Here contenders racing for an expiring lock produce exactly one holder,
// and a lock without TTL (left by a client that crashed between SETNX and
// EXPIRE) is recovered: it gets a TTL, expires, and exactly one of the
// contenders racing for it obtains it.
func TestSeedHole_TTLBelowZeroTakeover(t *testing.T) {
	t.Parallel()
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

	// A lock without TTL, as the seed's SETNX-then-crash leaves it, raced
	// by 20 contenders that start together; the first to win stops the rest.
	legacy := key + ":legacy"
	if err := rdb.HSet(ctx, "{"+legacy+"}", "owner", "crashed-seed-client").Err(); err != nil {
		t.Fatal(err)
	}
	raceCtx, won := context.WithCancel(ctx)
	defer won()
	start := make(chan struct{})
	var legacyWinners []*lock.Lock
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// The first contender gives the TTL-less lock the TTL it asks
			// for: short, so the lock is recovered within the test.
			l, err := c.Obtain(raceCtx, legacy, 300*time.Millisecond, &lock.Options{Wait: 3 * time.Second, MinBackoff: 10 * time.Millisecond, PollInterval: 50 * time.Millisecond})
			if err != nil {
				return
			}
			won()
			mu.Lock()
			legacyWinners = append(legacyWinners, l)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if n := len(legacyWinners); n != 1 {
		t.Fatalf("%d contenders obtained the TTL-less lock, want exactly 1 (recovered, not taken over by all)", n)
	}
	if owner := rdb.HGet(ctx, "{"+legacy+"}", "owner").Val(); owner != legacyWinners[0].Token() {
		t.Errorf("TTL-less lock: owner %q, want the winner %q", owner, legacyWinners[0].Token())
	}
	_ = legacyWinners[0].Release(ctx)
}

// Seed: seconds, milliseconds, microseconds and nanoseconds mixed up (EXPIRE
// in seconds, "UnixNano()/1e6" compared with seconds, and
// time.Sleep(time.Duration(waitIntervalUs)) sleeping nanoseconds, i.e. a
// busy loop). Here TTLs and waits are time.Duration end to end.
func TestSeedHole_UnitMixup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	obs := &attemptCounter{}
	// The PX sent is checked on the wire: a 2.5ms lock may be gone before
	// a PTTL could read it.
	sent := &obtainPX{}
	traced := redis.NewClient(rdb.Options())
	t.Cleanup(func() { _ = traced.Close() })
	traced.AddHook(sent)
	c := newClient(t, traced, &lock.ClientOptions{Observer: obs})
	key := testKey(t, rdb)
	redisKey := "{" + key + "}"

	for _, tc := range []struct {
		ttl      time.Duration
		px       string // PX milliseconds sent to Redis
		min, max time.Duration
	}{
		{1500 * time.Millisecond, "1500", 1400 * time.Millisecond, 1500 * time.Millisecond},
		{30 * time.Second, "30000", 29 * time.Second, 30 * time.Second},
		{2500 * time.Microsecond, "3", 0, 0}, // rounded up, never 2 or 0
	} {
		l, err := c.Obtain(ctx, key, tc.ttl, nil)
		if err != nil {
			t.Fatalf("ttl %v: %v", tc.ttl, err)
		}
		if got := sent.last(); got != tc.px {
			t.Errorf("ttl %v sent as PX %q, want %s", tc.ttl, got, tc.px)
		}
		// Long enough to read back: the script must store milliseconds as
		// milliseconds (PEXPIRE, not EXPIRE).
		if tc.max > 0 {
			if d := pttl(t, rdb, redisKey); d < tc.min || d > tc.max {
				t.Errorf("ttl %v stored as PTTL %v, want [%v, %v]", tc.ttl, d, tc.min, tc.max)
			}
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

// obtainPX records the PX argument of the last acquire script sent.
type obtainPX struct {
	mu sync.Mutex
	px string
}

func (h *obtainPX) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.px
}

func (h *obtainPX) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *obtainPX) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *obtainPX) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// EVALSHA sha 4 lock fence queue waiters token id PX ...: only the
		// acquire script has four keys.
		if args := cmd.Args(); len(args) > 9 && fmt.Sprint(args[2]) == "4" {
			name := strings.ToLower(fmt.Sprint(args[0]))
			if name == "evalsha" || name == "eval" {
				h.mu.Lock()
				h.px = fmt.Sprint(args[9])
				h.mu.Unlock()
			}
		}
		return next(ctx, cmd)
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
	t.Parallel()
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
