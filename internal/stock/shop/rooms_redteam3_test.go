package shop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// One user's two orders in one group-commit batch of a roomed item (the
// lock strategy has no gate to keep the second out), the first without a
// pass and the second with one: the one with the pass is written (the
// user is admitted and there is stock) and the one without is refused,
// not both refused as pass_required. Either order of arrival.
func TestBatchSameUserWithAndWithoutPass(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, passFirst := range []bool{false, true} {
			ctx := context.Background()
			st := newTestStore(t, b, nil)
			it := &stock.Item{Name: "roomed", Stock: 10, Strategy: stock.StrategyLock}
			if err := st.CreateItem(ctx, it, nil); err != nil {
				t.Fatal(err)
			}
			addRoom(t, st, it.ID)
			w := newOrderWriter(st, nil)
			defer w.close()
			mk := func(pass bool) *commitRequest {
				return &commitRequest{o: &stock.Order{ID: uuid.NewString(), ItemID: it.ID, UserID: "ann"},
					pass: pass, deadline: time.Now().Add(10 * time.Second), done: make(chan error, 1)}
			}
			batch := []*commitRequest{mk(passFirst), mk(!passFirst)}
			results := make([]error, len(batch))
			w.writeBatch(ctx, it.ID, batch, allIndexes(len(batch)), results, 7)
			for i, p := range batch {
				switch {
				case p.pass && results[i] != nil:
					t.Errorf("pass first %v: ann's order with a pass: got %v, want written", passFirst, results[i])
				case !p.pass && results[i] == nil:
					t.Errorf("pass first %v: ann's order without a pass was written", passFirst)
				}
			}
			var rows int64
			if err := rawSQL(t, st).QueryRow("SELECT COUNT(*) FROM orders WHERE item_id = ? AND user_id = 'ann'", it.ID).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			got, err := st.Item(ctx, it.ID)
			if err != nil {
				t.Fatal(err)
			}
			if rows != 1 || got.Sold != 1 {
				t.Errorf("pass first %v: ann has %d order rows, sold %d; want 1 and 1", passFirst, rows, got.Sold)
			}
			for i, p := range batch {
				if !p.pass && results[i] != nil && !errors.Is(results[i], stock.ErrAlreadyPurchased) && !errors.Is(results[i], stock.ErrPassRequired) {
					t.Errorf("pass first %v: ann's order without a pass: got %v, want already_purchased or pass_required", passFirst, results[i])
				}
			}
		}
	})
}
