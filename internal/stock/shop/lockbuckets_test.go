package shop

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// createLockBucketed creates a lock item of units split over k buckets.
func createLockBucketed(t *testing.T, s *Service, units int64, k int) *stock.Item {
	t.Helper()
	it, err := s.CreateItem(context.Background(), stock.NewItem{Name: "hot lock", Stock: units, Strategy: stock.StrategyLock, Buckets: k})
	if err != nil {
		t.Fatal(err)
	}
	if it.Buckets != k || it.Strategy != stock.StrategyLock {
		t.Fatalf("item: strategy %q buckets %d, want lock and %d", it.Strategy, it.Buckets, k)
	}
	return it
}

// rowFences reads the lock_fence of each of an item's bucket rows.
func rowFences(t *testing.T, s *Service, itemID int64) []int64 {
	t.Helper()
	rows, err := rawSQL(t, s.store).Query("SELECT lock_fence FROM item_stock WHERE item_id = ? ORDER BY bucket", itemID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var f int64
		if err := rows.Scan(&f); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A lock item of 4 buckets has 4 locks, each with its bucket's hash tag:
// on a Cluster they fall in 4 different slots.
func TestLockBucketKeysSpread(t *testing.T) {
	t.Parallel()
	keys, err := gate.NewKeys("p")
	if err != nil {
		t.Fatal(err)
	}
	l := &lockBuyer{keys: keys}
	slots := map[int]string{}
	for b := range 4 {
		key := l.lockKey(writeKey{item: 7, bucket: b, buckets: 4})
		if prev, ok := slots[gate.Slot(key)]; ok {
			t.Errorf("locks %s and %s share slot %d", prev, key, gate.Slot(key))
		}
		slots[gate.Slot(key)] = key
	}
	if got, want := l.lockKey(writeKey{item: 7, bucket: 0, buckets: 4}), l.keys.Lock(7); got != want {
		t.Errorf("bucket 0's lock %q, want the item's %q", got, want)
	}
	if got, want := l.lockKey(writeKey{item: 7, buckets: 1}), l.keys.Lock(7); got != want {
		t.Errorf("one bucket's lock %q, want the item's %q", got, want)
	}
}

// Two instances sell a lock item of 4 buckets to a stampede of buyers,
// nine in ten of them in bucket 0: that bucket's row runs dry and units
// move to it (with no lock of the rows they come from). Every buyer is
// sold a unit while units remain, then exactly the rest of the stock sells;
// every row's sold is its buyers' live orders, each row that sold stores
// its bucket's fence, and the items row's fence is never written.
func TestLockBucketsSkewedStampede(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		s1 := newTestService(t, b, Config{}, nil)
		s2 := newTestService(t, b, Config{}, nil)
		it := createLockBucketed(t, s1, 100, 4)
		wave := func(prefix string, n, hot int) (int, map[string]int) {
			users := skewedUsers(fmt.Sprintf("%s%d", prefix, it.ID), it.ID, 4, n, hot)
			type result struct {
				orders  map[string]string
				refused map[string]int
			}
			done := make(chan result, 2)
			for i, s := range []*Service{s1, s2} {
				go func() {
					o, r := buyAll(t, s, it.ID, users[i*n/2:(i+1)*n/2])
					done <- result{o, r}
				}()
			}
			sold, refused := 0, map[string]int{}
			for range 2 {
				r := <-done
				sold += len(r.orders)
				for k, v := range r.refused {
					refused[k] += v
				}
			}
			return sold, refused
		}
		if sold, refused := wave("lk", 80, 9); sold != 80 || len(refused) != 0 {
			t.Fatalf("80 buyers for 100 units: %d orders, refusals %v; want every one sold", sold, refused)
		}
		rows := checkBucketRows(t, s1, it)
		if rows[0].Stock <= 25 {
			t.Errorf("bucket 0's row holds %d units: none moved to the hot bucket (%+v)", rows[0].Stock, rows)
		}
		if sold, refused := wave("lk-late", 40, 5); sold != 20 || refused["sold_out"] != 20 || len(refused) != 1 {
			t.Errorf("40 buyers for the last 20 units: %d orders, refusals %v; want 20 and 20 sold_out", sold, refused)
		}
		checkSold(t, s1, it.ID, 100)
		rows = checkBucketRows(t, s2, it)
		for i, f := range rowFences(t, s1, it.ID) {
			if rows[i].Sold > 0 && f <= 0 {
				t.Errorf("bucket row %d sold %d with no fence stored", i, rows[i].Sold)
			}
		}
		if f, err := s1.store.LockFence(context.Background(), it.ID); err != nil || f != 0 {
			t.Errorf("items row's lock_fence: %d, %v; want 0 (bucket rows carry the fences)", f, err)
		}
		for _, s := range []*Service{s1, s2} {
			if r, err := s.Reconcile(context.Background(), it.ID, false); err != nil || len(r.Drift) != 0 {
				t.Errorf("reconcile: %+v, %v; want no drift", r, err)
			}
		}
	})
}

