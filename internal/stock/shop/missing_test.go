package shop

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// countingStore is a store whose reads of the items table are counted
// (gorm's query and row callbacks: Take, Find, Scan).
func countingStore(t *testing.T, b testenv.Backend) (*store.Store, *atomic.Int64) {
	t.Helper()
	db := b.DB(t)
	var reads atomic.Int64
	count := func(tx *gorm.DB) {
		if tx.Statement.Table == "items" {
			reads.Add(1)
		}
	}
	if err := db.Callback().Query().After("gorm:query").Register("test:count_items", count); err != nil {
		t.Fatal(err)
	}
	if err := db.Callback().Row().After("gorm:row").Register("test:count_items_row", count); err != nil {
		t.Fatal(err)
	}
	st, err := store.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	testDBs.Store(st, sqlDB) // for rawSQL
	t.Cleanup(func() { testDBs.Delete(st) })
	return st, &reads
}

// An unknown item id on the public paths (GET /items/{id}, its orders):
// anyone can ask for any id, so neither the same id again nor a scan of
// distinct ids may cost a database read each (issue 20). An item created
// here is known at once, even an id just answered unknown.
func TestUnknownItemsCostNoReadEach(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st, reads := countingStore(t, b)
		s := newTestServiceOn(t, b, st, Config{}, nil)
		clock := &fakeClock{t: time.Now()}
		s.missing.clock = clock.now
		first, err := s.CreateItem(ctx, stock.NewItem{Name: "real", Stock: 5, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}
		next := first.ID + 1 // the id the next item will get

		reads.Store(0)
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := next + int64(i%100) // 100 distinct unknown ids, each asked twice
				if _, err := s.ItemView(ctx, id); !errors.Is(err, stock.ErrNotFound) {
					t.Errorf("view of unknown item %d: got %v, want not found", id, err)
				}
				if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: id, UserID: "mallory"}); !errors.Is(err, stock.ErrNotFound) {
					t.Errorf("order of unknown item %d: got %v, want not found", id, err)
				}
			}()
		}
		wg.Wait()
		if n := reads.Load(); n > 1 {
			t.Errorf("items-table reads for 400 requests of 100 unknown ids: got %d, want at most 1 (the highest id)", n)
		}

		created, err := s.CreateItem(ctx, stock.NewItem{Name: "new", Stock: 5, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}
		if created.ID != next {
			t.Logf("the new item got id %d (not %d): an auto-increment gap", created.ID, next)
		}
		if v, err := s.ItemView(ctx, created.ID); err != nil || v.ID != created.ID {
			t.Errorf("view of the item just created here: got %+v, %v; want it at once", v, err)
		}
		if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: created.ID, UserID: "alice"}); err != nil {
			t.Errorf("order of the item just created here: %v", err)
		}

		// The cache window passes: an unknown id is read again, once.
		clock.mu.Lock()
		clock.t = clock.t.Add(DefaultMissingItemTTL)
		clock.mu.Unlock()
		reads.Store(0)
		for range 20 {
			if _, err := s.ItemView(ctx, created.ID+500); !errors.Is(err, stock.ErrNotFound) {
				t.Fatalf("view of an unknown item: got %v, want not found", err)
			}
		}
		if n := reads.Load(); n != 1 {
			t.Errorf("items-table reads for 20 views of one unknown id after the window: got %d, want 1", n)
		}
	})
}

// An id under the highest one that has no item (a gap the auto-increment
// left) is read once a window, not once a request.
func TestUnknownItemUnderTheCeilingReadOnceAWindow(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st, reads := countingStore(t, b)
		s := newTestServiceOn(t, b, st, Config{}, nil)
		clock := &fakeClock{t: time.Now()}
		s.missing.clock = clock.now
		var ids []int64
		for range 3 {
			it := &stock.Item{Name: "row", Stock: 1, Strategy: stock.StrategyLock}
			if err := st.CreateItem(ctx, it, nil); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, it.ID)
		}
		gap := ids[1]
		if _, err := rawSQL(t, st).Exec("DELETE FROM items WHERE id = ?", gap); err != nil {
			t.Fatal(err)
		}
		reads.Store(0)
		for range 50 {
			if _, err := s.ItemView(ctx, gap); !errors.Is(err, stock.ErrNotFound) {
				t.Fatalf("view of the gap: got %v, want not found", err)
			}
		}
		if n := reads.Load(); n != 2 {
			t.Errorf("items-table reads for 50 views of a gap: got %d, want 2 (the highest id, then the id)", n)
		}
		clock.mu.Lock()
		clock.t = clock.t.Add(DefaultMissingItemTTL)
		clock.mu.Unlock()
		reads.Store(0)
		for range 50 {
			if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: gap, UserID: "u"}); !errors.Is(err, stock.ErrNotFound) {
				t.Fatalf("order of the gap: got %v, want not found", err)
			}
		}
		if n := reads.Load(); n != 1 {
			t.Errorf("items-table reads for 50 orders of a gap after the window: got %d, want 1", n)
		}
	})
}

// Two instances: an item created on A is unknown on B (which just read the
// highest id) for at most the window, then known.
func TestItemCreatedElsewhereKnownWithinTheWindow(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		a := newTestServiceOn(t, b, st, Config{}, nil)
		bs := newTestServiceOn(t, b, st, Config{}, nil)
		clock := &fakeClock{t: time.Now()}
		bs.missing.clock = clock.now
		first, err := a.CreateItem(ctx, stock.NewItem{Name: "first", Stock: 1, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bs.ItemView(ctx, first.ID+1); !errors.Is(err, stock.ErrNotFound) {
			t.Fatalf("B, unknown id: got %v, want not found", err)
		}
		it, err := a.CreateItem(ctx, stock.NewItem{Name: "second", Stock: 1, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}
		clock.mu.Lock()
		clock.t = clock.t.Add(DefaultMissingItemTTL - time.Millisecond)
		clock.mu.Unlock()
		if _, err := bs.ItemView(ctx, it.ID); !errors.Is(err, stock.ErrNotFound) {
			t.Errorf("B within the window of its read: got %v, want not found (the documented lag)", err)
		}
		clock.mu.Lock()
		clock.t = clock.t.Add(time.Millisecond)
		clock.mu.Unlock()
		if v, err := bs.ItemView(ctx, it.ID); err != nil || v.ID != it.ID {
			t.Errorf("B once the window passed: got %+v, %v; want the item", v, err)
		}
		if _, _, err := bs.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "bob"}); err != nil {
			t.Errorf("B's order once the window passed: %v", err)
		}
	})
}

// Off (a negative MissingItemTTL): every unknown id is read.
func TestUnknownItemCacheOff(t *testing.T) {
	b := testenv.Embedded(t)
	st, reads := countingStore(t, b)
	s := newTestServiceOn(t, b, st, Config{MissingItemTTL: -1}, nil)
	for range 5 {
		if _, err := s.ItemView(context.Background(), 12345); !errors.Is(err, stock.ErrNotFound) {
			t.Fatalf("got %v, want not found", err)
		}
	}
	if n := reads.Load(); n != 5 {
		t.Errorf("items-table reads with the cache off: got %d, want 5", n)
	}
}
