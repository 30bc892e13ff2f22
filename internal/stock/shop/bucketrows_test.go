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

// checkBucketRows checks the database's bucket rows of it (a lua item
// with buckets > 1; nothing for one bucket): one row per bucket, each
// row's sold within its stock and equal to the live orders of the buyers
// whose home bucket it is, the rows' stock the item's stock and their sold
// the item's sold. It returns the rows.
func checkBucketRows(t *testing.T, s *Service, it *stock.Item) []store.BucketRow {
	t.Helper()
	ctx := context.Background()
	now, err := s.store.Item(ctx, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	if now.Buckets <= 1 {
		return nil
	}
	rows, err := s.store.BucketRows(ctx, it.ID, now.Buckets)
	if err != nil {
		t.Fatal(err)
	}
	var units, sold int64
	for _, r := range rows {
		units += r.Stock
		sold += r.Sold
		if r.Sold < 0 || r.Sold > r.Stock || r.Sold != r.Live {
			t.Errorf("item %d bucket row %d: stock %d sold %d, %d live orders of its buyers; want 0 <= sold == live <= stock",
				it.ID, r.Bucket, r.Stock, r.Sold, r.Live)
		}
	}
	if units != now.Stock || sold != now.Sold {
		t.Errorf("item %d: bucket rows hold %d units with %d sold; the item says stock %d sold %d", it.ID, units, sold, now.Stock, now.Sold)
	}
	return rows
}

// usersIn returns n user ids whose home bucket (of k, item itemID) is b.
func usersIn(prefix string, itemID int64, k, b, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		u := fmt.Sprintf("%s-%d", prefix, i)
		if gate.HomeBucket(itemID, k, u).B == b {
			out = append(out, u)
		}
	}
	return out
}

// A stampede of buyers, nine in ten of them in one bucket of four: that
// bucket's row runs dry and units move to it from the others. Every buyer
// is sold a unit while units remain (no sold_out before the end), then
// exactly the rest of the stock sells and no more; every row's sold is the
// live orders of its buyers.
func TestBucketRowsSkewedStampede(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		s := newTestService(t, b, Config{}, nil)
		it := createBucketed(t, s, 200, 4)
		before := checkBucketRows(t, s, it)
		for _, r := range before {
			if r.Stock != 50 || r.Sold != 0 {
				t.Fatalf("new item's rows: %+v, want 50 units each, none sold", before)
			}
		}
		orders, refused := buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("st%d", it.ID), it.ID, 4, 180, 9))
		if len(orders) != 180 || len(refused) != 0 {
			t.Fatalf("180 buyers for 200 units: %d orders, refusals %v; want every one sold", len(orders), refused)
		}
		rows := checkBucketRows(t, s, it)
		if rows[0].Stock <= 50 {
			t.Errorf("bucket 0's row still holds %d units: no units moved to the hot bucket (%+v)", rows[0].Stock, rows)
		}
		// The rest: 20 units for 40 buyers, half of them in the hot bucket.
		orders, refused = buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("late%d", it.ID), it.ID, 4, 40, 5))
		if len(orders) != 20 || refused["sold_out"] != 20 || len(refused) != 1 {
			t.Errorf("40 buyers for the last 20 units: %d orders, refusals %v; want 20 and 20 sold_out", len(orders), refused)
		}
		checkSold(t, s, it.ID, 200)
	})
}

// Two instances on one database sell one bucketed item whose buyers all
// live in one bucket: both move units into that bucket's row at once, and
// the item sells exactly its stock, every unit of it.
func TestBucketRowsTwoInstancesMoveAtOnce(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		s1 := newTestService(t, b, Config{}, nil)
		s2 := newTestService(t, b, Config{}, nil)
		it := createBucketed(t, s1, 120, 4)
		buyers := usersIn(fmt.Sprintf("two%d", it.ID), it.ID, 4, 0, 160)
		type result struct {
			orders  map[string]string
			refused map[string]int
		}
		done := make(chan result, 2)
		for i, s := range []*Service{s1, s2} {
			go func() {
				o, r := buyAll(t, s, it.ID, buyers[i*80:(i+1)*80])
				done <- result{o, r}
			}()
		}
		sold, soldOut := 0, 0
		for range 2 {
			r := <-done
			sold += len(r.orders)
			soldOut += r.refused["sold_out"]
			if len(r.refused) > 1 || (len(r.refused) == 1 && r.refused["sold_out"] == 0) {
				t.Errorf("refusals other than sold_out: %v", r.refused)
			}
		}
		if sold != 120 || soldOut != 40 {
			t.Errorf("160 buyers, 120 units, two instances: %d orders, %d sold_out; want 120 and 40", sold, soldOut)
		}
		checkSold(t, s1, it.ID, 120)
		rows := checkBucketRows(t, s2, it)
		if rows[0].Stock != 120 || rows[0].Sold != 120 {
			t.Errorf("bucket 0's row: %+v; want every unit moved to it and sold", rows[0])
		}
	})
}

