package shop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// TestItemViewStaleness: a view is served from memory for less than
// ViewMaxAge, then read again, so after a sale it shows the gate's count
// once ViewMaxAge has passed (for every strategy); a sell-out this process
// saw shows at once, however fresh the cached view.
func TestItemViewStaleness(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, name := range stock.Strategies {
			t.Run(string(name), func(t *testing.T) {
				ctx := context.Background()
				s := newTestService(t, b, Config{Queue: queue.Config{Writers: 1}}, nil)
				var now atomic.Int64
				now.Store(time.Now().UnixNano())
				s.views.clock = func() time.Time { return time.Unix(0, now.Load()) }
				advance := func(d time.Duration) { now.Add(int64(d)) }
				it, err := s.CreateItem(ctx, stock.NewItem{Name: "view", Stock: 3, Strategy: name})
				if err != nil {
					t.Fatal(err)
				}
				remaining := func() int64 {
					t.Helper()
					v, err := s.ItemView(ctx, it.ID)
					if err != nil {
						t.Fatal(err)
					}
					return v.Remaining
				}
				buy := func(user string) error {
					_, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: user})
					return err
				}
				if got := remaining(); got != 3 {
					t.Fatalf("before the sale: remaining %d, want 3", got)
				}
				if err := buy("alice"); err != nil {
					t.Fatal(err)
				}
				advance(ViewMaxAge - time.Millisecond)
				if got := remaining(); got != 3 {
					t.Errorf("within ViewMaxAge of the read: remaining %d, want the cached 3", got)
				}
				advance(time.Millisecond)
				if got := remaining(); got != 2 {
					t.Errorf("ViewMaxAge after the read: remaining %d, want 2 (read again)", got)
				}
				for _, u := range []string{"bob", "carol"} {
					if err := buy(u); err != nil {
						t.Fatal(err)
					}
				}
				// The cached view still says 2; the refusal marks the memo
				// and the view shows 0 at once, without a read.
				if err := buy("dave"); !errors.Is(err, stock.ErrSoldOut) {
					t.Fatalf("past the stock: got %v, want ErrSoldOut", err)
				}
				if got := remaining(); got != 0 {
					t.Errorf("right after the sell-out this process saw: remaining %d, want 0", got)
				}
				advance(ViewMaxAge)
				if got := remaining(); got != 0 {
					t.Errorf("after a read: remaining %d, want 0", got)
				}
			})
		}
	})
}

// TestFreshItemView: the admission loop's read shows every sale taken
// before it, however fresh the cached view (every strategy, and a bucketed
// item), and it refreshes the cache.
func TestFreshItemView(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		type kind struct {
			strategy stock.StrategyName
			buckets  int
		}
		kinds := []kind{{stock.StrategyLua, 4}}
		for _, name := range stock.Strategies {
			kinds = append(kinds, kind{name, 1})
		}
		for _, k := range kinds {
			t.Run(fmt.Sprintf("%s/%d", k.strategy, k.buckets), func(t *testing.T) {
				ctx := context.Background()
				s := newTestService(t, b, Config{Queue: queue.Config{Writers: 1}}, nil)
				frozen := time.Now()
				s.views.clock = func() time.Time { return frozen } // a cached view never ages
				it, err := s.CreateItem(ctx, stock.NewItem{Name: "fresh", Stock: 3, Strategy: k.strategy, Buckets: k.buckets})
				if err != nil {
					t.Fatal(err)
				}
				if v, err := s.ItemView(ctx, it.ID); err != nil || v.Remaining != 3 {
					t.Fatalf("before the sale: %+v, %v; want 3 left", v, err)
				}
				if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "alice"}); err != nil {
					t.Fatal(err)
				}
				if v, err := s.ItemView(ctx, it.ID); err != nil || v.Remaining != 3 {
					t.Fatalf("cached view after the sale: %+v, %v; want the cached 3", v, err)
				}
				if v, err := s.FreshItemView(ctx, it.ID); err != nil || v.Remaining != 2 {
					t.Errorf("FreshItemView after the sale: %+v, %v; want 2 left", v, err)
				}
				if v, err := s.ItemView(ctx, it.ID); err != nil || v.Remaining != 2 {
					t.Errorf("cached view after FreshItemView: %+v, %v; want 2 left", v, err)
				}
			})
		}
	})
}

// TestFreshItemViewCountsALuaOrderInFlightOnce: a lua order whose unit
// left the gate but whose write has not committed still counts as left in
// the admission loop's figure (its pass is still live, and counts there),
// until the gate reads sold out.
func TestFreshItemViewCountsALuaOrderInFlightOnce(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "in flight", Stock: 3, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "alice"}); err != nil {
			t.Fatal(err)
		}
		// bob's unit is reserved; his write is still on its way.
		if _, err := s.gate.Reserve(ctx, gate.Single(it.ID), "bob", uuid.Must(uuid.NewV7()).String(), time.Now(), nil); err != nil {
			t.Fatal(err)
		}
		if v, err := s.FreshItemView(ctx, it.ID); err != nil || v.Remaining != 2 {
			t.Errorf("FreshItemView with one order in flight: %+v, %v; want 2 left (the database's count)", v, err)
		}
		// carol takes the last unit: the gate is empty, nothing is left to
		// admit anyone for.
		for _, u := range []string{"carol", "dave"} {
			_, err := s.gate.Reserve(ctx, gate.Single(it.ID), u, uuid.Must(uuid.NewV7()).String(), time.Now(), nil)
			if (u == "dave") != errors.Is(err, stock.ErrSoldOut) {
				t.Fatalf("%s's reserve: %v (only dave's finds the gate sold out)", u, err)
			}
		}
		if v, err := s.FreshItemView(ctx, it.ID); err != nil || v.Remaining != 0 {
			t.Errorf("FreshItemView with the gate empty: %+v, %v; want 0 left", v, err)
		}
	})
}

// TestItemViewDuringASale: views read while buyers race never show a
// negative count or more than the stock, and once the sale is over and
// ViewMaxAge has passed the view shows exactly what the gate has left.
func TestItemViewDuringASale(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{Queue: queue.Config{Writers: 1}}, nil)
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "race", Stock: 20, Strategy: stock.StrategyLuaAsync})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var bad atomic.Int64
		for r := 0; r < 8; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					v, err := s.ItemView(ctx, it.ID)
					if err != nil || v.Remaining < 0 || v.Remaining > 20 {
						bad.Add(1)
					}
				}
			}()
		}
		var buyers sync.WaitGroup
		for u := 0; u < 40; u++ {
			buyers.Add(1)
			go func() {
				defer buyers.Done()
				_, _, _ = s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: fmt.Sprintf("buyer-%d", u)})
			}()
		}
		buyers.Wait()
		close(stop)
		wg.Wait()
		if n := bad.Load(); n > 0 {
			t.Errorf("%d views failed or were out of range", n)
		}
		time.Sleep(ViewMaxAge)
		v, err := s.ItemView(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		left, ok, err := s.gate.Remaining(ctx, it.ID)
		if err != nil || !ok {
			t.Fatalf("gate: %v, present %v", err, ok)
		}
		if v.Remaining != left || left != 0 {
			t.Errorf("after the sale: view %d, gate %d; want both 0 (40 buyers for 20 units)", v.Remaining, left)
		}
	})
}
