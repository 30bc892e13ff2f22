package lock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/lock"
)

func waitForQueue(t *testing.T, rdbKey string, n int64, llen func() int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for llen() != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue %s never reached %d entries (has %d)", rdbKey, n, llen())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestFairHandOffInArrivalOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	queue := "{" + key + "}:queue"
	llen := func() int64 { return rdb.LLen(ctx, queue).Val() }
	fair := &lock.Options{Fair: true, Wait: 30 * time.Second}

	holder, err := c.Obtain(ctx, key, time.Minute, fair)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		order []int
	)
	const waiters = 6
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Obtain(ctx, key, time.Minute, fair)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			if err := l.Release(ctx); err != nil {
				t.Errorf("waiter %d release: %v", i, err)
			}
		}()
		waitForQueue(t, queue, int64(i+1), llen) // arrival order = i
	}
	// A non-queued newcomer must not jump the queue once the lock is free.
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Fair: true}); err == nil {
		t.Error("a try-once newcomer jumped the fair queue")
		_ = l.Release(ctx)
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("hand-off order %v, want arrival order 0..%d", order, waiters-1)
		}
	}
	if len(order) != waiters {
		t.Errorf("%d waiters obtained, want %d", len(order), waiters)
	}
}

// A waiter that gave up (ctx cancelled) leaves the queue at once; one that
// died without leaving is dropped after FairWaiterTimeout.
func TestFairSkipsWaiterThatGaveUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	queue := "{" + key + "}:queue"
	llen := func() int64 { return rdb.LLen(ctx, queue).Val() }
	fair := &lock.Options{Fair: true, Wait: 30 * time.Second, PollInterval: 10 * time.Second, FairWaiterTimeout: 30 * time.Second}

	holder, err := c.Obtain(ctx, key, time.Minute, fair)
	if err != nil {
		t.Fatal(err)
	}
	quitterCtx, quit := context.WithCancel(ctx)
	quitterDone := make(chan error, 1)
	go func() {
		_, err := c.Obtain(quitterCtx, key, time.Minute, fair)
		quitterDone <- err
	}()
	waitForQueue(t, queue, 1, llen)

	got := make(chan *lock.Lock, 1)
	go func() {
		l, err := c.Obtain(ctx, key, time.Minute, fair)
		if err != nil {
			t.Errorf("patient waiter: %v", err)
		}
		got <- l
	}()
	waitForQueue(t, queue, 2, llen)
	quit()
	if err := <-quitterDone; err == nil {
		t.Fatal("quitter obtained the lock")
	}
	waitForQueue(t, queue, 1, llen)

	start := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("hand-off past a quitter took %v (poll is 5s+: wake-up expected)", waited)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A dead waiter: queued, never polls again, never leaves.
	holder, err = c.Obtain(ctx, key, time.Minute, fair)
	if err != nil {
		t.Fatal(err)
	}
	deadline := float64(time.Now().Add(300 * time.Millisecond).UnixMilli())
	if err := rdb.RPush(ctx, queue, "dead-waiter").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, "{"+key+"}:waiters", redisZ(deadline, "dead-waiter")).Err(); err != nil {
		t.Fatal(err)
	}
	go func() {
		l, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Fair: true, Wait: 30 * time.Second, FairWaiterTimeout: time.Second})
		if err != nil {
			t.Errorf("waiter behind the dead one: %v", err)
		}
		got <- l
	}()
	waitForQueue(t, queue, 2, llen)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if err := l.Release(ctx); err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a dead waiter blocked the queue for 10s (its timeout was 300ms)")
	}
}
