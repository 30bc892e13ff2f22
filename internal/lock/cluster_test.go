package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/testenv"
)

// A one-node Redis Cluster driven through redis.ClusterClient: the node
// rejects scripts whose KEYS span hash slots (CROSSSLOT), so every script path
// run here shows the keys of one lock share a slot. (A single node does not
// catch keys a script touches without declaring them; the scripts name keys
// only through KEYS, which review of the .lua files confirms.)
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := privateRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	if err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("ADDSLOTSRANGE: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(node.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if time.Now().After(deadline) {
			t.Fatal("cluster never became ok")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Sanity check that the node enforces slots for scripts.
	err := node.Eval(ctx, "return redis.call('SET', KEYS[1], 1) and redis.call('SET', KEYS[2], 1)", []string{"a", "b"}).Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("cross-slot script was not rejected: %v", err)
	}

	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{node.Options().Addr}})
	t.Cleanup(func() { _ = cluster.Close() })
	c := newClient(t, cluster, nil)
	owner := lock.NewOwner()

	for _, key := range []string{"plain-key", "seckill:{item:42}:lock"} {
		l, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Owner: owner, Reentrant: true})
		if err != nil {
			t.Fatalf("%s: Obtain: %v", key, err)
		}
		again, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Owner: owner, Reentrant: true})
		if err != nil {
			t.Fatalf("%s: re-entry: %v", key, err)
		}
		if err := l.Refresh(ctx, time.Minute); err != nil {
			t.Errorf("%s: Refresh: %v", key, err)
		}
		if d, err := l.TTL(ctx); err != nil || d <= 0 {
			t.Errorf("%s: TTL = %v, %v", key, d, err)
		}
		// A fair waiter, woken through the cluster client's pub/sub.
		got := make(chan error, 1)
		go func() {
			w, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Fair: true, Wait: 10 * time.Second})
			if err == nil {
				err = w.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(50 * time.Millisecond)
		if err := owner.ReleaseAll(ctx); err != nil {
			t.Errorf("%s: ReleaseAll: %v", key, err)
		}
		if err := <-got; err != nil {
			t.Errorf("%s: fair waiter: %v", key, err)
		}
		if err := l.Release(ctx); !errors.Is(err, lock.ErrReleased) {
			t.Errorf("%s: Release after ReleaseAll = %v", key, err)
		}
		_ = again
	}
}

// Every script the lock runs declares keys of one slot, whatever the key's
// shape: each EVAL/EVALSHA is checked by testenv.SlotCheck (CRC16 slots,
// checked against CLUSTER KEYSLOT in package gate), on every path: obtain
// (plain, re-entrant, fair with a waiter that gives up and one that wins),
// the fence seed after a loss, refresh and release.
func TestScriptsTakeKeysOfOneSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	check := &testenv.SlotCheck{}
	hooked := redis.NewClient(rdb.Options())
	hooked.AddHook(check)
	t.Cleanup(func() { _ = hooked.Close() })
	c := newClient(t, hooked, nil)
	base := testKey(t, rdb)
	for _, key := range []string{base, "seckill:{item:" + base + "}:lock", base + "{}", "{" + base + "}:x{y}"} {
		owner := lock.NewOwner()
		l, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Owner: owner, Reentrant: true,
			FenceFloor: func(context.Context) (int64, error) { return 7, nil }})
		if err != nil {
			t.Fatalf("%s: Obtain: %v", key, err)
		}
		if _, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Owner: owner, Reentrant: true}); err != nil {
			t.Fatalf("%s: re-entry: %v", key, err)
		}
		if err := l.Refresh(ctx, time.Minute); err != nil {
			t.Errorf("%s: Refresh: %v", key, err)
		}
		if _, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Fair: true, Wait: 50 * time.Millisecond}); !errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("%s: a fair waiter that gives up: got %v, want ErrNotObtained", key, err)
		}
		got := make(chan error, 1)
		go func() {
			w, err := c.Obtain(ctx, key, time.Minute, &lock.Options{Fair: true, Wait: 10 * time.Second})
			if err == nil {
				err = w.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(50 * time.Millisecond)
		if err := owner.ReleaseAll(ctx); err != nil {
			t.Errorf("%s: ReleaseAll: %v", key, err)
		}
		if err := <-got; err != nil {
			t.Errorf("%s: fair waiter: %v", key, err)
		}
	}
	if v := check.Violations(); len(v) > 0 {
		t.Errorf("commands whose keys span slots (CROSSSLOT on a Redis Cluster):\n%s", strings.Join(v, "\n"))
	}
	if n := check.Scripts(); n < 20 {
		t.Errorf("checked %d script calls, want at least 20: is the hook seeing them?", n)
	}
}