// Bucket 2's row has accepted a fence far above its Redis counter (a
// failover lost the counter's last INCRs): the next order of a bucket-2
// buyer is refused as stale once, raises that bucket's counter from the
// row and is written. The other buckets' counters and rows are not
// touched. A fenced write below the row's fence writes nothing.
func TestLockBucketStaleFenceRecovers(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		rdb := b.Redis(t)
		it := createLockBucketed(t, s, 40, 4)
		counter := func(bucket int) int64 {
			key := s.locked.lockKey(writeKey{item: it.ID, bucket: bucket, buckets: 4}) + ":fence"
			n, err := rdb.Get(ctx, key).Int64()
			if err != nil {
				t.Fatalf("fence counter of bucket %d: %v", bucket, err)
			}
			return n
		}
		buyers := make([][]string, 4)
		for bk := range 4 {
			buyers[bk] = usersIn(fmt.Sprintf("sf%d-%d", it.ID, bk), it.ID, 4, bk, 2)
			if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: buyers[bk][0]}); err != nil {
				t.Fatalf("bucket %d's first order: %v", bk, err)
			}
			waitUnlocked(t, rdb, s.locked.lockKey(writeKey{item: it.ID, bucket: bk, buckets: 4}))
		}
		counters := make([]int64, 4)
		for bk := range counters {
			counters[bk] = counter(bk)
		}
		fences := rowFences(t, s, it.ID)
		stale := counters[2] + 1000
		if _, err := rawSQL(t, s.store).Exec("UPDATE item_stock SET lock_fence = ? WHERE item_id = ? AND bucket = 2", stale, it.ID); err != nil {
			t.Fatal(err)
		}

		// The store refuses a fence below the row's, writing nothing.
		o := &stock.Order{ID: "00000000-0000-7000-8000-0000000000f2", ItemID: it.ID, UserID: buyers[2][1]}
		err := s.store.InsertOrder(ctx, store.OrderWrite{Order: o, Buckets: 4}, counters[2]+1)
		if !errors.Is(err, store.ErrFenceStale) || !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("a write below bucket 2's fence: %v, want ErrFenceStale", err)
		}
		if _, _, err := s.store.OrderOf(ctx, it.ID, buyers[2][1]); !errors.Is(err, stock.ErrNotFound) {
			t.Fatalf("the refused order: %v, want not found", err)
		}

		// The shop recovers: raise bucket 2's counter, obtain, write.
		if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: buyers[2][1]}); err != nil {
			t.Fatalf("bucket 2's order after its row's fence moved ahead: %v", err)
		}
		after := rowFences(t, s, it.ID)
		if after[2] <= stale {
			t.Errorf("bucket 2's row fence %d, want above %d", after[2], stale)
		}
		if c := counter(2); c < after[2] {
			t.Errorf("bucket 2's counter %d below its row's fence %d", c, after[2])
		}
		for _, bk := range []int{0, 1, 3} {
			if after[bk] != fences[bk] || counter(bk) != counters[bk] {
				t.Errorf("bucket %d touched: row fence %d -> %d, counter %d -> %d", bk, fences[bk], after[bk], counters[bk], counter(bk))
			}
		}
		checkSold(t, s, it.ID, 5)
	})
}

// The rest of a lock item's life with 4 bucket rows: a cancel gives the
// unit back to its buyer's row, stock changes spread over the rows (a cut
// below sold refused), the public view and reconcile read the rows, and
// the item then sells exactly its new stock.
func TestLockBucketsLifecycle(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		it := createLockBucketed(t, s, 8, 4)
		orders, refused := buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("lc%d", it.ID), it.ID, 4, 6, 5))
		if len(orders) != 6 || len(refused) != 0 {
			t.Fatalf("6 buyers for 8 units: %d orders, refusals %v", len(orders), refused)
		}
		for u, id := range orders {
			if _, err := s.CancelOrder(ctx, id, u); err != nil {
				t.Fatal(err)
			}
			break
		}
		checkSold(t, s, it.ID, 5)
		if _, _, err := s.SetStock(ctx, it.ID, 4); !errors.Is(err, stock.ErrStockBelowSold) {
			t.Errorf("stock 4 below 5 sold: got %v, want ErrStockBelowSold", err)
		}
		if _, _, err := s.SetStock(ctx, it.ID, 12); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SetStock(ctx, it.ID, 9); err != nil {
			t.Fatal(err)
		}
		checkBucketRows(t, s, it)
		if v, err := s.ItemView(ctx, it.ID); err != nil || v.Remaining != 4 {
			t.Errorf("public view: %+v, %v; want 4 remaining", v, err)
		}
		if r, err := s.Reconcile(ctx, it.ID, false); err != nil || len(r.Drift) != 0 || r.Sold != 5 || r.Stock != 9 {
			t.Errorf("reconcile: %+v, %v; want stock 9, sold 5, no drift", r, err)
		}
		more, refused := buyAll(t, s, it.ID, skewedUsers(fmt.Sprintf("lc%d-b", it.ID), it.ID, 4, 8, 8))
		if len(more) != 4 || refused["sold_out"] != 4 {
			t.Errorf("8 buyers for the last 4 units: %d orders, refusals %v; want 4 and 4 sold_out", len(more), refused)
		}
		checkSold(t, s, it.ID, 9)
	})
}
