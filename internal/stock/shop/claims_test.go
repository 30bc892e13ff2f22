package shop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	s1, s2, it, req, o := aliceBuysTheLastUnit(t, b, Config{Queue: queue.Config{Writers: 1}}, strategy, buckets)
	rdb := b.Redis(t)
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

// A keyed order on an item this process knows is sold out skips the
// per-user limit (the handler refuses it from memory), so it must not cost
// a 24 h claim in Redis: one user sending distinct Idempotency-Keys would
// grow Redis without bound. The refusal stores nothing; a key that bought
// still replays its order, and a refused key retried after a restock buys
// once and then replays that order (one order per key, promise 4).
func TestSoldOutKeyedRefusalStoresNothing(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, strategy := range stock.Strategies {
			t.Run(string(strategy), func(t *testing.T) {
				ctx := context.Background()
				s := newTestService(t, b, Config{Queue: queue.Config{Writers: 1}}, nil)
				// A mark made before the subscription is confirmed is voided by it.
				waitFor(t, "the sold-out memo subscribed", s.soldOut.Subscribed)
				rdb := b.Redis(t)
				it, err := s.CreateItem(ctx, stock.NewItem{Name: "last unit", Stock: 1, Strategy: strategy})
				if err != nil {
					t.Fatal(err)
				}
				won := stock.OrderRequest{ItemID: it.ID, UserID: "alice", IdempotencyKey: "alice-1"}
				o, _, err := s.PlaceOrder(ctx, won)
				if err != nil {
					t.Fatal(err)
				}
				awaitWritten(t, s, []string{o.ID}, 15*time.Second)
				if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "bob"}); !errors.Is(err, stock.ErrSoldOut) {
					t.Fatalf("bob: got %v, want sold out", err)
				}
				if !s.KnownSoldOut(it.ID) {
					t.Fatal("the item is not known sold out after a sold-out answer")
				}
				claims := func() int {
					t.Helper()
					keys, err := rdb.Keys(ctx, s.keys.Idem(it.ID, "*")).Result()
					if err != nil {
						t.Fatal(err)
					}
					return len(keys)
				}
				before := claims()
				for n := range 200 {
					req := stock.OrderRequest{ItemID: it.ID, UserID: "mallory", IdempotencyKey: fmt.Sprintf("m-%d", n)}
					if _, _, err := s.PlaceOrder(ctx, req); !errors.Is(err, stock.ErrSoldOut) {
						t.Fatalf("mallory's key %d: got %v, want sold out", n, err)
					}
				}
				if after := claims(); after != before {
					t.Errorf("claims after 200 sold-out keyed refusals: got %d, want %d (none stored)", after, before)
				}
				if got, replayed, err := s.PlaceOrder(ctx, won); err != nil || !replayed || got.ID != o.ID {
					t.Errorf("alice's replay: got %+v replayed %v %v, want order %s", got, replayed, err, o.ID)
				}
				if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "carol", IdempotencyKey: "alice-1"}); !errors.Is(err, stock.ErrIdempotencyConflict) {
					t.Errorf("carol with alice's key: got %v, want an idempotency conflict", err)
				}

				if _, _, err := s.SetStock(ctx, it.ID, 2); err != nil {
					t.Fatal(err)
				}
				retry := stock.OrderRequest{ItemID: it.ID, UserID: "mallory", IdempotencyKey: "m-0"}
				bought, _, err := s.PlaceOrder(ctx, retry)
				if err != nil {
					t.Fatalf("mallory's refused key retried after the restock: %v", err)
				}
				awaitWritten(t, s, []string{bought.ID}, 15*time.Second)
				if got, replayed, err := s.PlaceOrder(ctx, retry); err != nil || !replayed || got.ID != bought.ID {
					t.Errorf("mallory's key again: got %+v replayed %v %v, want order %s replayed", got, replayed, err, bought.ID)
				}
				if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "mallory", IdempotencyKey: "m-1"}); err == nil {
					t.Error("mallory's second key bought a second order")
				}
			})
		}
	})
}

