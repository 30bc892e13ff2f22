package shop

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// commandCounter counts the commands a client sends (not pub/sub reads).
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// waitFor polls cond until it holds, failing the test after a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSoldOutSharedBetweenInstances: two instances on one backend. When one
// sells out, the other refuses the item without a round trip; a stock raise
// through one, or a cancellation through the other, reopens the item on
// both, long before the memo's safety expiry (set to a minute here, so only
// the events can do it). On a Redis Cluster too, where the events channel
// reaches every node's subscribers.
func TestSoldOutSharedBetweenInstances(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		for _, strategy := range []stock.StrategyName{stock.StrategyLua, stock.StrategyLock} {
			t.Run(string(strategy), func(t *testing.T) {
				ctx := context.Background()
				a := newTestService(t, b, Config{}, nil)
				counter := &commandCounter{}
				rdbB := b.Universal(t)
				rdbB.AddHook(counter)
				bs := newTestService(t, b, Config{}, rdbB)
				for _, s := range []*Service{a, bs} {
					s.soldOut.SetSafety(time.Minute)
				}
				waitFor(t, "both instances subscribed", func() bool { return a.soldOut.Subscribed() && bs.soldOut.Subscribed() })
				it, err := a.CreateItem(ctx, stock.NewItem{Name: "shared", Stock: 1, Strategy: strategy})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := bs.routing(ctx, it.ID); err != nil { // B has seen the item before
					t.Fatal(err)
				}
				order := func(s *Service, user string) (*stock.Order, error) {
					o, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: user})
					return o, err
				}
				first, err := order(a, "u1")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := order(a, "u2"); !errors.Is(err, stock.ErrSoldOut) {
					t.Fatalf("second order on A: got %v, want ErrSoldOut", err)
				}
				waitFor(t, "B knows the item is sold out", func() bool { return bs.KnownSoldOut(it.ID) })
				before := counter.n.Load()
				if _, err := order(bs, "u3"); !errors.Is(err, stock.ErrSoldOut) {
					t.Errorf("order on B: got %v, want ErrSoldOut", err)
				}
				if sent := counter.n.Load() - before; sent != 0 {
					t.Errorf("B's refusal sent %d Redis commands, want none", sent)
				}

				if _, _, err := a.SetStock(ctx, it.ID, 2); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "B forgets sold out after A raised the stock", func() bool { return !bs.KnownSoldOut(it.ID) })
				if _, err := order(bs, "u3"); err != nil {
					t.Fatalf("order on B after the raise: %v", err)
				}
				if _, err := order(bs, "u4"); !errors.Is(err, stock.ErrSoldOut) {
					t.Fatalf("order on B past the new stock: got %v, want ErrSoldOut", err)
				}
				waitFor(t, "A knows the item is sold out again", func() bool { return a.KnownSoldOut(it.ID) })

				if _, err := bs.CancelOrder(ctx, first.ID, "u1"); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "A forgets sold out after B returned a unit", func() bool { return !a.KnownSoldOut(it.ID) })
				if _, err := order(a, "u4"); err != nil {
					t.Errorf("order on A after the cancellation: %v", err)
				}
			})
		}
	})
}

// TestResubscriptionClearsTheMemo: when the subscription breaks the memo
// knows it, and the confirmation of the new one forgets every mark (messages
// may have been lost in between). The memo's clock is frozen, so nothing
// expires on its own.
func TestResubscriptionClearsTheMemo(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		rdb, proxy, _ := proxied(t, b)
		s := newTestService(t, b, Config{}, rdb)
		clock := &fakeClock{t: time.Now()}
		s.soldOut.SetClock(clock.now)
		waitFor(t, "subscribed", s.soldOut.Subscribed)
		s.soldOut.Mark(42, s.soldOut.Generation(42))
		proxy.Cut()
		waitFor(t, "the memo knows the subscription broke", func() bool { return !s.soldOut.Subscribed() })
		if !s.KnownSoldOut(42) {
			t.Fatal("the mark is gone before the resubscription; the test proves nothing")
		}
		proxy.Restore()
		waitFor(t, "subscribed again", s.soldOut.Subscribed)
		if s.KnownSoldOut(42) {
			t.Error("after the resubscription: item 42 still known sold out, want every mark forgotten")
		}
	})
}

