package shop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
		if err := st.CreateItem(ctx, it, nil); err != nil {
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
		if err := st.InsertOrder(ctx, store.OrderWrite{Order: &stock.Order{ID: "00000000-0000-7000-8000-00000000000b", ItemID: it.ID, UserID: "b"}}, bl.Fence()); err != nil {
			t.Fatalf("B's write: %v", err)
		}
		err = st.InsertOrder(ctx, store.OrderWrite{Order: &stock.Order{ID: "00000000-0000-7000-8000-00000000000a", ItemID: it.ID, UserID: "a"}}, a.Fence())
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

// lagFenceCounter simulates a failover to a replica that missed the last
// INCRs of the item's fence counter: the database has accepted fences up
// to dbFence (written by holders whose INCRs the replica never saw), the
// counter exists at counter, below it, and the lock hash is gone.
func lagFenceCounter(t *testing.T, s *Service, rdb *redis.Client, itemID, dbFence, counter int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := rawSQL(t, s.store).Exec("UPDATE items SET lock_fence = ? WHERE id = ?", dbFence, itemID); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, s.keys.Lock(itemID)+":fence", counter, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, s.keys.Lock(itemID)).Err(); err != nil {
		t.Fatal(err)
	}
}

// A fence counter that survived a failover but lags the database (issue
// 20, defect 3): the first holder's fence is refused as stale; the writer
// raises the counter to the database's fence, takes the lock again and
// writes, so no order hears 503. Fences from before the raise stay
// refused, and a refusal says nothing was written.
func TestLockFenceCounterLaggingDatabase(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		rdb := b.Redis(t)
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "fenced", Stock: 20, Strategy: stock.StrategyLock})
		if err != nil {
			t.Fatal(err)
		}
		lockKey := s.keys.Lock(it.ID)
		order := func(user string) error {
			_, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: user})
			return err
		}
		for n := range 3 {
			if err := order(fmt.Sprintf("pre%d", n)); err != nil {
				t.Fatalf("order %d before the failover: %v", n, err)
			}
			waitUnlocked(t, rdb, lockKey)
		}
		lagFenceCounter(t, s, rdb, it.ID, 50, 4)

		// One at a time, each after the previous lock is released, so
		// every order takes a new lock (and fence).
		for n := range 10 {
			if err := order(fmt.Sprintf("post%d", n)); err != nil {
				t.Fatalf("order %d after the failover (database fence 50, counter 4): %v", n, err)
			}
			waitUnlocked(t, rdb, lockKey)
		}
		dbFence := lockFenceOf(t, s.store, it.ID)
		if dbFence <= 50 {
			t.Errorf("database fence %d after the failover, want above 50", dbFence)
		}
		if counter, err := rdb.Get(ctx, lockKey+":fence").Int64(); err != nil || counter < dbFence {
			t.Errorf("fence counter %d (%v), want at least the database's %d", counter, err, dbFence)
		}
		if got, err := s.store.Item(ctx, it.ID); err != nil || got.Sold != 13 {
			t.Errorf("sold: got %v (%v), want 13", got, err)
		}

		// Holders from before the raise: one the old master granted 50,
		// one the lagging counter granted 5. Both stay refused, and the
		// refusal is a plain 503, not "may have committed".
		for i, fence := range []int64{50, 5} {
			o := &stock.Order{ID: fmt.Sprintf("00000000-0000-7000-8000-0000000000%02d", i), ItemID: it.ID, UserID: fmt.Sprintf("old%d", i)}
			err := s.store.InsertOrder(ctx, store.OrderWrite{Order: o}, fence)
			if !errors.Is(err, store.ErrFenceStale) || !errors.Is(err, stock.ErrUnavailable) || errors.Is(err, store.ErrMaybeCommitted) {
				t.Errorf("write with fence %d after the raise: got %v, want ErrFenceStale and ErrUnavailable, not ErrMaybeCommitted", fence, err)
			}
			if _, _, err := s.store.OrderOf(ctx, it.ID, o.UserID); !errors.Is(err, stock.ErrNotFound) {
				t.Errorf("order with fence %d: got %v, want not found", fence, err)
			}
		}
	})
}

