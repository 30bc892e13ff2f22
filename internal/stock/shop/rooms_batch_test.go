package shop

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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

// lua: orders without a pass of a roomed item (sent on by instances that
// do not know the room yet) reserve a unit each, are refused by the
// database and hand it back, while Redis keeps losing the item's gate and
// orders rebuild it. Once all have answered, nothing is lost or kept: the
// gate's taken units are the database's sold, its buyers the database's,
// and every refusal was pass_required (or a 503 while the gate vanished
// under it, or sold out while others' reservations were in flight), never
// an order.
func TestPassRequiredHandBacksRaceRebuilds(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	ctx := context.Background()
	st := newTestStore(t, b, nil)
	s := newTestServiceOn(t, b, st, Config{}, nil)
	rdb := b.Redis(t)
	it, err := s.CreateItem(ctx, stock.NewItem{Name: "roomed lua", Stock: 40, Strategy: stock.StrategyLua})
	if err != nil {
		t.Fatal(err)
	}
	buy := func(user string, pass bool) error {
		_, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: user, Pass: pass})
		return err
	}
	for _, u := range users("early", 5) {
		if err := buy(u, false); err != nil {
			t.Fatal(err)
		}
	}
	addRoom(t, st, it.ID)
	var wg sync.WaitGroup
	var done atomic.Int64
	for _, u := range users("nopass", 120) {
		wg.Go(func() {
			defer done.Add(1)
			err := buy(u, false)
			// Sold out: the gate saw every unit reserved by others in flight.
			if !errors.Is(err, stock.ErrPassRequired) && !errors.Is(err, stock.ErrUnavailable) && !errors.Is(err, stock.ErrSoldOut) {
				t.Errorf("order of %s without a pass: got %v, want pass_required", u, err)
			}
		})
	}
	wg.Go(func() {
		// Lose the gate again each time another tenth of the orders answered.
		for i := int64(1); i <= 10; i++ {
			for done.Load() < i*12 {
				runtime.Gosched()
			}
			if err := rdb.Del(ctx, s.keys.Meta(it.ID)).Err(); err != nil {
				t.Error(err)
			}
		}
	})
	for _, u := range users("passer", 5) {
		wg.Go(func() {
			if err := buy(u, true); err != nil && !errors.Is(err, stock.ErrUnavailable) && !errors.Is(err, stock.ErrSoldOut) {
				t.Errorf("order of %s with a pass: %v", u, err)
			}
		})
	}
	wg.Wait()
	s.lua.retries.Wait()
	// Every hand-back has run. A "sold out" the gate gave while the units
	// were reserved by refused orders must not outlive their hand-backs,
	// also those that found the gate lost (the rebuild counts their units
	// free): the memo has forgotten it, and an order with a pass buys (it
	// rebuilds a lost gate).
	if s.soldOut.SoldOut(it.ID) {
		t.Errorf("the item reads sold out after every hand-back, with most of its stock left; ledger %+v", readLedger(t, s, rdb, it.ID))
	}
	if err := buy("last", true); err != nil {
		t.Fatalf("order with a pass after the refusals: %v; memo sold out %v, ledger %+v", err, s.soldOut.SoldOut(it.ID), readLedger(t, s, rdb, it.ID))
	}
	s.lua.retries.Wait()
	l := readLedger(t, s, rdb, it.ID)
	if l.taken != l.sold {
		t.Errorf("gate has %d units taken, the database sold %d: reservations of refused orders kept", l.taken, l.sold)
	}
	var rows int64
	if err := rawSQL(t, st).QueryRow("SELECT COUNT(*) FROM orders WHERE item_id = ? AND user_id LIKE 'nopass%'", it.ID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d orders without a pass written", rows)
	}
	held, err := rdb.HKeys(ctx, s.keys.Buyers(it.ID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range held {
		if strings.HasPrefix(u, "nopass") {
			t.Errorf("the gate still holds %s's reservation", u)
		}
	}
}
