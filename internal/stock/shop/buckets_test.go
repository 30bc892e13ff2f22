package shop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// createBucketed creates a lua item of units split over k buckets.
func createBucketed(t *testing.T, s *Service, units int64, k int) *stock.Item {
	t.Helper()
	return createBucketedAs(t, s, stock.StrategyLua, units, k)
}

// createBucketedAs creates an item of the strategy, units split over k
// buckets.
func createBucketedAs(t *testing.T, s *Service, strategy stock.StrategyName, units int64, k int) *stock.Item {
	t.Helper()
	it, err := s.CreateItem(context.Background(), stock.NewItem{Name: "hot", Stock: units, Strategy: strategy, Buckets: k})
	if err != nil {
		t.Fatal(err)
	}
	if it.Buckets != k {
		t.Fatalf("buckets: got %d, want %d", it.Buckets, k)
	}
	return it
}

// skewedUsers returns n user ids of which about hot out of 10 have their
// home in bucket 0 of k (the rest spread over the others).
func skewedUsers(prefix string, itemID int64, k, n, hot int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		u := fmt.Sprintf("%s-%d", prefix, i)
		home := gate.HomeBucket(itemID, k, u).B
		if (len(out)%10 < hot) == (home == 0) {
			out = append(out, u)
		}
	}
	return out
}

// buyRetries bounds how often buyAll's buyer tries again after
// ErrUnavailable: far more than a loaded machine needs.
const buyRetries = 50

// buyAll has each user try once (again after ErrUnavailable), all at
// once, and returns the orders and the refusals by error.

func buyAll(t *testing.T, s *Service, itemID int64, users []string) (orders map[string]string, refused map[string]int) {
	t.Helper()
	var mu sync.Mutex
	orders, refused = map[string]string{}, map[string]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Unavailable must change nothing, so the buyer tries
			// again, as a client would: a loaded machine may miss a
			// write timeout, and what is checked is what sells.
			o, _, err := s.PlaceOrder(context.Background(), stock.OrderRequest{ItemID: itemID, UserID: u})
			for try := 1; errors.Is(err, stock.ErrUnavailable) && try <= buyRetries; try++ {
				time.Sleep(time.Duration(min(try, 10)) * 20 * time.Millisecond)
				o, _, err = s.PlaceOrder(context.Background(), stock.OrderRequest{ItemID: itemID, UserID: u})
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				orders[u] = o.ID
			case errors.Is(err, stock.ErrSoldOut):
				refused["sold_out"]++
			case errors.Is(err, stock.ErrAlreadyPurchased):
				refused["already_purchased"]++
			default:
				refused[err.Error()]++
			}
		}()
	}
	close(start)
	wg.Wait()
	return orders, refused
}

// checkSold fails unless the database sold want units of the item in want
// orders of distinct users.
func checkSold(t *testing.T, s *Service, itemID int64, want int64) {
	t.Helper()
	it, err := s.store.Item(context.Background(), itemID)
	if err != nil {
		t.Fatal(err)
	}
	var orders, users int64
	if err := rawSQL(t, s.store).QueryRow("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM orders WHERE item_id = ? AND status <> 'cancelled'", itemID).
		Scan(&orders, &users); err != nil {
		t.Fatal(err)
	}
	if it.Sold != want || orders != want || users != want {
		t.Errorf("sold %d, live orders %d of %d users; want %d of each", it.Sold, orders, users, want)
	}
	checkBucketRows(t, s, it)
}