// Two instances find the lagging counter at once and race the raise, each
// with many orders queued: every order is written or sold out, none is
// refused as stale, and the item sells exactly its stock.
func TestLockFenceLaggingCounterTwoInstances(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		a := newTestServiceOn(t, b, st, Config{}, nil)
		bs := newTestServiceOn(t, b, st, Config{}, nil)
		rdb := b.Redis(t)
		it, err := a.CreateItem(ctx, stock.NewItem{Name: "fenced", Stock: 30, Strategy: stock.StrategyLock})
		if err != nil {
			t.Fatal(err)
		}
		lagFenceCounter(t, a, rdb, it.ID, 100, 1)

		const buyers = 40
		errs := make([]error, buyers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range buyers {
			s := a
			if i%2 == 1 {
				s = bs
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _, errs[i] = s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: fmt.Sprintf("u%02d", i)})
			}()
		}
		close(start)
		wg.Wait()
		sold, soldOut := 0, 0
		for i, err := range errs {
			switch {
			case err == nil:
				sold++
			case errors.Is(err, stock.ErrSoldOut):
				soldOut++
			default:
				t.Errorf("buyer %d: %v", i, err)
			}
		}
		got, err := st.Item(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if sold != 30 || soldOut != buyers-30 || got.Sold != 30 {
			t.Errorf("got %d sold, %d sold out, database sold %d; want 30, %d, 30", sold, soldOut, got.Sold, buyers-30)
		}
		if f := lockFenceOf(t, st, it.ID); f <= 100 {
			t.Errorf("database fence %d, want above 100", f)
		}
	})
}

// staleGuard is a writeGuard whose fence stays below the database's
// however often it is raised: another holder keeps writing in between.
type staleGuard struct {
	fence  int64
	raises atomic.Int32
}

func (g *staleGuard) hold(context.Context, writeKey) (int64, error) { return g.fence, nil }
func (g *staleGuard) raiseFence(context.Context, writeKey) (int64, error) {
	g.raises.Add(1)
	return g.fence, nil
}
func (g *staleGuard) done(writeKey, bool) {}

// A fence that stays stale after the raises: the writer gives up after
// maxFenceRaises, and the answer is a plain 503 that says nothing was
// written, never "may have committed" (which would make the lua strategy
// keep a reservation and a client fear a double order).
func TestStaleFenceRefusalIsNotMaybeCommitted(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		it := &stock.Item{Name: "fenced", Stock: 10, Strategy: stock.StrategyLock}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := rawSQL(t, st).Exec("UPDATE items SET lock_fence = 9 WHERE id = ?", it.ID); err != nil {
			t.Fatal(err)
		}
		guard := &staleGuard{fence: 3}
		w := newOrderWriter(st, guard)
		defer w.close()

		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, store.ErrFenceStale) || !errors.Is(err, stock.ErrUnavailable) || errors.Is(err, store.ErrMaybeCommitted) {
				t.Errorf("%s: got %v, want ErrFenceStale and ErrUnavailable, not ErrMaybeCommitted", what, err)
			}
		}
		check("one order", w.write(ctx, &stock.Order{ID: "01a2ffff-0000-7000-8000-000000000001", ItemID: it.ID, UserID: "alice"}, "", false, 1, nil))
		if n := guard.raises.Load(); n != maxFenceRaises {
			t.Errorf("raises for one order: got %d, want %d", n, maxFenceRaises)
		}

		// A batch (the store's batch refusal names the stale fence too).
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := &stock.Order{ID: fmt.Sprintf("01a2ffff-0000-7000-8000-0000000001%02d", i), ItemID: it.ID, UserID: fmt.Sprintf("u%d", i)}
				check(fmt.Sprintf("batch order %d", i), w.write(ctx, o, "", false, 1, nil))
			}()
		}
		wg.Wait()
		got, err := st.Item(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Sold != 0 {
			t.Errorf("sold: got %d, want 0 (every write refused)", got.Sold)
		}
		err = st.InsertBatch(ctx, []store.OrderWrite{
			{Order: &stock.Order{ID: "01a2ffff-0000-7000-8000-000000000201", ItemID: it.ID, UserID: "x"}},
			{Order: &stock.Order{ID: "01a2ffff-0000-7000-8000-000000000202", ItemID: it.ID, UserID: "y"}},
		}, store.Now(), 3, nil)
		if !errors.Is(err, store.ErrFenceStale) || errors.Is(err, store.ErrBatchRefused) {
			t.Errorf("InsertBatch with a stale fence: got %v, want ErrFenceStale, not ErrBatchRefused", err)
		}
	})
}
