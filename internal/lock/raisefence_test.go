package lock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

// A failover promotes a replica that missed the last INCRs of the fence
// counter: the counter exists but is below the fences the resource has seen,
// so FenceFloor (which seeds only a missing counter) does not help and every
// new holder is refused as stale. RaiseFence with the resource's fence puts
// the next fence above it, and the holder from before the raise stays
// refused.
func TestRaiseFenceLaggingCounter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	resource := key + ":resource"
	fenceKey := "{" + key + "}:fence"

	for range 30 {
		l, err := c.Obtain(ctx, key, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !writeFenced(t, rdb, resource, l.Fence(), "before") {
			t.Fatalf("fence %d refused before the failover", l.Fence())
		}
		_ = l.Release(ctx)
	}
	// The promoted replica is 20 INCRs behind and never saw the lock hash.
	if err := rdb.Set(ctx, fenceKey, 10, 0).Err(); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	stale, err := c.Obtain(ctx, key, time.Minute, &lock.Options{FenceFloor: floorAt(30, &calls)})
	if err != nil {
		t.Fatal(err)
	}
	if stale.Fence() != 11 || calls.Load() != 0 || writeFenced(t, rdb, resource, stale.Fence(), "lagging") {
		t.Fatalf("lagging counter: fence %d after %d FenceFloor calls; want 11 after 0, refused by the resource that saw 30", stale.Fence(), calls.Load())
	}
	if err := stale.Release(ctx); err != nil {
		t.Fatal(err)
	}

	got, err := c.RaiseFence(ctx, key, 30)
	if err != nil || got != 30 {
		t.Fatalf("RaiseFence(30): got %d, %v; want 30, nil", got, err)
	}
	l, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() != 31 || !writeFenced(t, rdb, resource, l.Fence(), "after the raise") {
		t.Errorf("after RaiseFence(30): fence %d; want 31, accepted", l.Fence())
	}
	if writeFenced(t, rdb, resource, stale.Fence(), "stale again") {
		t.Errorf("the resource accepted the lagging fence %d after the raise", stale.Fence())
	}
	_ = l.Release(ctx)

	// Only ever raises: a lower floor leaves the counter alone.
	if got, err := c.RaiseFence(ctx, key, 5); err != nil || got != 31 {
		t.Errorf("RaiseFence(5) with the counter at 31: got %d, %v; want 31 (unchanged)", got, err)
	}
	if n, _ := rdb.Get(ctx, fenceKey).Int64(); n != 31 {
		t.Errorf("counter after RaiseFence(5): got %d, want 31", n)
	}
	// A missing counter is set.
	if err := rdb.Del(ctx, fenceKey).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.RaiseFence(ctx, key, 40); err != nil || got != 40 {
		t.Errorf("RaiseFence(40) on a missing counter: got %d, %v; want 40", got, err)
	}
}

func TestRaiseFenceRejectsBadInput(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	if _, err := c.RaiseFence(context.Background(), "", 1); !errors.Is(err, lock.ErrInvalidKey) {
		t.Errorf("empty key: got %v, want ErrInvalidKey", err)
	}
	if _, err := c.RaiseFence(context.Background(), key, -1); !errors.Is(err, lock.ErrInvalidOptions) {
		t.Errorf("negative floor: got %v, want ErrInvalidOptions", err)
	}
	if exists(t, rdb, "{"+key+"}:fence") {
		t.Error("a refused RaiseFence set the counter")
	}
}

// Instances race the raise, each from its own (possibly old) read of the
// resource, while others obtain, write and release: the counter never goes
// down, no two holders ever get the same fence, and every holder's write
// is accepted by a resource that refuses any fence not above all it saw,
// except the holder from before the raises, which stays refused.
func TestRaiseFenceRacingInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	key := testKey(t, rdb)
	resource := key + ":resource"
	c := newClient(t, rdb, nil)

	old, err := c.Obtain(ctx, key, 50*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, resource, "fence", 100).Err(); err != nil { // written by holders the lagging counter forgot
		t.Fatal(err)
	}

	var mu sync.Mutex
	fences := map[int64]bool{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t, rdb, nil)
			for range 5 {
				l, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Wait: 10 * time.Second})
				if err != nil {
					t.Errorf("Obtain: %v", err)
					return
				}
				mu.Lock()
				dup := fences[l.Fence()]
				fences[l.Fence()] = true
				mu.Unlock()
				if dup {
					t.Errorf("fence %d granted twice", l.Fence())
				}
				if writeFenced(t, rdb, resource, l.Fence(), "holder") {
					_ = l.Release(ctx)
					continue
				}
				// Refused as stale: release, raise from a read of the
				// resource (some instances from an older read), retry.
				_ = l.Release(ctx)
				seen, err := rdb.HGet(ctx, resource, "fence").Int64()
				if err != nil {
					t.Errorf("read resource: %v", err)
					return
				}
				if i%2 == 1 {
					seen -= 50 // an old read: must not lower the counter
				}
				before, _ := rdb.Get(ctx, "{"+key+"}:fence").Int64()
				after, err := c.RaiseFence(ctx, key, seen)
				if err != nil {
					t.Errorf("RaiseFence: %v", err)
					return
				}
				if after < before {
					t.Errorf("RaiseFence(%d) lowered the counter from %d to %d", seen, before, after)
				}
			}
		}()
	}
	wg.Wait()
	if writeFenced(t, rdb, resource, old.Fence(), "old holder") {
		t.Errorf("the resource accepted fence %d of the holder from before the raises", old.Fence())
	}
	if seen, _ := rdb.HGet(ctx, resource, "fence").Int64(); seen <= 100 {
		t.Errorf("no holder wrote after the raises: resource fence %d, want above 100", seen)
	}
}
