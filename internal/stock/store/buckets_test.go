package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// homeUsers returns n user ids whose home bucket (of k) is b.
func homeUsers(prefix string, k, b, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		u := fmt.Sprintf("%s-%d", prefix, i)
		if stock.HomeBucketOf(u, k) == b {
			out = append(out, u)
		}
	}
	return out
}

// order writes user's order of the item (of k buckets) alone.
func order(st *Store, itemID int64, user string, k int) error {
	o := &stock.Order{ID: fmt.Sprintf("%036s", fmt.Sprintf("%d-%s", itemID, user)), ItemID: itemID, UserID: user}
	return st.InsertOrder(context.Background(), OrderWrite{Order: o, Buckets: k}, 0)
}

// The connection of a move between bucket rows dies between the donors'
// UPDATEs and the recipient's (MariaDB: KILL from another session; SQLite:
// the context ends, as a process dying would leave it): nothing moved,
// nothing lost, no order written, and every unit still sells after.
func TestMoveKilledBetweenUpdates(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		st := newTestStore(t, b, nil)
		ctx := context.Background()
		it := &stock.Item{Name: "hot", Stock: 8, Strategy: stock.StrategyLua, Buckets: 4}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		hot := homeUsers(fmt.Sprint("kill", it.ID), 4, 0, 10)
		for _, u := range hot[:2] {
			if err := order(st, it.ID, u, 4); err != nil {
				t.Fatal(err)
			}
		}
		killed := 0
		octx, cancel := context.WithCancel(ctx)
		defer cancel()
		st.moveHook = func(ctx context.Context, tx *sql.Tx) {
			killed++
			if b.MySQLDSN == "" {
				cancel()
				return
			}
			var id int64
			if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Error(err)
				return
			}
			if _, err := st.sql.ExecContext(context.Background(), fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
				t.Error(err)
			}
		}
		o := &stock.Order{ID: fmt.Sprintf("%036s", "killed"), ItemID: it.ID, UserID: hot[2]}
		err := st.InsertOrder(octx, OrderWrite{Order: o, Buckets: 4}, 0)
		if killed != 1 || !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("order whose move was killed: %v (move hook ran %d times); want ErrUnavailable after one", err, killed)
		}
		st.moveHook = nil
		rows, err := st.BucketRows(ctx, it.ID, 4)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if r.Stock != 2 || r.Sold != r.Live || r.Sold != int64(2*(1-min(i, 1))) {
				t.Errorf("rows after the killed move: %+v; want 2 units each, 2 sold in row 0, nothing moved", rows)
				break
			}
		}
		if _, _, err := st.OrderOf(ctx, it.ID, hot[2]); !errors.Is(err, stock.ErrNotFound) {
			t.Errorf("the killed order: %v, want none written", err)
		}
		for _, u := range hot[2:8] {
			if err := order(st, it.ID, u, 4); err != nil {
				t.Errorf("order of %s with units left: %v", u, err)
			}
		}
		if err := order(st, it.ID, hot[8], 4); !errors.Is(err, stock.ErrSoldOut) {
			t.Errorf("order past the stock: got %v, want ErrSoldOut", err)
		}
		got, err := st.Item(ctx, it.ID)
		if err != nil || got.Sold != 8 || got.Stock != 8 {
			t.Errorf("item after the sale: %+v, %v; want 8 of 8 sold", got, err)
		}
		rows, err = st.BucketRows(ctx, it.ID, 4)
		if err != nil || rows[0].Stock != 8 || rows[0].Sold != 8 || rows[0].Live != 8 {
			t.Errorf("rows after the sale: %+v, %v; want every unit moved to row 0 and sold", rows, err)
		}
	})
}

