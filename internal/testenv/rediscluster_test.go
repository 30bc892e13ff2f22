package testenv

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A private cluster with replicas: 3 masters and 3 replicas answer through
// its URL; when a master is killed its replica takes over and the cluster
// is whole again; the old master, started again, rejoins.
func TestStartClusterWithReplicas(t *testing.T) {
	c := StartCluster(t, 3, 1)
	if len(c.Nodes) != 6 {
		t.Fatalf("nodes: got %d, want 6", len(c.Nodes))
	}
	opt, err := redis.ParseClusterURL(c.URL())
	if err != nil {
		t.Fatalf("URL %q: %v", c.URL(), err)
	}
	// A client learns of a failover from MOVED or its periodic reload, not
	// from a dead master's refused connections: reload every second, as
	// the service does (app's openCluster).
	opt.ClusterStateReloadInterval = time.Second
	rdb := redis.NewClusterClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	masters := func() int32 {
		var n atomic.Int32
		if err := rdb.ForEachMaster(ctx, func(context.Context, *redis.Client) error { n.Add(1); return nil }); err != nil {
			t.Fatalf("masters: %v", err)
		}
		return n.Load()
	}
	if n := masters(); n != 3 {
		t.Fatalf("masters: got %d, want 3", n)
	}
	if err := rdb.Set(ctx, "{x}k", "v", 0).Err(); err != nil {
		t.Fatalf("write: %v", err)
	}

	// Kill the master of {x}; its replica is promoted.
	slot := KeySlot("{x}k")
	var victim *RedisServer
	for _, s := range c.Nodes {
		m := redis.NewClient(&redis.Options{Addr: s.Addr()})
		n, err := m.ClusterCountKeysInSlot(ctx, slot).Result()
		role, _ := m.Do(ctx, "ROLE").Slice()
		_ = m.Close()
		if err == nil && n == 1 && len(role) > 0 && role[0] == "master" {
			victim = s
		}
	}
	if victim == nil {
		t.Fatal("no master holds {x}k")
	}
	// Replication is asynchronous: kill the master only once its replica
	// has the write, or the promoted replica rightly lacks it.
	replica := c.ReplicaOf(victim.Addr())
	if replica == nil {
		t.Fatalf("master %s has no replica", victim.Addr())
	}
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr(), OnConnect: func(ctx context.Context, cn *redis.Conn) error {
		return cn.ReadOnly(ctx).Err()
	}})
	defer rc.Close()
	for wait := time.Now().Add(10 * time.Second); rc.Get(ctx, "{x}k").Val() != "v"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("replica %s never received the write", replica.Addr())
		}
	}
	victim.Kill()
	c.AwaitOK(20 * time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err := rdb.Get(ctx, "{x}k").Result()
		if err == nil && v == "v" {
			break // the promoted replica had it
		}
		if time.Now().After(deadline) {
			for _, s := range c.Nodes {
				if s != victim {
					m := redis.NewClient(&redis.Options{Addr: s.Addr()})
					t.Logf("%s:\n%s", s.Addr(), m.ClusterNodes(ctx).Val())
					_ = m.Close()
					break
				}
			}
			t.Fatalf("read after failover: %q %v", v, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	victim.Start()
	c.AwaitOK(20 * time.Second)
	if st := victim.clusterState(); !strings.Contains(st, "ok") {
		t.Errorf("the old master after restart: cluster_state %q, want ok", st)
	}
}