// A replay that found its order through the strategy (the user's order
// met in the database, after Redis lost the claims) settles the key's
// claim: a claim left pending would make an instance that knows the item
// sold out answer the next replay sold_out (its sold-out path reads the
// claim alone, and a lock order holds no reservation to look for).
func TestReplayFoundByTheStrategySettlesTheClaim(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, strategy := range []stock.StrategyName{stock.StrategyLua, stock.StrategyLock} {
			t.Run(string(strategy), func(t *testing.T) {
				ctx := context.Background()
				cfg := Config{Queue: queue.Config{Writers: 1}}
				st := newTestStore(t, b, nil)
				s1, s2 := newTestServiceOn(t, b, st, cfg, nil), newTestServiceOn(t, b, st, cfg, nil)
				waitFor(t, "s1's sold-out memo subscribed", s1.soldOut.Subscribed) // a mark made before is voided by it
				rdb := b.Redis(t)
				it, err := s1.CreateItem(ctx, stock.NewItem{Name: "two units", Stock: 2, Strategy: strategy})
				if err != nil {
					t.Fatal(err)
				}
				req := stock.OrderRequest{ItemID: it.ID, UserID: "alice", IdempotencyKey: "alice-1"}
				o, _, err := s1.PlaceOrder(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				testenv.DeleteKeys(t, rdb, b.KeyPrefix+":*")
				// Not sold out: s2 runs the strategy, which meets alice's order.
				if got, replayed, err := s2.PlaceOrder(ctx, req); err != nil || !replayed || got.ID != o.ID {
					t.Fatalf("replay on s2: got %+v replayed %v %v, want order %s replayed", got, replayed, err, o.ID)
				}
				if _, _, err := s1.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "bob"}); err != nil {
					t.Fatalf("bob: %v", err)
				}
				if _, _, err := s1.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "carol"}); !errors.Is(err, stock.ErrSoldOut) {
					t.Fatalf("carol: got %v, want sold out", err)
				}
				if !s1.KnownSoldOut(it.ID) {
					t.Fatal("s1 does not know the item is sold out")
				}
				if got, replayed, err := s1.PlaceOrder(ctx, req); err != nil || !replayed || got.ID != o.ID {
					t.Errorf("replay on s1, which knows the sell-out: got %+v replayed %v %v, want order %s replayed", got, replayed, err, o.ID)
				}
			})
		}
	})
}

// Promise 4 across lock writers (found by TestConcurrencyProof on a lock
// item with 4 buckets): a lock order's writer settles its key right after
// the commit, and in between another writer (another bucket's, another
// instance's) may meet the sell-out. A replay then read the claim still
// pending and the item sold out, and answered sold_out to a key whose
// first request got 201. The claim below is set back to pending after
// alice's order, the state between her commit and her settle.
func TestReplayOfUnsettledLockTwinGetsTheOrder(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, k := range []int{1, 4} {
			t.Run(fmt.Sprintf("buckets=%d", k), func(t *testing.T) {
				ctx := context.Background()
				s1, s2, it, req, o := aliceBuysTheLastUnit(t, b, Config{}, stock.StrategyLock, k)
				waitFor(t, "s2's sold-out memo subscribed", s2.soldOut.Subscribed) // a mark made before is voided by it
				rdb := b.Redis(t)
				unsettle := func() {
					t.Helper()
					if err := rdb.SetArgs(ctx, s1.idemKey(it, req.IdempotencyKey), "alice|", redis.SetArgs{Mode: "XX", KeepTTL: true}).Err(); err != nil {
						t.Fatalf("set alice's claim back to pending: %v", err)
					}
				}
				if _, _, err := s2.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "bob", IdempotencyKey: "bob-1"}); !errors.Is(err, stock.ErrSoldOut) {
					t.Fatalf("bob: got %v, want sold out", err)
				}
				if !s2.KnownSoldOut(it.ID) {
					t.Fatal("s2 does not know the sell-out it answered")
				}
				unsettle()
				if got, replayed, err := s2.PlaceOrder(ctx, req); err != nil || !replayed || got.ID != o.ID {
					t.Fatalf("replay on s2, which knows the sell-out: got %+v replayed %v %v, want order %s replayed", got, replayed, err, o.ID)
				}
				if v, err := rdb.Get(ctx, s1.idemKey(it, req.IdempotencyKey)).Result(); err != nil || v != "alice|"+o.ID {
					t.Errorf("alice's claim after the replay: %q %v, want it settled to her order", v, err)
				}
				if _, _, err := s2.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "bob", IdempotencyKey: "bob-1"}); !errors.Is(err, stock.ErrSoldOut) {
					t.Errorf("bob's key again: got %v, want sold out", err)
				}
			})
		}
	})
}

// aliceBuysTheLastUnit makes two instances on one store, an item of one
// unit (strategy, buckets) and alice's order of it through the first, with
// the key "alice-1".
func aliceBuysTheLastUnit(t *testing.T, b testenv.Backend, cfg Config, strategy stock.StrategyName, buckets int) (s1, s2 *Service, it *stock.Item, req stock.OrderRequest, o *stock.Order) {
	t.Helper()
	ctx := context.Background()
	st := newTestStore(t, b, nil)
	s1, s2 = newTestServiceOn(t, b, st, cfg, nil), newTestServiceOn(t, b, st, cfg, nil)
	it, err := s1.CreateItem(ctx, stock.NewItem{Name: "last unit", Stock: 1, Strategy: strategy, Buckets: buckets})
	if err != nil {
		t.Fatal(err)
	}
	req = stock.OrderRequest{ItemID: it.ID, UserID: "alice", IdempotencyKey: "alice-1"}
	if o, _, err = s1.PlaceOrder(ctx, req); err != nil {
		t.Fatal(err)
	}
	return s1, s2, it, req, o
}
