package shop

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// On a Redis Cluster of 3 masters, an item of 3 buckets has one bucket on
// each master, every script of a sale, a move, a stock change, a release
// and a rebuild runs (no CROSSSLOT), and skewed demand sells exactly the
// stock.
func TestBucketsOnACluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a 3-master Redis Cluster")
	}
	b := testenv.Embedded(t) // the database; Redis is the cluster
	cluster := testenv.StartCluster(t, 3, 0)
	cc := testenv.Backend{RedisURL: cluster.URL(), RedisMode: testenv.ModeCluster}.Universal(t)
	cfg := Config{KeyPrefix: b.KeyPrefix, SweepInterval: -1, WriteTimeout: 10 * time.Second} // a budget for a busy machine, as newTestServiceOn gives
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
		for _, node := range cluster.Nodes {
			addr := node.Addr()
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