// Demand that lands mostly on one bucket: the units of the others move to
// it, and the sale sells exactly its stock. With demand equal to stock,
// every buyer gets a unit: nobody hears sold_out while another bucket
// still has one (no phantom sold-out).
func TestBucketsSkewedDemandSellsEveryUnit(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		s := newTestService(t, b, Config{}, nil)
		for _, tc := range []struct {
			name         string
			k, users     int
			units        int64
			hot          int
			wantRefusals int
		}{
			{"demand equals stock, 90% on one of 4", 4, 120, 120, 9, 0},
			{"demand equals stock, all on one of 8", 8, 64, 64, 10, 0},
			{"demand over stock, 90% on one of 3", 3, 300, 90, 9, 210},
		} {
			t.Run(tc.name, func(t *testing.T) {
				it := createBucketed(t, s, tc.units, tc.k)
				users := skewedUsers(fmt.Sprintf("skew%d", it.ID), it.ID, tc.k, tc.users, tc.hot)
				orders, refused := buyAll(t, s, it.ID, users)
				if int64(len(orders)) != tc.units || refused["sold_out"] != tc.wantRefusals || len(refused) > 1 {
					t.Errorf("got %d orders and refusals %v; want %d orders and %d sold_out", len(orders), refused, tc.units, tc.wantRefusals)
				}
				checkSold(t, s, it.ID, tc.units)
				v, err := s.gate.ReadBuckets(context.Background(), it.ID, tc.k, false)
				if err != nil {
					t.Fatal(err)
				}
				if v.Free != 0 || v.Taken != tc.units || v.Stock != tc.units || v.Moving != 0 {
					t.Errorf("buckets after the sale: %+v; want all %d taken, none free or moving", v, tc.units)
				}
				// Sold out now, for anyone, in any bucket.
				for _, u := range skewedUsers(fmt.Sprintf("late%d", it.ID), it.ID, tc.k, 8, 5) {
					if _, _, err := s.PlaceOrder(context.Background(), stock.OrderRequest{ItemID: it.ID, UserID: u}); !errors.Is(err, stock.ErrSoldOut) {
						t.Errorf("late buyer %s: got %v, want sold out", u, err)
					}
				}
			})
		}
	})
}

// A process killed between a move's two steps (units taken out of one
// bucket and recorded, not yet added to the other) loses no unit: a buyer
// who finds the item empty finishes the move, and so does the sweeper.
func TestBucketsMoveSurvivesKillBetweenSteps(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		for _, finisher := range []string{"sweeper", "buyer"} {
			t.Run(finisher, func(t *testing.T) {
				const k, units = 3, 9
				it := createBucketed(t, s, units, k)
				// Two half-done moves: out of bucket 1 into 0, out of 2 into 1.
				for _, m := range [][2]int{{1, 0}, {2, 1}} {
					if err := s.gate.StartMove(ctx, gate.Bucket{Item: it.ID, B: m[0], K: k}, m[1], time.Now().Add(-time.Minute)); err != nil {
						t.Fatal(err)
					}
				}
				v, err := s.gate.ReadBuckets(ctx, it.ID, k, false)
				if err != nil {
					t.Fatal(err)
				}
				if v.Moving != 4 || v.Free != units {
					t.Fatalf("after two half-done moves: moving %d, free %d; want 4 (2 + 2) and %d", v.Moving, v.Free, units)
				}
				if finisher == "sweeper" {
					n, err := s.FinishMoves(ctx, time.Now().Add(-moveGrace))
					if err != nil || n != 2 {
						t.Fatalf("sweeper finished %d moves (%v), want 2", n, err)
					}
					v, _ := s.gate.ReadBuckets(ctx, it.ID, k, false)
					if v.Moving != 0 || v.Free != units {
						t.Fatalf("after the sweeper: moving %d, free %d; want 0 and %d", v.Moving, v.Free, units)
					}
				}
				users := skewedUsers(fmt.Sprintf("kill%d", it.ID), it.ID, k, units+5, 10) // all at home in bucket 0
				orders, refused := buyAll(t, s, it.ID, users)
				if len(orders) != units || refused["sold_out"] != 5 {
					t.Errorf("got %d orders, refusals %v; want %d orders and 5 sold_out", len(orders), refused, units)
				}
				checkSold(t, s, it.ID, units)
			})
		}
	})
}

// One user from many goroutines at once, on an item of 4 buckets: one
// order; every other attempt is already_purchased.
func TestBucketsOneOrderPerUser(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		s := newTestService(t, b, Config{}, nil)
		it := createBucketed(t, s, 10, 4)
		users := make([]string, 50)
		for i := range users {
			users[i] = "same-user"
		}
		orders, refused := buyAll(t, s, it.ID, users)
		if len(orders) != 1 || refused["already_purchased"] != 49 {
			t.Errorf("got %d orders, refusals %v; want 1 and 49 already_purchased", len(orders), refused)
		}
		checkSold(t, s, it.ID, 1)
	})
}

