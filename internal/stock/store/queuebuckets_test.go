package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// queuedOf is one queued order per user, of epoch.
func queuedOf(itemID int64, users []string, epoch int64) []*Queued {
	out := make([]*Queued, len(users))
	for i, u := range users {
		out[i] = newQueued(itemID, u, "")
		out[i].Epoch = epoch
	}
	return out
}

// The four bucket rows of a lua-async item are written by four writers at
// once, nine buyers in ten at home in bucket 0, more buyers than stock:
// exactly the stock is sold, row b's sold is its buyers' live orders, the
// rows still hold the item's stock, and a redelivered batch is found done.
func TestPersistQueuedBucketSellsExactlyTheStock(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, be testenv.Backend) {
		st := newTestStore(t, be, nil)
		ctx := context.Background()
		const k, units = 4, 20
		it := &stock.Item{Name: "hot-async", Stock: units, Strategy: stock.StrategyLuaAsync, Buckets: k}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		per := [k]int{27, 1, 1, 1} // 30 buyers for 20 units, rows of 5 each
		var wg sync.WaitGroup
		var mu sync.Mutex
		written, failed := 0, 0
		batches := make([][]*Queued, 0)
		for b := 0; b < k; b++ {
			users := homeUsers(fmt.Sprintf("q%d-%d", it.ID, b), k, b, per[b])
			for len(users) > 0 {
				n := min(4, len(users))
				batch := queuedOf(it.ID, users[:n], 0)
				users = users[n:]
				batches = append(batches, batch)
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := st.PersistQueuedBucket(ctx, it.ID, b, batch, Now())
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("bucket %d batch: %v", b, err)
						return
					}
					written += len(res.Written)
					failed += len(res.Failed)
					for id, why := range res.Failed {
						if why != "sold_out" {
							t.Errorf("order %s failed for %s, want sold_out", id, why)
						}
					}
				}()
			}
		}
		wg.Wait()
		if written != units || failed != 30-units {
			t.Fatalf("written %d, failed %d; want exactly the stock (%d) written and %d sold out", written, failed, units, 30-units)
		}
		rows, err := st.BucketRows(ctx, it.ID, k)
		if err != nil {
			t.Fatal(err)
		}
		var stockSum, soldSum int64
		for _, r := range rows {
			stockSum += r.Stock
			soldSum += r.Sold
			if r.Sold != r.Live {
				t.Errorf("row %d: sold %d, live orders of its buyers %d", r.Bucket, r.Sold, r.Live)
			}
		}
		if stockSum != units || soldSum != units {
			t.Errorf("rows hold %d units, %d sold; want %d of %d", stockSum, soldSum, units, units)
		}
		got, err := st.Item(ctx, it.ID)
		if err != nil || got.Sold != units || got.Stock != units {
			t.Errorf("item: %+v, %v; want %d of %d sold", got, err, units, units)
		}
		res, err := st.PersistQueuedBucket(ctx, it.ID, 0, batches[0], Now())
		if err != nil || len(res.Already) != len(batches[0]) || len(res.Written)+len(res.Failed) != 0 {
			t.Errorf("redelivered batch: %+v, %v; want every order found done", res, err)
		}
	})
}

// A batch read from a bucket stream Redis lost (its row's queue epoch
// moved on by the rebuild) is refused whole, written or sold out alike;
// the other buckets' batches of the old epoch are written, and bucket
// 2's batches of the new one too.
func TestPersistQueuedBucketFencesOneBucket(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, be testenv.Backend) {
		st := newTestStore(t, be, nil)
		ctx := context.Background()
		const k = 4
		it := &stock.Item{Name: "fenced-async", Stock: 8, Strategy: stock.StrategyLuaAsync, Buckets: k}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		epoch, err := st.MoveBucketQueueEpoch(ctx, it.ID, 2)
		if err != nil || epoch != 1 {
			t.Fatalf("move bucket 2's epoch: %d, %v; want 1", epoch, err)
		}
		lost := queuedOf(it.ID, homeUsers(fmt.Sprintf("lost%d", it.ID), k, 2, 2), 0)
		if _, err := st.PersistQueuedBucket(ctx, it.ID, 2, lost, Now()); !errors.Is(err, ErrQueueLost) {
			t.Fatalf("batch of the lost stream: %v, want ErrQueueLost", err)
		}
		kept := queuedOf(it.ID, homeUsers(fmt.Sprintf("kept%d", it.ID), k, 1, 2), 0)
		if res, err := st.PersistQueuedBucket(ctx, it.ID, 1, kept, Now()); err != nil || len(res.Written) != 2 {
			t.Fatalf("batch of another bucket, old epoch: %+v, %v; want written", res, err)
		}
		fresh := queuedOf(it.ID, homeUsers(fmt.Sprintf("fresh%d", it.ID), k, 2, 6), 1)
		res, err := st.PersistQueuedBucket(ctx, it.ID, 2, fresh, Now())
		if err != nil || len(res.Written) != 6 {
			t.Fatalf("bucket 2's batch of the new epoch: %+v, %v; want 6 written (moving units to row 2)", res, err)
		}
		// Sold out now: a stale batch of bucket 2 that would only record
		// failures is refused too.
		late := queuedOf(it.ID, homeUsers(fmt.Sprintf("late%d", it.ID), k, 2, 1), 0)
		if _, err := st.PersistQueuedBucket(ctx, it.ID, 2, late, Now()); !errors.Is(err, ErrQueueLost) {
			t.Fatalf("stale batch on a sold-out item: %v, want ErrQueueLost", err)
		}
		for _, q := range append(lost, late...) {
			if _, err := st.FailedOrder(ctx, q.ID); !errors.Is(err, stock.ErrNotFound) {
				t.Errorf("order %s of the lost stream recorded: %v", q.ID, err)
			}
			if _, _, err := st.OrderOf(ctx, it.ID, q.UserID); !errors.Is(err, stock.ErrNotFound) {
				t.Errorf("order of %s of the lost stream written: %v", q.UserID, err)
			}
		}
		got, err := st.Item(ctx, it.ID)
		if err != nil || got.Sold != 8 {
			t.Errorf("item: %+v, %v; want 8 sold", got, err)
		}
	})
}