// TestUnitsBackAfterRedisLossReachEveryInstance is issue 20's defect:
// restocks were numbered by a counter in Redis and every instance ignored
// a number at or below the highest it had seen. After Redis lost its data
// the counter restarted at 1, so a raise of a sold-out item (or a
// cancellation) was answered sold_out for up to 10 s by every instance, the
// one that made the change included. Here the item is restocked a few
// times, sold out on both instances, and Redis loses the item's keys; then
// units come back through A, which sells at once, and B, whose memo trusts
// a mark for a minute here, sells as soon as the restock event reaches it.
func TestUnitsBackAfterRedisLossReachEveryInstance(t *testing.T) {
	backs := []struct {
		name string
		back func(ctx context.Context, s *Service, it *stock.Item, sold []*stock.Order) error
	}{
		{"raise", func(ctx context.Context, s *Service, it *stock.Item, _ []*stock.Order) error {
			_, _, err := s.SetStock(ctx, it.ID, it.Stock+2)
			return err
		}},
		{"cancel", func(ctx context.Context, s *Service, _ *stock.Item, sold []*stock.Order) error {
			for _, o := range sold[:2] {
				if _, err := s.CancelOrder(ctx, o.ID, o.UserID); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, strategy := range []stock.StrategyName{stock.StrategyLua, stock.StrategyLock} {
			for _, back := range backs {
				t.Run(string(strategy)+"/"+back.name, func(t *testing.T) {
					ctx := context.Background()
					a := newTestService(t, b, Config{}, nil)
					bs := newTestService(t, b, Config{}, nil)
					for _, s := range []*Service{a, bs} {
						s.soldOut.SetSafety(time.Minute)
					}
					waitFor(t, "both instances subscribed", func() bool { return a.soldOut.Subscribed() && bs.soldOut.Subscribed() })
					it, err := a.CreateItem(ctx, stock.NewItem{Name: "lost", Stock: 1, Strategy: strategy})
					if err != nil {
						t.Fatal(err)
					}
					for n := int64(2); n <= 4; n++ { // restocks before the loss
						if _, it, err = a.SetStock(ctx, it.ID, n); err != nil {
							t.Fatal(err)
						}
					}
					order := func(s *Service, user string) (*stock.Order, error) {
						o, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: user})
						return o, err
					}
					var sold []*stock.Order
					for i := range it.Stock {
						o, err := order(a, fmt.Sprintf("u%d", i))
						if err != nil {
							t.Fatal(err)
						}
						sold = append(sold, o)
					}
					for i, s := range []*Service{a, bs} {
						if _, err := order(s, fmt.Sprintf("late%d", i)); !errors.Is(err, stock.ErrSoldOut) {
							t.Fatalf("instance %d past the stock: got %v, want ErrSoldOut", i, err)
						}
					}
					waitFor(t, "both know the item is sold out", func() bool { return a.KnownSoldOut(it.ID) && bs.KnownSoldOut(it.ID) })

					testenv.DeleteKeys(t, b.Universal(t), a.keys.Item(it.ID)+"*")

					if err := back.back(ctx, a, it, sold); err != nil {
						t.Fatal(err)
					}
					if _, err := order(a, "afterA"); err != nil {
						t.Errorf("A, right after its own change: got %v, want an order", err)
					}
					waitFor(t, "B forgets the sold out", func() bool { return !bs.KnownSoldOut(it.ID) })
					if _, err := order(bs, "afterB"); err != nil {
						t.Errorf("B, after the restock event: got %v, want an order", err)
					}
				})
			}
		}
	})
}