// A cancelled order's unit, and an expired one's, sells again, once.
func TestBucketsReleaseSellsAgain(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestServiceOn(t, b, newTestStore(t, b, &store.Options{PaymentTimeout: time.Hour}), Config{}, nil)
		it := createBucketed(t, s, 6, 3)
		orders, _ := buyAll(t, s, it.ID, users("first", 10))
		if len(orders) != 6 {
			t.Fatalf("first wave: %d orders, want 6", len(orders))
		}
		cancelled := 0
		for u, id := range orders {
			if _, err := s.CancelOrder(ctx, id, u); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CancelOrder(ctx, id, u); err != nil { // twice: one unit back
				t.Fatal(err)
			}
			if cancelled++; cancelled == 2 {
				break
			}
		}
		// Expire the rest: their payment deadline is 15 minutes away.
		if n, err := s.ExpireDue(ctx, time.Now().Add(2*time.Hour)); err != nil || n != 4 {
			t.Fatalf("expired %d (%v), want 4", n, err)
		}
		if n, err := s.ReturnStock(ctx, time.Now().Add(2*time.Hour)); err != nil || n != 0 {
			t.Fatalf("stock returns left undone: %d (%v), want 0", n, err)
		}
		orders2, refused := buyAll(t, s, it.ID, users("second", 10))
		if len(orders2) != 6 || refused["sold_out"] != 4 {
			t.Errorf("second wave: %d orders, refusals %v; want 6 and 4 sold_out", len(orders2), refused)
		}
		checkSold(t, s, it.ID, 6)
	})
}

// Stock raised and cut on an item of 3 buckets: the buckets sell exactly
// the database's stock; a cut below what is sold is refused and changes
// nothing.
func TestBucketsStockChanges(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		it := createBucketed(t, s, 10, 3)
		if o, _ := buyAll(t, s, it.ID, users("a", 4)); len(o) != 4 {
			t.Fatalf("%d orders, want 4", len(o))
		}
		if _, _, err := s.SetStock(ctx, it.ID, 20); err != nil {
			t.Fatal(err)
		}
		if o, _ := buyAll(t, s, it.ID, users("b", 6)); len(o) != 6 {
			t.Fatalf("%d orders, want 6", len(o))
		}
		// 10 sold, 10 free: cut to 15 leaves 5.
		if _, _, err := s.SetStock(ctx, it.ID, 15); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SetStock(ctx, it.ID, 9); !errors.Is(err, stock.ErrStockBelowSold) {
			t.Fatalf("cut below sold: got %v, want ErrStockBelowSold", err)
		}
		v, err := s.gate.ReadBuckets(ctx, it.ID, 3, false)
		if err != nil {
			t.Fatal(err)
		}
		if v.Stock != 15 || v.Free != 5 {
			t.Errorf("buckets: stock %d free %d, want 15 and 5", v.Stock, v.Free)
		}
		orders, refused := buyAll(t, s, it.ID, users("c", 12))
		if len(orders) != 5 || refused["sold_out"] != 7 {
			t.Errorf("%d orders, refusals %v; want 5 and 7 sold_out", len(orders), refused)
		}
		checkSold(t, s, it.ID, 15)
		if r, err := s.Reconcile(ctx, it.ID, false); err != nil || len(r.Drift) != 0 {
			t.Errorf("reconcile: %+v, %v; want no drift", r, err)
		}
	})
}

// Reconcile of an item of 3 buckets after a sale and a cancellation finds
// no drift; with a bucket's units lost it reports drift, and its repair
// rebuilds every bucket so the sale sells exactly its stock.
func TestBucketsReconcile(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		rdb := b.Redis(t)
		it := createBucketed(t, s, 30, 3)
		orders, _ := buyAll(t, s, it.ID, users("a", 12))
		for u, id := range orders {
			if _, err := s.CancelOrder(ctx, id, u); err != nil {
				t.Fatal(err)
			}
			break
		}
		r, err := s.Reconcile(ctx, it.ID, false)
		if err != nil || len(r.Drift) != 0 || r.GateStock != 30 || r.GateTaken != 11 || r.Buyers != 12 {
			t.Fatalf("reconcile after a sale: %+v, %v; want no drift, gate stock 30, taken 11, 12 buyers", r, err)
		}
		// Units lost from one bucket (as if Redis lost a write).
		if err := rdb.HIncrBy(ctx, s.keys.Bucket(gate.Bucket{Item: it.ID, B: 2, K: 3}).Meta, "stock", -3).Err(); err != nil {
			t.Fatal(err)
		}
		if r, err := s.Reconcile(ctx, it.ID, false); err != nil || len(r.Drift) == 0 || r.GateStock != 27 {
			t.Fatalf("reconcile with 3 units lost: %+v, %v; want drift, gate stock 27", r, err)
		}
		if r, err := s.Reconcile(ctx, it.ID, true); err != nil || !r.Repaired {
			t.Fatalf("repair: %+v, %v; want repaired", r, err)
		}
		if r, err := s.Reconcile(ctx, it.ID, false); err != nil || len(r.Drift) != 0 {
			t.Fatalf("reconcile after the repair: %+v, %v; want no drift", r, err)
		}
		more, _ := buyAll(t, s, it.ID, users("b", 40))
		if len(more) != 19 {
			t.Errorf("after the repair: %d orders, want 19", len(more))
		}
		checkSold(t, s, it.ID, 30)
	})
}

