package shop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// Concurrent writes share transactions, yet each caller gets its own exact
// answer: a batch holding a duplicate buyer, or more orders than stock, is
// refused whole and written order by order.
func TestOrderWriterBatchesAndFallsBack(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		it := &stock.Item{Name: "batched", Stock: 5, Strategy: stock.StrategyLua}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		if err := st.InsertOrder(ctx, store.OrderWrite{Order: &stock.Order{ID: uuid.NewString(), ItemID: it.ID, UserID: "early"}}, 0); err != nil {
			t.Fatal(err)
		}
		w := newOrderWriter(st, nil)
		defer w.close()

		users := []string{"early"}
		for i := 0; i < 12; i++ {
			users = append(users, fmt.Sprintf("u%02d", i))
		}
		errs := make([]error, len(users))
		var wg sync.WaitGroup
		for i, u := range users {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = w.write(ctx, &stock.Order{ID: uuid.NewString(), ItemID: it.ID, UserID: u}, "", false, 1, nil)
			}()
		}
		wg.Wait()

		created := 0
		for i, err := range errs {
			switch {
			case err == nil:
				created++
			case users[i] == "early" && errors.Is(err, stock.ErrAlreadyPurchased):
			case users[i] != "early" && errors.Is(err, stock.ErrSoldOut):
			default:
				t.Errorf("write for %s: got %v", users[i], err)
			}
		}
		if !errors.Is(errs[0], stock.ErrAlreadyPurchased) {
			t.Errorf("duplicate buyer: got %v, want ErrAlreadyPurchased", errs[0])
		}
		if created != 4 {
			t.Errorf("orders written: got %d, want 4 (stock 5, one sold before)", created)
		}
		got, err := st.Item(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		var rows int64
		if err := rawSQL(t, st).QueryRow("SELECT COUNT(*) FROM orders WHERE item_id = ?", it.ID).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if got.Sold != 5 || rows != 5 {
			t.Errorf("after the writes: sold %d, %d order rows; want 5 and 5", got.Sold, rows)
		}
		if err := w.write(ctx, &stock.Order{ID: uuid.NewString(), ItemID: it.ID, UserID: "late"}, "", false, 1, nil); !errors.Is(err, stock.ErrSoldOut) {
			t.Errorf("write after sell-out: got %v, want ErrSoldOut", err)
		}
	})
}

// A batch refused because one user appears twice must not turn away an
// order while units are left: the stock goes to the distinct users, in
// arrival order, and the repeat gets what the user's first order got.
func TestRefusedBatchSellsEveryUnitLeft(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		st := newTestStore(t, b, nil)
		it := &stock.Item{Name: "clash", Stock: 3, Strategy: stock.StrategyLock}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		w := newOrderWriter(st, nil)
		defer w.close()
		users := []string{"a", "a", "b", "c", "d"}
		batch := make([]*commitRequest, len(users))
		for i, u := range users {
			batch[i] = &commitRequest{o: &stock.Order{ID: uuid.NewString(), ItemID: it.ID, UserID: u}, done: make(chan error, 1)}
		}
		w.commit(writeKey{item: it.ID, buckets: 1}, batch)
		want := []error{nil, stock.ErrAlreadyPurchased, nil, nil, stock.ErrSoldOut}
		for i, p := range batch {
			if got := <-p.done; !errors.Is(got, want[i]) || (want[i] == nil && got != nil) {
				t.Errorf("order %d by %s: got %v, want %v", i, users[i], got, want[i])
			}
		}
		if got, _ := st.Item(ctx, it.ID); got.Sold != 3 {
			t.Errorf("sold: got %d, want 3", got.Sold)
		}
	})
}
