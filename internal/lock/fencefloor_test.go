package lock_test

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// floorAt returns a FenceFloor that reports floor and counts its calls.
func floorAt(floor int64, calls *atomic.Int32) func(context.Context) (int64, error) {
	return func(context.Context) (int64, error) {
		calls.Add(1)
		return floor, nil
	}
}

// Redis loses the fence counter (restart without persistence, FLUSHALL,
// eviction) while the guarded resource has seen fence 41: with FenceFloor
// the next fence is 42, and a stale holder's fence stays refused.
func TestFenceFloorAfterCounterLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	resource := key + ":resource"

	stale, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "{"+key+"}:fence", 40, 0).Err(); err != nil {
		t.Fatal(err)
	}
	fresh, err := c.Obtain(ctx, key+":other", time.Minute, nil) // unrelated key: counters are per key
	if err != nil {
		t.Fatal(err)
	}
	_ = fresh.Release(ctx)
	_ = stale.Release(ctx)
	if l, err := c.Obtain(ctx, key, time.Minute, nil); err != nil {
		t.Fatal(err)
	} else {
		if !writeFenced(t, rdb, resource, l.Fence(), "before the loss") || l.Fence() != 41 {
			t.Fatalf("fence before the loss: got %d, want 41 and accepted", l.Fence())
		}
		_ = l.Release(ctx)
	}

	if err := rdb.Del(ctx, "{"+key+"}", "{"+key+"}:fence", "{"+key+"}:released").Err(); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	l, err := c.Obtain(ctx, key, time.Minute, &lock.Options{FenceFloor: floorAt(41, &calls)})
	if err != nil {
		t.Fatalf("Obtain after the loss: %v", err)
	}
	if l.Fence() != 42 || calls.Load() != 1 {
		t.Errorf("after the loss: fence %d after %d FenceFloor calls, want 42 after 1", l.Fence(), calls.Load())
	}
	if !writeFenced(t, rdb, resource, l.Fence(), "after the loss") {
		t.Errorf("the resource refused fence %d after the loss", l.Fence())
	}
	if writeFenced(t, rdb, resource, stale.Fence(), "stale") {
		t.Errorf("the resource accepted the stale fence %d", stale.Fence())
	}
	_ = l.Release(ctx)

	// The counter exists now: FenceFloor is not called again.
	l, err = c.Obtain(ctx, key, time.Minute, &lock.Options{FenceFloor: floorAt(41, &calls)})
	if err != nil || l.Fence() != 43 || calls.Load() != 1 {
		t.Errorf("second Obtain: fence %d, err %v, %d FenceFloor calls; want 43, nil, 1", l.Fence(), err, calls.Load())
	}
	_ = l.Release(ctx)

	// A failing FenceFloor grants nothing.
	if err := rdb.Del(ctx, "{"+key+"}:fence").Err(); err != nil {
		t.Fatal(err)
	}
	errDB := errors.New("database down")
	_, err = c.Obtain(ctx, key, time.Minute, &lock.Options{FenceFloor: func(context.Context) (int64, error) { return 0, errDB }})
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, errDB) {
		t.Errorf("Obtain with a failing FenceFloor: got %v, want ErrNotObtained and the cause", err)
	}
	if exists(t, rdb, "{"+key+"}") || exists(t, rdb, "{"+key+"}:fence") {
		t.Error("a failing FenceFloor left the lock or the counter set")
	}
}

// Instances seeding at once, each from its own read of the resource, which
// moves on as holders write: the counter only ever rises, so every holder's
// fence is above every fence the resource has seen.
func TestFenceFloorConcurrentSeeders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	key := testKey(t, rdb)
	resource := key + ":resource"
	readResource := func(ctx context.Context) (int64, error) {
		n, err := rdb.HGet(ctx, resource, "fence").Int64()
		if errors.Is(err, redis.Nil) {
			return 0, nil
		}
		return n, err
	}
	for round := range 5 {
		if err := rdb.Del(ctx, "{"+key+"}:fence").Err(); err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := newClient(t, rdb, nil)
				<-start
				l, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Wait: 10 * time.Second, FenceFloor: readResource})
				if err != nil {
					t.Errorf("Obtain: %v", err)
					return
				}
				defer l.Release(ctx)
				if !writeFenced(t, rdb, resource, l.Fence(), "holder") {
					t.Errorf("round %d: the resource refused fence %d of a holder", round, l.Fence())
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	if seen, _ := readResource(ctx); seen < 5*8 {
		t.Errorf("resource saw fence %d after 40 holders, want >= 40", seen)
	}
}

//go:embed seed.lua
var seedLua string

// loseAfterSeed deletes the fence counter right after the first seed script
// ran: Redis loses its data again between the seed and the grant.
type loseAfterSeed struct {
	fenceKey string
	rdb      *redis.Client
	done     atomic.Bool
}

func (h *loseAfterSeed) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseAfterSeed) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *loseAfterSeed) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	sum := sha1.Sum([]byte(seedLua))
	sha := hex.EncodeToString(sum[:])
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if len(args) > 1 && (args[1] == sha || args[1] == seedLua) && !h.done.Swap(true) {
			h.rdb.Del(ctx, h.fenceKey)
		}
		return err
	}
}

func TestFenceFloorCounterLostAgainBeforeGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	key := testKey(t, rdb)
	hooked := redis.NewClient(rdb.Options())
	t.Cleanup(func() { _ = hooked.Close() })
	hooked.AddHook(&loseAfterSeed{fenceKey: "{" + key + "}:fence", rdb: rdb})
	c := newClient(t, hooked, nil)

	var calls atomic.Int32
	l, err := c.Obtain(ctx, key, time.Minute, &lock.Options{FenceFloor: floorAt(7, &calls)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.Fence() != 8 || calls.Load() != 2 {
		t.Errorf("fence %d after %d FenceFloor calls, want 8 after 2 (seeded again after the second loss)", l.Fence(), calls.Load())
	}
}
