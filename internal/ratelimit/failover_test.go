package ratelimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/ratelimit"
	"github.com/seckill/seckill/internal/testenv"
)

// The Redis Cluster master that holds one user's limit key stops answering
// (CLIENT PAUSE, as a master that hangs), then dies (SIGKILL). That user's
// orders are admitted unchecked within the limiter's Timeout, and counted
// as failed open, instead of failing (which refused the user's orders of
// every item, on every master); a user whose key lives on a healthy
// master is still limited.
func TestLimiterFailsOpenWhenItsMasterFails(t *testing.T) {
	const timeout, pause = 100 * time.Millisecond, 3 * time.Second
	cluster := testenv.StartCluster(t, 3, 0)
	rdb := testenv.Backend{RedisURL: cluster.URL(), RedisMode: testenv.ModeCluster}.Universal(t)
	cc := rdb.(*redis.ClusterClient)
	ctx := context.Background()
	const prefix = "rl-failover:"
	var failedOpen atomic.Int64
	l := ratelimit.New(rdb, prefix, ratelimit.Limit{Rate: 1, Period: time.Minute, Burst: 2},
		&ratelimit.Options{Timeout: timeout, FailedOpen: func() { failedOpen.Add(1) }})

	// Users whose keys (redis_rate's "rate:" + prefix + key) live on
	// different masters.
	master := func(key string) string {
		m, err := cc.MasterForKey(ctx, "rate:"+prefix+key)
		if err != nil {
			t.Fatalf("master of %s: %v", key, err)
		}
		return m.Options().Addr
	}
	victimUser, victimAddr := "user:victim-0", ""
	victimAddr = master(victimUser)
	healthyUser := ""
	for i := 0; healthyUser == "" && i < 1000; i++ {
		if u := fmt.Sprintf("user:healthy-%d", i); master(u) != victimAddr {
			healthyUser = u
		}
	}
	var victim *testenv.RedisServer
	for _, n := range cluster.Nodes {
		if n.Addr() == victimAddr {
			victim = n
		}
	}
	if healthyUser == "" || victim == nil {
		t.Fatalf("no user on another master than %s, or no node at that address", victimAddr)
	}

	// admitted takes one unit of key's budget and fails the test on an
	// error or an answer slower than the bound.
	admitted := func(key string) bool {
		t.Helper()
		start := time.Now()
		wait, err := l.Allow(ctx, key)
		if err != nil {
			t.Fatalf("Allow(%s): %v, want no error (the limit fails open)", key, err)
		}
		if took := time.Since(start); took > timeout+time.Second {
			t.Errorf("Allow(%s) took %v, want about the timeout %v at most", key, took, timeout)
		}
		return wait == 0
	}
	for _, u := range []string{victimUser, healthyUser} {
		for i, want := range []bool{true, true, false} {
			if got := admitted(u); got != want {
				t.Fatalf("%s before the failure: attempt %d admitted %v, want %v (burst 2)", u, i+1, got, want)
			}
		}
	}
	if n := failedOpen.Load(); n != 0 {
		t.Fatalf("failed open %d times with every master up, want 0", n)
	}

	pauser := redis.NewClient(&redis.Options{Addr: victimAddr})
	defer pauser.Close()
	if err := pauser.Do(ctx, "client", "pause", pause.Milliseconds(), "all").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE on %s: %v", victimAddr, err)
	}
	if !admitted(victimUser) {
		t.Errorf("%s, whose master is silent: refused, want admitted (fail open)", victimUser)
	}
	if n := failedOpen.Load(); n != 1 {
		t.Errorf("failed open %d times after one Allow on the silent master, want 1", n)
	}
	if admitted(healthyUser) {
		t.Errorf("%s, whose master is healthy, over its burst: admitted, want refused (the limit still holds there)", healthyUser)
	}

	victim.Kill()
	for i := range 3 {
		if !admitted(victimUser) {
			t.Errorf("%s, whose master is dead: attempt %d refused, want admitted", victimUser, i+1)
		}
	}
	if n := failedOpen.Load(); n != 4 {
		t.Errorf("failed open %d times after four Allows on the failed master, want 4", n)
	}
	if admitted(healthyUser) {
		t.Errorf("%s, whose master is healthy, with its master's peer dead: admitted, want refused", healthyUser)
	}
}
