package shop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// A lua-async order outlives its Idempotency-Key's claim in Redis (evicted
// under volatile-*, or lost with part of Redis's state): a retry with the
// same key must still get the same order, never already_purchased, and
// another key of the same user must still be refused.
func TestAsyncReplayAfterClaimLost(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := newTestService(t, b, Config{Queue: queue.Config{Writers: 1}}, nil)
		rdb := b.Redis(t)
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "async replay", Stock: 5, Strategy: stock.StrategyLuaAsync})
		if err != nil {
			t.Fatal(err)
		}
		req := stock.OrderRequest{ItemID: it.ID, UserID: "Carol", IdempotencyKey: "Key-1"}
		first, replayed, err := s.PlaceOrder(ctx, req)
		if err != nil || replayed {
			t.Fatalf("first order: got %v, replayed=%v", err, replayed)
		}
		if n, err := rdb.Del(ctx, s.keys.Idem(it.ID, req.IdempotencyKey)).Result(); err != nil || n != 1 {
			t.Fatalf("delete the key's claim: deleted %d, err %v", n, err)
		}
		again, replayed, err := s.PlaceOrder(ctx, req)
		if err != nil {
			t.Fatalf("retry with the same key after its claim was lost: got %v, want the first order", err)
		}
		if !replayed || again.ID != first.ID {
			t.Fatalf("retry: got order %s (replayed=%v), want %s replayed", again.ID, replayed, first.ID)
		}
		other := req
		other.IdempotencyKey = "Key-2"
		if _, _, err := s.PlaceOrder(ctx, other); !errors.Is(err, stock.ErrAlreadyPurchased) {
			t.Fatalf("same user, another key: got %v, want ErrAlreadyPurchased", err)
		}
		// The replays answered from the queue: the writer writes the one
		// order, and only it.
		for {
			got, err := s.Item(ctx, it.ID)
			if err == nil && got.Sold == 1 {
				break
			}
			if err != nil || got.Sold > 1 || ctx.Err() != nil {
				t.Fatalf("sold: got %v (err %v), want 1", got, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
