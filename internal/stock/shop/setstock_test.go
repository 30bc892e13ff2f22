package shop

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// gateStock reads the stock field of an item's gate ("" without a gate).
func gateStock(t *testing.T, rdb *redis.Client, s *Service, id int64) string {
	t.Helper()
	v, err := rdb.HGet(context.Background(), s.keys.Meta(id), "stock").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return v
}

// gateAndDBStock reads the gate's stock and the item as the database has it.
func gateAndDBStock(t *testing.T, rdb *redis.Client, s *Service, id int64) (string, *stock.Item) {
	t.Helper()
	db, err := s.store.Item(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return gateStock(t, rdb, s, id), db
}

// Two stock changes of one item at once, 200 times, up, down and mixed, on
// a lua and a lua-async item: after each pair the gate holds exactly the
// stock the database holds. (The gate used to be written after the commit,
// outside the row lock, so the older change could land last.)
func TestConcurrentStockChangesKeepTheGateEqualToTheDatabase(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		rdb := b.Redis(t)
		var items []*stock.Item
		for _, strategy := range []stock.StrategyName{stock.StrategyLua, stock.StrategyLuaAsync} {
			it, err := s.CreateItem(ctx, stock.NewItem{Name: "stock race " + string(strategy), Stock: 100, Strategy: strategy})
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, it)
		}
		pairs := []struct {
			name string
			a, b int64
		}{{"both up", 150, 170}, {"both down", 50, 70}, {"mixed", 60, 140}}
		mismatches := 0
		for i := 0; i < 200; i++ {
			it, p := items[i%len(items)], pairs[i%len(pairs)]
			if _, _, err := s.SetStock(ctx, it.ID, 100); err != nil {
				t.Fatalf("reset: %v", err)
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, n := range []int64{p.a, p.b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if _, _, err := s.SetStock(ctx, it.ID, n); err != nil {
						t.Errorf("try %d (%s): set stock %d: %v", i, p.name, n, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if got, db := gateAndDBStock(t, rdb, s, it.ID); got != strconv.FormatInt(db.Stock, 10) {
				mismatches++
				if mismatches <= 5 {
					t.Errorf("try %d (%s, %s, %d and %d): gate stock %q, database %d", i, it.Strategy, p.name, p.a, p.b, got, db.Stock)
				}
			}
		}
		if mismatches > 0 {
			t.Errorf("the gate and the database disagreed after %d of 200 pairs of concurrent changes", mismatches)
		}
	})
}

// Lowering the stock of a lua-async item whose gate is missing must still
// count the orders its stream holds: they are promised. The change is
// refused (stock_below_sold) and every queued order is written.
func TestLoweringStockCountsTheQueueWhenTheGateIsMissing(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		api := asyncService(t, b, st, 0, 0, 0)
		it := createAsyncItem(t, api, 10)
		ids := queueOrders(t, api, it.ID, 6, "Queued")
		rdb := b.Redis(t)
		if err := rdb.Del(ctx, api.keys.Meta(it.ID)).Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := rdb.XLen(ctx, api.keys.Stream(it.ID)).Result(); err != nil || n != 6 {
			t.Fatalf("stream: got %d entries %v, want 6", n, err)
		}

		_, _, err := api.SetStock(ctx, it.ID, 3)
		if !errors.Is(err, stock.ErrStockBelowSold) {
			t.Errorf("stock 3 below 6 queued orders with the gate missing: got %v, want ErrStockBelowSold", err)
		}
		if got, err := st.Item(ctx, it.ID); err != nil || got.Stock != 10 {
			t.Errorf("database after the refused change: got %+v %v, want stock 10", got, err)
		}

		asyncService(t, b, st, 1, time.Second, 0)
		awaitWritten(t, api, ids, 15*time.Second)
		got, err := st.Item(ctx, it.ID)
		if err != nil || got.Sold != 6 {
			t.Errorf("sold: got %+v %v, want 6", got, err)
		}
		// Exactly what is sold is allowed.
		if _, got, err = api.SetStock(ctx, it.ID, 6); err != nil {
			t.Fatalf("stock 6 with 6 sold: %v", err)
		}
		if g := gateStock(t, rdb, api, it.ID); g != strconv.FormatInt(got.Stock, 10) {
			t.Errorf("gate stock %q, database %d", g, got.Stock)
		}
	})
}

// A reconcile that repairs the gate while the stock changes must not write
// back the stock it read before the change: after both, the gate holds the
// database's stock.
func TestReconcileDuringStockChangesKeepsTheGateEqualToTheDatabase(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		rdb := b.Redis(t)
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "reconcile race", Stock: 100, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}
		mismatches := 0
		for i := 0; i < 200; i++ {
			// Drift for the reconcile to repair: the gate lost its count.
			if err := rdb.HSet(ctx, s.keys.Meta(it.ID), "taken", 7).Err(); err != nil {
				t.Fatal(err)
			}
			n := int64(100 + i%2*50)
			start := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				if _, _, err := s.SetStock(ctx, it.ID, n); err != nil {
					t.Errorf("try %d: set stock %d: %v", i, n, err)
				}
			}()
			go func() {
				defer wg.Done()
				<-start
				if _, err := s.Reconcile(ctx, it.ID, true); err != nil {
					t.Errorf("try %d: reconcile: %v", i, err)
				}
			}()
			close(start)
			wg.Wait()
			if got, db := gateAndDBStock(t, rdb, s, it.ID); got != strconv.FormatInt(db.Stock, 10) {
				mismatches++
				if mismatches <= 5 {
					t.Errorf("try %d: gate stock %q, database %d", i, got, db.Stock)
				}
			}
		}
		if mismatches > 0 {
			t.Errorf("the gate and the database disagreed after %d of 200 reconciles racing a stock change", mismatches)
		}
	})
}

// A change the database refuses after the gate was written (here a trigger
// refuses stock 999) leaves the gate as the database is: the failed change
// sets the gate back from the database, under the row lock.
func TestFailedStockChangeSetsTheGateBack(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		rdb := b.Redis(t)
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "refused change", Stock: 100, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}
		trigger := "CREATE TRIGGER refuse_999 BEFORE UPDATE ON items FOR EACH ROW WHEN NEW.stock = 999 BEGIN SELECT RAISE(ABORT, 'stock 999 refused'); END"
		if b.MySQLDSN != "" {
			trigger = "CREATE TRIGGER refuse_999 BEFORE UPDATE ON items FOR EACH ROW BEGIN IF NEW.stock = 999 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'stock 999 refused'; END IF; END"
		}
		if _, err := rawSQL(t, s.store).ExecContext(ctx, trigger); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SetStock(ctx, it.ID, 999); err == nil {
			t.Fatal("set stock 999: got no error, want the trigger's refusal")
		}
		if got := gateStock(t, rdb, s, it.ID); got != "100" {
			t.Errorf("gate stock after the refused change: got %q, want 100 (the database's)", got)
		}
		if _, _, err := s.SetStock(ctx, it.ID, 120); err != nil {
			t.Fatal(err)
		}
		if got := gateStock(t, rdb, s, it.ID); got != "120" {
			t.Errorf("gate stock after the next change: got %q, want 120", got)
		}
	})
}