// A database stall during a move between rows (another transaction holds
// a donor row's lock past the write timeout): the buyer hears a fast 503,
// before the lock is let go; nothing was written or moved; once the lock
// is gone, every unit still sells. MariaDB only: SQLite has one writer.
func TestBucketRowsStallDuringMove(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	ctx := context.Background()
	s := newTestService(t, b, Config{WriteTimeout: 300 * time.Millisecond}, nil)
	it := createBucketed(t, s, 4, 4) // one unit per row
	hot := usersIn(fmt.Sprintf("stall%d", it.ID), it.ID, 4, 0, 6)
	if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: hot[0]}); err != nil {
		t.Fatal(err)
	}
	// Hold bucket 3's row, as a stalled database would.
	holder, err := rawSQL(t, s.store).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	if err := holder.QueryRowContext(ctx, "SELECT stock FROM item_stock WHERE item_id = ? AND bucket = 3 FOR UPDATE", it.ID).Scan(&held); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: hot[1]})
	// The answer came while the lock is still held: no hang.
	if !errors.Is(err, stock.ErrUnavailable) {
		t.Errorf("order whose row's move is stalled: got %v, want ErrUnavailable", err)
	}
	rows := checkBucketRows(t, s, it)
	for b, r := range rows {
		if r.Stock != 1 || r.Sold != int64(1-min(b, 1)) {
			t.Errorf("after the stalled move: rows %+v; want each 1 unit, row 0 sold, nothing moved", rows)
			break
		}
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	// The stalled order's reservation is settled in the background (its
	// write's outcome was unknown): wait until the gate has it back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := s.gate.ReadBuckets(ctx, it.ID, 4, false)
		if err != nil {
			t.Fatal(err)
		}
		if v.Taken == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stalled order's reservation was never handed back: %+v", v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The rest sells through a second instance on the same database and
	// Redis, with the tests' machine budget for a write: the first one's
	// 300 ms is for the stall above, and a loaded machine misses it on
	// plain writes (CI: an order's commit past it answered 503 with its
	// outcome unknown, and its unit waited for the orphan window).
	s2 := newTestServiceOn(t, b, s.store, Config{}, nil)
	orders, refused := buyAll(t, s2, it.ID, hot[1:])
	if len(orders) != 3 || refused["sold_out"] != 2 {
		t.Errorf("after the stall: %d orders, refusals %v; want the 3 units left sold, 2 sold_out", len(orders), refused)
	}
	checkSold(t, s, it.ID, 4)
}

// Redis loses every key of a bucketed item mid-sale, after units moved
// between rows: the rebuild reads the rows' sums, and the item still sells
// exactly its stock.
func TestBucketRowsRedisLoss(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		s := newTestService(t, b, Config{}, nil)
		rdb := b.Universal(t)
		it := createBucketed(t, s, 60, 4)
		orders, refused := buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("loss%d", it.ID), it.ID, 4, 40, 9))
		if len(orders) != 40 || len(refused) != 0 {
			t.Fatalf("before the loss: %d orders, refusals %v; want 40", len(orders), refused)
		}
		checkBucketRows(t, s, it)
		testenv.DeleteKeys(t, rdb, b.KeyPrefix+"*")
		orders, refused = buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("after%d", it.ID), it.ID, 4, 40, 9))
		if len(orders) != 20 || refused["sold_out"] != 20 || len(refused) != 1 {
			t.Errorf("after the loss: %d orders, refusals %v; want 20 and 20 sold_out", len(orders), refused)
		}
		checkSold(t, s, it.ID, 60)
		if r, err := s.Reconcile(context.Background(), it.ID, false); err != nil || len(r.Drift) != 0 {
			t.Errorf("reconcile after the loss: %+v, %v; want no drift", r, err)
		}
	})
}