// A batch of one bucket whose row is short moves units and is written
// whole; a batch larger than the item's free units is refused whole
// (ErrBatchRefused: the shop writes what fits), and a batch of a bucketed
// item never touches the items row.
func TestBucketBatchMovesOrRefuses(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		st := newTestStore(t, b, nil)
		ctx := context.Background()
		it := &stock.Item{Name: "hot", Stock: 10, Strategy: stock.StrategyLua, Buckets: 2}
		if err := st.CreateItem(ctx, it, nil); err != nil {
			t.Fatal(err)
		}
		hot := homeUsers(fmt.Sprint("batch", it.ID), 2, 1, 12)
		batch := func(us []string) []OrderWrite {
			var out []OrderWrite
			for _, u := range us {
				out = append(out, OrderWrite{Order: &stock.Order{ID: fmt.Sprintf("%036s", u), ItemID: it.ID, UserID: u}, Buckets: 2})
			}
			return out
		}
		if err := st.InsertBatch(ctx, batch(hot[:8]), Now(), 0, nil); err != nil {
			t.Fatalf("batch of 8 on a row of 5 (10 free in all): %v", err)
		}
		if err := st.InsertBatch(ctx, batch(hot[8:11]), Now(), 0, nil); !errors.Is(err, ErrBatchRefused) {
			t.Fatalf("batch of 3 with 2 free: got %v, want ErrBatchRefused", err)
		}
		rows, err := st.BucketRows(ctx, it.ID, 2)
		if err != nil || rows[1].Sold != 8 || rows[1].Live != 8 || rows[0].Sold != 0 || rows[0].Stock+rows[1].Stock != 10 {
			t.Errorf("rows: %+v, %v; want 8 sold in row 1, 10 units in all", rows, err)
		}
		var itemsSold int64
		if err := st.sql.QueryRow("SELECT sold FROM items WHERE id = ?", it.ID).Scan(&itemsSold); err != nil || itemsSold != 0 {
			t.Errorf("items.sold of a bucketed item: %d, %v; want 0 (not written)", itemsSold, err)
		}
		if left, _, err := st.Remaining(ctx, it.ID); err != nil || left != 2 {
			t.Errorf("remaining: %d, %v; want 2", left, err)
		}
	})
}

// Other buyers of the same bucket take every unit moved to it, round after
// round (a thief waits on the move's row locks and takes the moved units
// the moment it commits). The order must still be written from the units
// the item has, not refused and not sent away with a 503: after
// maxMoveRounds the write moves and takes under the locks of all rows.
func TestOrderWhoseMovedUnitsKeepBeingTakenStillSells(t *testing.T) {
	t.Parallel()
	b := testenv.Real(t)
	st := newTestStore(t, b, nil)
	ctx := context.Background()
	it := &stock.Item{Name: "hot", Stock: 2000, Strategy: stock.StrategyLua, Buckets: 2}
	if err := st.CreateItem(ctx, it, nil); err != nil {
		t.Fatal(err)
	}
	steal := "UPDATE item_stock SET sold = stock WHERE item_id = ? AND bucket = 0"
	if _, err := st.sql.ExecContext(ctx, steal, it.ID); err != nil {
		t.Fatal(err)
	}
	var moves int
	var thieves []chan error
	st.moveHook = func(hctx context.Context, tx *sql.Tx) {
		moves++
		if moves > maxMoveRounds {
			return // the locked round: nobody may take its units
		}
		done := make(chan error, 1)
		thieves = append(thieves, done)
		go func() {
			_, err := st.sql.ExecContext(context.Background(), steal, it.ID)
			done <- err
		}()
		// Return only once the thief's UPDATE is in the server, waiting
		// on this move's lock of row 0 (INNODB_LOCK_WAITS does not always
		// list it), so it takes the moved units before the order's next
		// round.
		for {
			var waiting int
			if err := st.sql.QueryRowContext(hctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO LIKE 'UPDATE item_stock SET sold = stock WHERE%'").Scan(&waiting); err != nil {
				t.Error(err)
				return
			}
			if waiting > 0 {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	user := homeUsers(fmt.Sprint("starved", it.ID), 2, 0, 1)[0]
	err := order(st, it.ID, user, 2)
	for _, done := range thieves {
		if terr := <-done; terr != nil {
			t.Errorf("thief: %v", terr)
		}
	}
	if err != nil {
		t.Fatalf("order while its moved units kept being taken (%d moves): %v; want it written", moves, err)
	}
	if moves != maxMoveRounds+1 {
		t.Errorf("moves: %d, want %d (every unlocked round robbed, then the locked one)", moves, maxMoveRounds+1)
	}
	if _, _, err := st.OrderOf(ctx, it.ID, user); err != nil {
		t.Errorf("the order: %v, want it written", err)
	}
	rows, err := st.BucketRows(ctx, it.ID, 2)
	if err != nil || rows[0].Stock+rows[1].Stock != 2000 || rows[0].Sold > rows[0].Stock || rows[1].Sold > rows[1].Stock {
		t.Errorf("rows: %+v, %v; want 2000 units in all, none oversold", rows, err)
	}
}