// One bucket's keys deleted mid-sale (its master lost its data): the next
// order that finds it missing rebuilds every bucket from the database, and
// the sale sells exactly its stock, to distinct users.
func TestBucketsRebuildAfterOneBucketLost(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		rdb := b.Redis(t)
		it := createBucketed(t, s, 30, 3)
		first := users("a", 10)
		if o, _ := buyAll(t, s, it.ID, first); len(o) != 10 {
			t.Fatalf("%d orders, want 10", len(o))
		}
		keys := s.keys.Bucket(gate.Bucket{Item: it.ID, B: 1, K: 3})
		if err := rdb.Del(ctx, keys.Meta, keys.Buyers, keys.Released, keys.Out, keys.In).Err(); err != nil {
			t.Fatal(err)
		}
		// The first buyers again, and new ones: 20 units left.
		orders, refused := buyAll(t, s, it.ID, append(users("b", 30), first...))
		if len(orders) != 20 || refused["sold_out"] != 10 || refused["already_purchased"] != 10 {
			t.Errorf("%d orders, refusals %v; want 20, 10 sold_out, 10 already_purchased", len(orders), refused)
		}
		checkSold(t, s, it.ID, 30)
		if r, err := s.Reconcile(ctx, it.ID, false); err != nil || len(r.Drift) != 0 {
			t.Errorf("reconcile: %+v, %v; want no drift", r, err)
		}
	})
}

// Stock changes racing each other and a stampede on an item of 4 buckets:
// after each round the buckets' stock is the database's, and the sale
// sells exactly the final stock.
func TestBucketsStockChangesRaceOrders(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		it := createBucketed(t, s, 40, 4)
		for round := 0; round < 10; round++ {
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, n := range []int64{int64(45 + round), int64(60 + round)} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if _, _, err := s.SetStock(ctx, it.ID, n); err != nil && !errors.Is(err, stock.ErrStockBelowSold) {
						t.Errorf("round %d: set stock %d: %v", round, n, err)
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				buyAll(t, s, it.ID, users(fmt.Sprintf("r%d-", round), 5))
			}()
			close(start)
			wg.Wait()
			db, err := s.store.Item(ctx, it.ID)
			if err != nil {
				t.Fatal(err)
			}
			v, err := s.gate.ReadBuckets(ctx, it.ID, 4, false)
			if err != nil {
				t.Fatal(err)
			}
			if v.Stock != db.Stock || v.Taken != db.Sold {
				t.Fatalf("round %d: buckets stock %d taken %d, database stock %d sold %d", round, v.Stock, v.Taken, db.Stock, db.Sold)
			}
		}
		db, _ := s.store.Item(ctx, it.ID)
		buyAll(t, s, it.ID, users("last", 100))
		checkSold(t, s, it.ID, db.Stock)
	})
}

// Idempotency-Keys on an item of 4 buckets: a replay answers the same
// order; the key used by another user (whose home is another bucket) is a
// conflict, and buys nothing.
func TestBucketsIdempotencyKeys(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		it := createBucketed(t, s, 5, 4)
		alice, bob := "alice", "bob"
		for i := 0; gate.HomeBucket(it.ID, 4, bob) == gate.HomeBucket(it.ID, 4, alice); i++ {
			bob = fmt.Sprintf("bob%d", i)
		}
		first, replayed, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: alice, IdempotencyKey: "k-1"})
		if err != nil || replayed {
			t.Fatalf("first: %v, replayed %v", err, replayed)
		}
		again, replayed, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: alice, IdempotencyKey: "k-1"})
		if err != nil || !replayed || again.ID != first.ID {
			t.Fatalf("replay: got %+v replayed %v err %v; want order %s replayed", again, replayed, err, first.ID)
		}
		if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: bob, IdempotencyKey: "k-1"}); !errors.Is(err, stock.ErrIdempotencyConflict) {
			t.Fatalf("the key by another user: got %v, want ErrIdempotencyConflict", err)
		}
		checkSold(t, s, it.ID, 1)
	})
}
