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

// Redis loses every key of a sold-out item, its Idempotency-Key claims
// with them. A replay of the key that bought the last unit still gets its
// order, not sold_out: from the instance that knows the item is sold out
// (the sold-out paths) and from one that does not (the strategy runs and
// meets the sell-out). Another user with that key is still refused.
func TestReplayAfterRedisLostClaims(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, strategy := range []stock.StrategyName{stock.StrategyLua, stock.StrategyLock, stock.StrategyLuaAsync} {
			t.Run(string(strategy), func(t *testing.T) { replayAfterLostClaims(t, b, strategy, 1) })
		}
		t.Run("lua, 3 buckets", func(t *testing.T) { replayAfterLostClaims(t, b, stock.StrategyLua, 3) })
	})
}

func replayAfterLostClaims(t *testing.T, b testenv.Backend, strategy stock.StrategyName, buckets int) {
	ctx := context.Background()
	cfg := Config{Queue: queue.Config{Writers: 1}}
	st := newTestStore(t, b, nil)
	s1, s2 := newTestServiceOn(t, b, st, cfg, nil), newTestServiceOn(t, b, st, cfg, nil)
	rdb := b.Redis(t)
	it, err := s1.CreateItem(ctx, stock.NewItem{Name: "last unit", Stock: 1, Strategy: strategy, Buckets: buckets})
	if err != nil {
		t.Fatal(err)
	}
	req := stock.OrderRequest{ItemID: it.ID, UserID: "alice", IdempotencyKey: "alice-1"}
	o, _, err := s1.PlaceOrder(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	awaitWritten(t, s1, []string{o.ID}, 15*time.Second)
	lose := func() {
		t.Helper()
		testenv.DeleteKeys(t, rdb, b.KeyPrefix+":*")
	}
	replay := func(s *Service, via string) {
		t.Helper()
		got, replayed, err := s.PlaceOrder(ctx, req)
		if err != nil || !replayed || got.ID != o.ID {
			t.Errorf("replay of alice-1 %s: got %+v replayed %v %v, want order %s replayed", via, got, replayed, err, o.ID)
		}
	}

	lose()
	if _, _, err := s1.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "bob", IdempotencyKey: "bob-1"}); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("bob after the loss: got %v, want sold out", err)
	}
	replay(s1, "on the instance that knows the item is sold out")
	if _, _, err := s1.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "carol", IdempotencyKey: "alice-1"}); !errors.Is(err, stock.ErrIdempotencyConflict) {
		t.Errorf("carol with alice's key: got %v, want an idempotency conflict", err)
	}

	lose()
	replay(s2, "on an instance that has not seen the sell-out")
	replay(s1, "once more on the first instance")
}
