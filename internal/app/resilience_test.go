package app_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// stampede sends one order per user from workers goroutines and returns how
// many were answered 201. during runs in its own goroutine once a third of
// the users have gone; users past the half wait until it has finished, so
// some attempts race it and enough come after it.
func stampede(t *testing.T, c *apptest.Client, itemID int64, users, workers int, during func()) int64 {
	t.Helper()
	var next, created atomic.Int64
	var once sync.Once
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(users) {
					return
				}
				if n == int64(users/3) {
					once.Do(func() { go func() { defer close(done); during() }() })
				}
				if n > int64(users/2) {
					<-done
				}
				r, err := c.PlaceOrder(itemID, stampedeUser(n), "")
				switch {
				case err != nil:
					t.Errorf("order: %v", err)
				case r.Status == 201:
					created.Add(1)
				case r.Status == 409:
				default:
					t.Errorf("order by %s: got %d %s", stampedeUser(n), r.Status, r.Body)
				}
			}
		}()
	}
	wg.Wait()
	return created.Load()
}

func checkSold(t *testing.T, b testenv.Backend, c *apptest.Client, itemID, want int64, created int64) {
	t.Helper()
	var orders, users int64
	db := b.DB(t)
	if err := db.Raw("SELECT COUNT(*), COUNT(DISTINCT user_id) FROM orders WHERE item_id = ?", itemID).Row().Scan(&orders, &users); err != nil {
		t.Fatal(err)
	}
	got := c.AdminItem(t, itemID)
	if orders != want || users != want || got.Sold != want || created != want || got.Remaining != got.Stock-want {
		t.Errorf("got %d orders from %d users, sold %d, %d answered 201, remaining %d of %d; want %d everywhere and remaining = stock - sold",
			orders, users, got.Sold, created, got.Remaining, got.Stock, want)
	}
}

// Redis loses every key of the item in the middle of a sale (a restart
// without persistence, a FLUSHALL), the lock's fence counter included: the
// gate is rebuilt from the database, the fence counter is seeded above the
// database's fence, and the item still sells exactly its stock. On a
// Redis Cluster the loss is every key of the item on every master (this
// test's keys only: the cluster is shared), deleted with one DEL, which
// the item's one slot allows.
func TestRedisDataLossMidSale(t *testing.T) {
	t.Parallel()
	testenv.ForEachWithCluster(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		rdb := b.Universal(t)
		for _, strategy := range []string{"lua", "lock"} {
			t.Run(strategy, func(t *testing.T) {
				// The keys vanish after 100 attempts, with about half sold.
				it := c.CreateItem(t, 200, strategy)
				lose := func() {
					ctx := context.Background()
					keys, err := testenv.KeysOf(ctx, rdb, fmt.Sprintf("%s:{item:%d}*", b.KeyPrefix, it.ID))
					if err != nil {
						t.Errorf("list the item's keys: %v", err)
						return
					}
					if len(keys) == 0 {
						t.Errorf("no keys of item %d to lose", it.ID)
						return
					}
					if err := rdb.Del(ctx, keys...).Err(); err != nil {
						t.Errorf("delete the item's keys: %v", err)
					}
					fence := fmt.Sprintf("%s:{item:%d}:lock:fence", b.KeyPrefix, it.ID)
					if strategy == "lock" && !slices.Contains(keys, fence) {
						t.Errorf("the fence counter %s was not among the keys lost: %v", fence, keys)
					}
				}
				created := stampede(t, c, it.ID, 300, 32, lose)
				checkSold(t, b, c, it.ID, 200, created)
			})
		}
	})
}

// Stock raised while orders flow: the sale reopens and sells exactly the new
// stock; Redis and the database agree afterwards.
func TestStockRaisedDuringSale(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b)
		for _, strategy := range []string{"lua", "lock"} {
			t.Run(strategy, func(t *testing.T) {
				it := c.CreateItem(t, 40, strategy)
				raise := func() {
					r := c.Must(t, "PUT", fmt.Sprintf("/api/v1/admin/items/%d/stock", it.ID), map[string]int{"stock": 90}, true, nil)
					if r.Status != 200 {
						t.Errorf("raise stock: got %d %s", r.Status, r.Body)
					}
				}
				// The raise starts after 100 attempts, when the first 40 are
				// gone, and races the next 50: the sale must reopen.
				created := stampede(t, c, it.ID, 300, 32, raise)
				checkSold(t, b, c, it.ID, 90, created)
			})
		}
	})
}