// A cancelled or expired order of a bucketed item gives its unit back to
// the row of its buyer's home bucket, and the unit sells again.
func TestBucketRowsCancelAndExpiry(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, &store.Options{PaymentTimeout: time.Hour})
		s := newTestServiceOn(t, b, st, Config{}, nil)
		it := createBucketed(t, s, 9, 3)
		orders, _ := buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("cx%d", it.ID), it.ID, 3, 9, 6))
		if len(orders) != 9 {
			t.Fatalf("%d orders, want 9", len(orders))
		}
		before := checkBucketRows(t, s, it)
		var user string
		for u := range orders {
			user = u
			break
		}
		if _, err := s.CancelOrder(ctx, orders[user], user); err != nil {
			t.Fatal(err)
		}
		after := checkBucketRows(t, s, it)
		home := gate.HomeBucket(it.ID, 3, user).B
		for i := range after {
			want := before[i].Sold
			if i == home {
				want--
			}
			if after[i].Sold != want || after[i].Stock != before[i].Stock {
				t.Errorf("row %d after %s (home %d) cancelled: %+v, was %+v", i, user, home, after[i], before[i])
			}
		}
		n, err := s.ExpireDue(ctx, time.Now().Add(2*time.Hour))
		if err != nil || n != 8 {
			t.Fatalf("expired %d, %v; want 8", n, err)
		}
		for _, r := range checkBucketRows(t, s, it) {
			if r.Sold != 0 {
				t.Errorf("row %d after every order expired: sold %d, want 0", r.Bucket, r.Sold)
			}
		}
		if _, err := s.ReturnStock(ctx, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		more, refused := buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("again%d", it.ID), it.ID, 3, 12, 8))
		if len(more) != 9 || refused["sold_out"] != 3 {
			t.Errorf("after the returns: %d orders, refusals %v; want 9 and 3 sold_out", len(more), refused)
		}
		checkSold(t, s, it.ID, 9)
	})
}

// Stock changes of a bucketed item spread over its rows (a raise evenly, a
// cut from the rows' free units), and the admin and public views show the
// rows' sums.
func TestBucketRowsStockChangesAndViews(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		it := createBucketed(t, s, 10, 4)
		wantRows := func(what string, stocks ...int64) {
			t.Helper()
			rows := checkBucketRows(t, s, it)
			for i, r := range rows {
				if r.Stock != stocks[i] {
					t.Errorf("%s: rows %+v, want stocks %v", what, rows, stocks)
					return
				}
			}
		}
		wantRows("created", 3, 3, 2, 2)
		if _, _, err := s.SetStock(ctx, it.ID, 20); err != nil {
			t.Fatal(err)
		}
		wantRows("raised by 10", 6, 6, 4, 4)
		hot := usersIn(fmt.Sprintf("sv%d", it.ID), it.ID, 4, 2, 5)
		if o, r := buyAll(t, s, it.ID, hot); len(o) != 5 {
			t.Fatalf("%d orders, refusals %v; want 5", len(o), r)
		}
		// Bucket 2 sold 5 of its 4 and one moved in; free are about 6, 6, 0, 3.
		rows := checkBucketRows(t, s, it)
		if rows[2].Sold != 5 {
			t.Fatalf("bucket 2's row: %+v, want 5 sold", rows[2])
		}
		if _, _, err := s.SetStock(ctx, it.ID, 4); !errors.Is(err, stock.ErrStockBelowSold) {
			t.Errorf("cut below the 5 sold: got %v, want ErrStockBelowSold", err)
		}
		if _, _, err := s.SetStock(ctx, it.ID, 8); err != nil {
			t.Fatal(err)
		}
		rows = checkBucketRows(t, s, it)
		var units int64
		for _, r := range rows {
			units += r.Stock
		}
		if units != 8 || rows[2].Stock < 5 {
			t.Errorf("cut to 8: rows %+v; want 8 units in all, no sold unit cut", rows)
		}
		adm, err := s.Item(ctx, it.ID)
		if err != nil || adm.Stock != 8 || adm.Sold != 5 || adm.Remaining() != 3 {
			t.Errorf("admin view: %+v, %v; want stock 8 sold 5", adm, err)
		}
		page, err := s.ListItems(ctx, stock.ItemFilter{Limit: 10, Status: stock.SaleOnSale})
		if err != nil || len(page.Items) != 1 || page.Items[0].Sold != 5 {
			t.Errorf("items on sale: %+v, %v; want this item with 5 sold", page, err)
		}
		if v, err := s.ItemView(ctx, it.ID); err != nil || v.Remaining != 3 {
			t.Errorf("public view: %+v, %v; want 3 remaining", v, err)
		}
		if o, _ := buyAll(t, s, it.ID, users(fmt.Sprintf("rest%d", it.ID), 6)); len(o) != 3 {
			t.Errorf("the last 3 units: %d orders", len(o))
		}
		page, err = s.ListItems(ctx, stock.ItemFilter{Limit: 10, Status: stock.SaleSoldOut})
		if err != nil || len(page.Items) != 1 || page.Items[0].Sold != 8 {
			t.Errorf("items sold out: %+v, %v; want this item with 8 sold", page, err)
		}
		checkSold(t, s, it.ID, 8)
	})
}

