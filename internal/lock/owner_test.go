package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

func TestReentrancyCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	redisKey := "{" + key + "}"
	owner := lock.NewOwner()
	reentrant := &lock.Options{Owner: owner, Reentrant: true}

	outer, err := c.Obtain(ctx, key, 10*time.Second, reentrant)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Obtain(ctx, key, time.Minute, reentrant)
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if inner.Fence() <= outer.Fence() || inner.Token() != owner.Token() || outer.Token() != owner.Token() {
		t.Errorf("fences %d then %d, tokens %q %q (owner %q)", outer.Fence(), inner.Fence(), outer.Token(), inner.Token(), owner.Token())
	}
	if d := pttl(t, rdb, redisKey); d <= 59*time.Second {
		t.Errorf("a longer re-entry did not extend the TTL: %v", d)
	}
	if _, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Owner: owner}); !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("non-reentrant Obtain by the holder = %v, want ErrNotObtained", err)
	}
	if _, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Owner: lock.NewOwner(), Reentrant: true}); !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("another owner = %v, want ErrNotObtained", err)
	}
	if n := len(owner.Locks()); n != 2 {
		t.Errorf("owner tracks %d locks, want 2", n)
	}

	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !exists(t, rdb, redisKey) {
		t.Fatal("one release of two acquisitions freed the lock")
	}
	if held, _ := outer.Held(ctx); held {
		t.Error("released acquisition still reports Held")
	}
	if held, _ := inner.Held(ctx); !held {
		t.Error("remaining acquisition does not report Held")
	}
	if err := outer.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Refresh of the released acquisition = %v", err)
	}
	if _, err := c.Obtain(ctx, key, time.Minute, nil); !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("others got a lock still held once: %v", err)
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(t, rdb, redisKey) {
		t.Error("lock still held after as many releases as acquires")
	}
	if n := len(owner.Locks()); n != 0 {
		t.Errorf("owner still tracks %d locks", n)
	}
	other, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatalf("Obtain after full release: %v", err)
	}
	_ = other.Release(ctx)
}

func TestOwnerReleaseAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	base := testKey(t, rdb)
	owner := lock.NewOwner()

	var short *lock.Lock
	for i := range 5 {
		ttl := time.Minute
		if i == 2 {
			ttl = 30 * time.Millisecond
		}
		l, err := c.Obtain(ctx, fmt.Sprintf("%s:%d", base, i), ttl, &lock.Options{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			short = l
		}
	}
	<-short.Context().Done()
	time.Sleep(50 * time.Millisecond)
	thief, err := c.Obtain(ctx, short.Key(), time.Minute, &lock.Options{Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	err = owner.ReleaseAll(ctx)
	if !errors.Is(err, lock.ErrHeldByOther) {
		t.Errorf("ReleaseAll = %v, want the lost lock's ErrHeldByOther", err)
	}
	for i := range 5 {
		if k := fmt.Sprintf("{%s:%d}", base, i); i != 2 && exists(t, rdb, k) {
			t.Errorf("%s survived ReleaseAll", k)
		}
	}
	if owner.Locks() != nil && len(owner.Locks()) != 0 {
		t.Errorf("owner still tracks %d locks", len(owner.Locks()))
	}
	if held, _ := thief.Held(ctx); !held {
		t.Error("ReleaseAll released another owner's lock")
	}
	if err := owner.ReleaseAll(ctx); err != nil {
		t.Errorf("second ReleaseAll = %v", err)
	}
	_ = thief.Release(ctx)
}

// One Owner shared by many goroutines obtaining, releasing and listing: run
// under -race. (The seed kept its lock list in an unsynchronised map.)
func TestSeedHole_LocalMapRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	base := testKey(t, rdb)
	owner := lock.NewOwner()

	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
				for _, l := range owner.Locks() {
					_ = l.Fence()
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				l, err := c.Obtain(ctx, fmt.Sprintf("%s:%d:%d", base, g, i), time.Minute, &lock.Options{Owner: owner})
				if err != nil {
					t.Errorf("Obtain: %v", err)
					return
				}
				if i%2 == 1 {
					if err := l.Release(ctx); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	if n := len(owner.Locks()); n != 16*10 {
		t.Fatalf("owner tracks %d locks, want %d", n, 16*10)
	}
	if err := owner.ReleaseAll(ctx); err != nil {
		t.Fatalf("ReleaseAll: %v", err)
	}
	if n := len(owner.Locks()); n != 0 {
		t.Errorf("owner tracks %d locks after ReleaseAll", n)
	}
	for g := range 16 {
		for i := range 20 {
			if k := fmt.Sprintf("{%s:%d:%d}", base, g, i); exists(t, rdb, k) {
				t.Errorf("%s still locked", k)
			}
		}
	}
}

// A re-entry or a Refresh with a shorter TTL never shortens the lock: the
// outer acquisition was promised its lease, and another owner must not get
// the lock while that lease runs.
func TestReentryAndRefreshNeverShorten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	redisKey := "{" + key + "}"
	owner := lock.NewOwner()
	reentrant := &lock.Options{Owner: owner, Reentrant: true}

	outer, err := c.Obtain(ctx, key, 10*time.Second, reentrant)
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Release(ctx)
	inner, err := c.Obtain(ctx, key, 100*time.Millisecond, reentrant)
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if d := pttl(t, rdb, redisKey); d < 9*time.Second {
		t.Errorf("a 100ms re-entry cut the outer 10s lease to PTTL %v", d)
	}
	if err := inner.Refresh(ctx, 50*time.Millisecond); err != nil {
		t.Fatalf("inner Refresh: %v", err)
	}
	if err := outer.Refresh(ctx, 20*time.Millisecond); err != nil {
		t.Fatalf("outer Refresh: %v", err)
	}
	if d := pttl(t, rdb, redisKey); d < 9*time.Second {
		t.Errorf("Refresh with 50ms and 20ms cut the lease to PTTL %v", d)
	}
	time.Sleep(300 * time.Millisecond) // past every shorter TTL asked for
	if other, err := c.Obtain(ctx, key, time.Minute, nil); !errors.Is(err, lock.ErrNotObtained) {
		_ = other.Release(ctx)
		t.Fatalf("another owner obtained the lock 300ms into the outer 10s lease: %v", err)
	}
	if held, err := outer.Held(ctx); err != nil || !held {
		t.Errorf("outer Held 300ms into its 10s lease: got %v, %v; want true", held, err)
	}
	if err := outer.Context().Err(); err != nil {
		t.Errorf("outer lease context ended 300ms into 10s: %v", context.Cause(outer.Context()))
	}
	if err := inner.Release(ctx); err != nil {
		t.Errorf("inner Release: %v", err)
	}
}
