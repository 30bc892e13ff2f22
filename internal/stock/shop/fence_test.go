package shop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// A holder paused past its TTL: A gets fence t and stalls, B obtains t+1 and
// writes; A's late write is refused by the item's fence, and A's release
// leaves B's lock alone.
func TestLockStrategyFenceRefusesStaleHolder(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		rdb := b.Redis(t)
		locker := lock.New(rdb, nil)
		t.Cleanup(func() { _ = locker.Close() })
		it := &stock.Item{Name: "fenced", Stock: 10, Strategy: stock.StrategyLock}
		if err := st.CreateItem(ctx, it); err != nil {
			t.Fatal(err)
		}
		key := b.KeyPrefix + ":{item:1}:lock"

		a, err := locker.Obtain(ctx, key, 50*time.Millisecond, nil)
		if err != nil {
			t.Fatalf("A obtain: %v", err)
		}
		time.Sleep(120 * time.Millisecond) // A "pauses" past its TTL
		bl, err := locker.Obtain(ctx, key, 5*time.Second, nil)
		if err != nil {
			t.Fatalf("B obtain: %v", err)
		}
		if bl.Fence() != a.Fence()+1 {
			t.Fatalf("fences: A %d, B %d; want B = A+1", a.Fence(), bl.Fence())
		}
		if err := st.InsertOrder(ctx, &stock.Order{ID: "00000000-0000-7000-8000-00000000000b", ItemID: it.ID, UserID: "b"}, "", bl.Fence()); err != nil {
			t.Fatalf("B's write: %v", err)
		}
		err = st.InsertOrder(ctx, &stock.Order{ID: "00000000-0000-7000-8000-00000000000a", ItemID: it.ID, UserID: "a"}, "", a.Fence())
		if !errors.Is(err, store.ErrFenceStale) || !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("A's late write: got %v, want store.ErrFenceStale and ErrUnavailable", err)
		}
		got, err := st.Item(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Sold != 1 {
			t.Errorf("sold: got %d, want 1 (only B's write)", got.Sold)
		}
		if _, _, err := st.OrderOf(ctx, it.ID, "a"); !errors.Is(err, stock.ErrNotFound) {
			t.Errorf("A's order: got %v, want not found (rolled back)", err)
		}
		if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("A's release: got %v, want ErrNotHeld", err)
		}
		if held, err := bl.Held(ctx); err != nil || !held {
			t.Errorf("B still holds after A's release: got %v, %v; want true", held, err)
		}
		if ttl, err := bl.TTL(ctx); err != nil || ttl <= time.Second {
			t.Errorf("B's TTL after A's release: got %v, %v; want it untouched (> 1s)", ttl, err)
		}
	})
}

// Redis loses every key of a lock item, its fence counter included (a
// restart without persistence, FLUSHALL, eviction): the database still holds
// the highest fence written. The next lock must get a fence above it, so the
// sale goes on at once instead of refusing orders as stale until the
// counter climbs past it again.
func TestLockFenceSurvivesRedisDataLoss(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		rdb := b.Redis(t)
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "fenced", Stock: 20, Strategy: stock.StrategyLock})
		if err != nil {
			t.Fatal(err)
		}
		order := func(n int) error {
			_, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: fmt.Sprintf("u%02d", n)})
			return err
		}
		// One at a time, each after the previous lock is released: the
		// item's writer keeps its lock (and fence) for an order that comes
		// while it still holds it, so without the wait the fence could stay
		// at 1 on a fast machine. Each order then takes a new fence, and
		// the database's fence climbs to 5.
		lockKey := fmt.Sprintf("%s:{item:%d}:lock", b.KeyPrefix, it.ID)
		for n := range 5 {
			if err := order(n); err != nil {
				t.Fatalf("order %d before the loss: %v", n, err)
			}
			waitUnlocked(t, rdb, lockKey)
		}
		before := lockFenceOf(t, s.store, it.ID)
		if before < 2 {
			t.Fatalf("database fence %d after 5 locked orders, want >= 2", before)
		}
		testenv.DeleteKeys(t, rdb, fmt.Sprintf("%s:{item:%d}*", b.KeyPrefix, it.ID))
		if n := rdb.Exists(ctx, fmt.Sprintf("%s:{item:%d}:lock:fence", b.KeyPrefix, it.ID)).Val(); n != 0 {
			t.Fatal("the fence counter survived the deletion")
		}
		for n := 5; n < 20; n++ {
			if err := order(n); err != nil {
				t.Fatalf("order %d after the loss (database fence was %d): %v", n, before, err)
			}
		}
		if after := lockFenceOf(t, s.store, it.ID); after <= before {
			t.Errorf("database fence %d after the loss, want above %d", after, before)
		}
		if err := order(99); !errors.Is(err, stock.ErrSoldOut) {
			t.Errorf("order past the stock: got %v, want ErrSoldOut", err)
		}
	})
}

func lockFenceOf(t *testing.T, st *store.Store, itemID int64) int64 {
	t.Helper()
	var fence int64
	if err := rawSQL(t, st).QueryRow("SELECT lock_fence FROM items WHERE id = ?", itemID).Scan(&fence); err != nil {
		t.Fatal(err)
	}
	return fence
}

// waitUnlocked waits until the lock key is gone (released), at most 5 s.
func waitUnlocked(t *testing.T, rdb *redis.Client, key string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(context.Background(), key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("lock %s still held after 5s", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
