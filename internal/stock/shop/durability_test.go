package shop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// With fsync durability, lua-async accepts orders only while Redis fsyncs
// every write, and a service refuses to start on a Redis that does not.
func TestFsyncDurability(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testenv.Embedded(t)
	st := newTestStore(t, b, nil)

	opt, _ := redis.ParseURL(testenv.PrivateRedis(t, "--appendonly", "yes", "--appendfsync", "always"))
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := NewService(st, rdb, Config{KeyPrefix: b.KeyPrefix,
		Queue: queue.Config{Writers: queue.NoWriters, Durability: queue.DurabilityFsync, DurabilityCheck: 50 * time.Millisecond}})
	if err != nil {
		t.Fatalf("service on a Redis that fsyncs every write: %v", err)
	}
	t.Cleanup(s.Close)
	it := createAsyncItem(t, s, 100)
	n := 0
	order := func() error {
		n++
		_, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: fmt.Sprintf("u%d", n)})
		return err
	}
	if err := order(); err != nil {
		t.Fatalf("order while Redis fsyncs: %v", err)
	}
	awaitOrderErr := func(want func(error) bool, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := order()
			if want(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: last answer %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := rdb.ConfigSet(ctx, "appendfsync", "everysec").Err(); err != nil {
		t.Fatal(err)
	}
	awaitOrderErr(func(err error) bool {
		return errors.Is(err, stock.ErrUnavailable) && strings.Contains(err.Error(), `appendfsync "everysec"`)
	}, "orders once Redis fsyncs only every second: want ErrUnavailable naming the setting")
	if err := rdb.ConfigSet(ctx, "appendfsync", "always"); err.Err() != nil {
		t.Fatal(err)
	}
	awaitOrderErr(func(err error) bool { return err == nil }, "orders once Redis fsyncs every write again")

	// The machine's shared Redis keeps nothing on disk.
	shared := testenv.Real(t)
	_, err = NewService(st, shared.Redis(t), Config{KeyPrefix: shared.KeyPrefix, Queue: queue.Config{Writers: queue.NoWriters, Durability: queue.DurabilityFsync}})
	if err == nil || !strings.Contains(err.Error(), "appendonly") {
		t.Errorf("service with fsync durability on a Redis without AOF: got %v, want a refusal naming appendonly", err)
	}
}
