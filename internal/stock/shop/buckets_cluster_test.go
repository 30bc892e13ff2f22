package shop

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// privateCluster starts a Redis Cluster of n masters, private to the test,
// with slots assigned as redis-cli --cluster create does (equal contiguous
// ranges), and returns a client of it and each master's address.
func privateCluster(t *testing.T, n int) (*redis.ClusterClient, []string) {
	t.Helper()
	ctx := context.Background()
	addrs := make([]string, n)
	busPorts := make([]int, n)
	nodes := make([]*redis.Client, n)
	for i := range nodes {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		busPort := l.Addr().(*net.TCPAddr).Port
		busPorts[i] = busPort
		_ = l.Close()
		url := testenv.PrivateRedis(t, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(busPort),
			"--cluster-node-timeout", "5000", "--appendonly", "no")
		opt, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = opt.Addr
		nodes[i] = redis.NewClient(opt)
		t.Cleanup(func() { _ = nodes[i].Close() })
		lo, hi := i*gate.SlotCount/n, (i+1)*gate.SlotCount/n-1
		if err := nodes[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("node %d: add slots: %v", i, err)
		}
	}
	for i := 1; i < n; i++ {
		host, port, _ := net.SplitHostPort(addrs[i])
		if err := nodes[0].Do(ctx, "CLUSTER", "MEET", host, port, busPorts[i]).Err(); err != nil {
			t.Fatalf("meet node %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, c := range nodes {
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok: %s %v", info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = cc.Close() })
	for cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }) != nil {
		if time.Now().After(deadline) {
			t.Fatal("cluster client cannot reach every shard")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cc, addrs
}

// On a Redis Cluster of 3 masters, an item of 3 buckets has one bucket on
// each master, every script of a sale, a move, a stock change, a release
// and a rebuild runs (no CROSSSLOT), and skewed demand sells exactly the
// stock.
func TestBucketsOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-master Redis Cluster")
	}
	b := testenv.Embedded(t) // the database; Redis is the cluster
	cc, addrs := privateCluster(t, 3)
	cfg := Config{KeyPrefix: b.KeyPrefix, SweepInterval: -1}
	cfg.Queue.Writers = queue.NoWriters
	cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := NewService(newTestStore(t, b, nil), cc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := context.Background()

	it := createBucketed(t, s, 90, 3)
	masters := map[string]bool{}
	for _, bk := range gate.AllBuckets(it.ID, 3) {
		meta := s.keys.Bucket(bk).Meta
		for _, addr := range addrs {
			c := redis.NewClient(&redis.Options{Addr: addr})
			n, err := c.Exists(ctx, meta).Result()
			_ = c.Close()
			if err == nil && n == 1 {
				masters[addr] = true
			}
		}
	}
	if len(masters) != 3 {
		t.Fatalf("the 3 buckets are on %d masters, want 3", len(masters))
	}

	orders, refused := buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("cl%d", it.ID), it.ID, 3, 60, 9))
	if len(orders) != 60 || len(refused) != 0 {
		t.Fatalf("first wave: %d orders, refusals %v; want 60, none", len(orders), refused)
	}
	for u, id := range orders {
		if _, err := s.CancelOrder(ctx, id, u); err != nil {
			t.Fatal(err)
		}
		break
	}
	if _, _, err := s.SetStock(ctx, it.ID, 100); err != nil {
		t.Fatal(err)
	}
	if err := s.gate.StartMove(ctx, gate.Bucket{Item: it.ID, B: 2, K: 3}, 0, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.FinishMoves(ctx, time.Now()); err != nil || n != 1 {
		t.Fatalf("finished %d moves (%v), want 1", n, err)
	}
	if r, err := s.Reconcile(ctx, it.ID, false); err != nil || len(r.Drift) != 0 {
		t.Fatalf("reconcile: %+v %v; want no drift", r, err)
	}
	// One master loses the item's bucket: the item is rebuilt whole.
	lost := s.keys.Bucket(gate.Bucket{Item: it.ID, B: 1, K: 3})
	for _, key := range []string{lost.Meta, lost.Buyers, lost.Released, lost.Out, lost.In} {
		if err := cc.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	more, _ := buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("cl%d-b", it.ID), it.ID, 3, 80, 2))
	if len(more) != 41 {
		t.Errorf("second wave: %d orders, want 41 (100 - 60 + 1 cancelled)", len(more))
	}
	checkSold(t, s, it.ID, 100)
}