// With no gate in front (three instances' group-commit writers on one
// database, as loadtest/dbcost's floor runs them), the bucket rows alone
// sell exactly the stock: buyers nine in ten of them in one bucket of
// four, as many as the units, all at once, every one sold (moves racing
// on three instances tell nobody sold_out while a row has a unit); then
// nobody more.
func TestBucketRowsWithoutGateNoPhantomSoldOut(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		stores := []*store.Store{newTestStore(t, b, nil), newTestStore(t, b, nil), newTestStore(t, b, nil)}
		if b.MySQLDSN == "" {
			stores = stores[:1] // one SQLite writer
		}
		it := &stock.Item{Name: "bare", Stock: 240, Strategy: stock.StrategyLua, Buckets: 4}
		if err := stores[0].CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		writers := make([]*BareWriter, len(stores))
		for i, st := range stores {
			writers[i] = NewBareWriter(st, false)
			defer writers[i].Close()
		}
		// What this bounds is the count, not the time. A buyer told 503
		// (stock.ErrUnavailable) tries again, as a client does: on SQLite
		// the four bucket writers share one write lock, and under load a
		// transaction's begin has outwaited the database budget. A retry
		// told already_purchased holds the order its earlier try committed;
		// the rows checked below say whether the count is right.
		buy := func(users []string) (sold, soldOut int, other []error) {
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i, u := range users {
				wg.Add(1)
				go func() {
					defer wg.Done()
					o := &stock.Order{ID: fmt.Sprintf("%036s", fmt.Sprintf("%d-%s", it.ID, u)), ItemID: it.ID, UserID: u}
					var err error
					for try := 0; try < 20; try++ {
						octx, cancel := context.WithTimeout(ctx, DefaultRequestTimeout)
						err = writers[i%len(writers)].WriteBucketed(octx, o, "", 4)
						cancel()
						if try > 0 && errors.Is(err, stock.ErrAlreadyPurchased) {
							err = nil
						}
						if !errors.Is(err, stock.ErrUnavailable) {
							break
						}
					}
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						sold++
					case errors.Is(err, stock.ErrSoldOut):
						soldOut++
					default:
						other = append(other, err)
					}
				}()
			}
			wg.Wait()
			return sold, soldOut, other
		}
		sold, soldOut, other := buy(skewedUsers(fmt.Sprintf("bare%d", it.ID), it.ID, 4, 240, 9))
		if sold != 240 || soldOut != 0 || len(other) != 0 {
			t.Errorf("240 buyers for 240 units: %d sold, %d sold_out, other errors %v; want every one sold", sold, soldOut, other)
		}
		sold, soldOut, other = buy(skewedUsers(fmt.Sprintf("late%d", it.ID), it.ID, 4, 20, 5))
		if sold != 0 || soldOut != 20 || len(other) != 0 {
			t.Errorf("after the sell-out: %d sold, %d sold_out, other errors %v; want 20 sold_out", sold, soldOut, other)
		}
		rows, err := stores[0].BucketRows(ctx, it.ID, 4)
		if err != nil {
			t.Fatal(err)
		}
		var units, total int64
		for _, r := range rows {
			units += r.Stock
			total += r.Sold
			if r.Sold != r.Live || r.Sold != r.Stock {
				t.Errorf("row %d: %+v; want every unit sold to its own buyers", r.Bucket, r)
			}
		}
		if units != 240 || total != 240 {
			t.Errorf("rows hold %d units, %d sold; want 240 and 240", units, total)
		}
	})
}
