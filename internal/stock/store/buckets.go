package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/stock"
)

// Bucket rows (docs/DESIGN.md, "Bucket rows"). An item with buckets K > 1
// keeps its stock in K rows of item_stock, one per bucket: an order takes
// its unit from the row of its buyer's home bucket (stock.HomeBucketOf of
// the user id, the same bucket whose Redis gate reserved it), so the K
// rows of one hot item commit in parallel. items.stock stays the item's
// total stock (the sum of the rows' stock); items.sold is not written for
// such an item (it stays 0): its sold is the sum of the rows' sold (soldOf), in every
// read. Row b's sold is the number of the item's live orders whose buyer's
// home is b: a cancel gives the unit back to that row.
//
// When row b has fewer free units than a write needs while the item has
// enough, a short transaction of its own (moveUnits) moves free units,
// never sold ones, from the other rows to b; the write then runs again.
//
// Lock order: the items row first (WithItemLocked, SetStock, ChangeRoom),
// then the item's bucket rows in ascending bucket order. An order locks
// one bucket row and never the items row; a move locks the bucket rows
// only, in ascending order; a cancel locks its order row, then one bucket
// row. No two of them wait on each other in a cycle.
//
// An item with one bucket has no item_stock rows: its items row is its
// stock, as before.

// soldOf is an item's sold in a query of the items table: the sum of its
// bucket rows' sold for an item with several buckets, items.sold for one.
const soldOf = "(CASE WHEN items.buckets > 1 THEN (SELECT COALESCE(SUM(item_stock.sold), 0) FROM item_stock WHERE item_stock.item_id = items.id) ELSE items.sold END)"

// itemColumns are itemRow's columns, sold read through soldOf.
const itemColumns = "id, name, price_cents, stock, " + soldOf + " AS sold, strategy, buckets, lock_fence, starts_at, ends_at, created_at, updated_at"

// errRowShort means an order's bucket row had fewer free units than the
// write needed; the transaction rolled back, and units may be moved to it.
var errRowShort = errors.New("bucket row short of units")

// errItemShort means the item as a whole had fewer free units than the
// write needed, as seen under the locks of all its rows.
var errItemShort = errors.New("item short of units")

// maxMoveRounds bounds how often one write moves units to its row and
// runs again (other writers may take what was moved); after that it moves
// and takes in one transaction holding all the item's rows.
const maxMoveRounds = 8

// splitEvenly is n units over k rows, the remainder to the first rows.
func splitEvenly(n int64, k int) []int64 {
	out := make([]int64, k)
	for b := range out {
		out[b] = n / int64(k)
		if int64(b) < n%int64(k) {
			out[b]++
		}
	}
	return out
}

// createBucketRows writes the rows of a new item with k > 1 buckets, in
// the item's creating transaction.
func createBucketRows(tx *gorm.DB, id, units int64, k int) error {
	args := make([]any, 0, 4*k)
	for b, n := range splitEvenly(units, k) {
		args = append(args, id, b, n, 0)
	}
	if err := tx.Exec("INSERT INTO item_stock (item_id, bucket, stock, sold) VALUES "+rowsOf(k, 4), args...).Error; err != nil {
		return dbError("create bucket rows", err)
	}
	return nil
}

// bucketRow is one row of item_stock.
type bucketRow struct {
	B           int
	Stock, Sold int64
}

func (r bucketRow) free() int64 { return r.Stock - r.Sold }

// querier is a transaction of either kind.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// lockBucketRows reads an item's bucket rows in ascending bucket order,
// locking them (FOR UPDATE; SQLite's transactions are serial anyway).
func (s *Store) lockBucketRows(ctx context.Context, tx querier, id int64) ([]bucketRow, error) {
	q := "SELECT bucket, stock, sold FROM item_stock WHERE item_id = ? ORDER BY bucket"
	if !s.sqlite {
		q += " FOR UPDATE"
	}
	rows, err := tx.QueryContext(ctx, q, id)
	if err != nil {
		return nil, dbError("lock bucket rows", err)
	}
	defer rows.Close()
	var out []bucketRow
	for rows.Next() {
		var r bucketRow
		if err := rows.Scan(&r.B, &r.Stock, &r.Sold); err != nil {
			return nil, dbError("lock bucket rows", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("lock bucket rows", err)
	}
	return out, nil
}

// gormQuerier runs a gorm transaction's queries (ChangeRoom's).
type gormQuerier struct{ tx *gorm.DB }

func (g gormQuerier) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return g.tx.WithContext(ctx).Raw(q, args...).Rows()
}

// takeBucketUnits is the UPDATE that takes units of one bucket row for
// orders: sold + k <= stock, with a fence no older than the row's when
// fenced (a lock item's bucket lock: the row then stores the fence), and no
// waiting room when some order has no pass (roomless). Built once.
func takeBucketUnits(fenced, roomless bool) string { return takeBucketSQL[b2i(fenced)][b2i(roomless)] }

var takeBucketSQL = takeSQL("UPDATE item_stock SET sold = sold + ?", " WHERE item_id = ? AND bucket = ? AND sold + ? <= stock")

// takeBucketArgs are takeBucketUnits' arguments, in its order.
func takeBucketArgs(k int, fence, itemID int64, b int, roomless bool) []any {
	args := []any{k}
	if fence > 0 {
		args = append(args, fence)
	}
	args = append(args, itemID, b, k)
	if fence > 0 {
		args = append(args, fence)
	}
	if roomless {
		args = append(args, itemID)
	}
	return args
}

// bucketOf is the one bucket row of a batch's orders (all of one item's
// bucket, as the shop's group commit queues them).
func bucketOf(batch []OrderWrite) (int, error) {
	k := batch[0].Buckets
	b := stock.HomeBucketOf(batch[0].Order.UserID, k)
	for _, w := range batch[1:] {
		if w.Buckets != k || stock.HomeBucketOf(w.Order.UserID, k) != b || w.Order.ItemID != batch[0].Order.ItemID {
			return 0, fmt.Errorf("store: a batch mixes items or buckets (item %d)", batch[0].Order.ItemID)
		}
	}
	return b, nil
}

// insertBucketed writes a batch of orders (one or more) of bucket row b
// of a bucketed item and takes their units from row b, in one transaction,
// moving free units to row b first when it has too few (see moveUnits),
// at most maxMoveRounds times; then it moves and takes in one transaction
// holding all the item's rows. single: one order (InsertOrder), whose
// refusals are told by their cause; a batch's are ErrBatchRefused. When
// the item as a whole has fewer free units than the orders, the answer is
// stock.ErrSoldOut (single) or ErrBatchRefused. fence, when
// positive (a lock item's bucket lock), must be no older than row b's
// lock_fence, which the write sets to it; an older one is refused with
// ErrFenceStale, nothing written and no unit moved.
//
// A move needs no bucket lock of the rows it takes from: it changes their
// stock, never their sold or fence, only by free units, under the rows'
// database locks; an order's conditional UPDATE of its row, under the same
// row lock, sees the stock as it is after the move, so neither can make a
// row's sold exceed its stock.
func (s *Store) insertBucketed(ctx context.Context, batch []OrderWrite, b int, now time.Time, fence int64, progress func(), single bool) error {
	itemID := batch[0].Order.ItemID
	need := int64(len(batch))
	roomless := anyRoomless(batch)
	refused := func() error {
		if !single {
			return ErrBatchRefused
		}
		return stock.ErrSoldOut
	}
	for round := 0; ; round++ {
		// The last rounds move and take in one transaction that locks all
		// the item's rows: nobody can take the moved units in between, so
		// a buyer is never sent away while the item has a unit for it.
		locked := round >= maxMoveRounds
		err := s.inTx(ctx, nil, func(tx *sql.Tx) error {
			if err := s.insertBatchOrders(ctx, tx, batch, now, progress, single); err != nil {
				return err
			}
			if locked {
				free, err := s.moveInTx(ctx, tx, itemID, b, need)
				progress()
				if err != nil {
					return err
				}
				if free < need {
					return errItemShort
				}
			}
			res, err := tx.ExecContext(ctx, takeBucketUnits(fence > 0, roomless), takeBucketArgs(len(batch), fence, itemID, b, roomless)...)
			progress()
			if err != nil {
				return dbError("take units", err)
			}
			if taken, err := oneRow(res, "take units"); err != nil {
				return err
			} else if taken {
				return nil
			}
			err = whyRowShort(ctx, tx, itemID, b, fence, roomless, single)
			if locked && errors.Is(err, errRowShort) {
				return fmt.Errorf("database: bucket row %d of item %d short of units just moved to it under its lock", b, itemID)
			}
			return err
		})
		switch {
		case isLockConflict(err) && !errors.Is(err, errCommit) && round < maxMoveRounds+deadlockAttempts && ctx.Err() == nil:
			continue // rolled back whole: nothing written (a failed COMMIT may have written: never rerun)
		case errors.Is(err, errItemShort):
			return refused()
		case !errors.Is(err, errRowShort) || locked:
			return err
		}
		free, err := s.moveUnits(ctx, itemID, b, need)
		progress()
		switch {
		case err != nil:
			return err
		case free < need:
			return refused()
		}
	}
}

// whyRowShort tells, inside the failed transaction of an order (single)
// or a batch of bucket row b, why no unit was taken: a fence older than
// the row's (ErrFenceStale: nothing can be written with it), errRowShort
// when the row has too few free units (units may be moved to it),
// otherwise the item is unknown or its waiting room refuses an order
// without a pass.
func whyRowShort(ctx context.Context, tx *sql.Tx, itemID int64, b int, fence int64, roomless, single bool) error {
	var roomed bool
	var lastFence int64
	err := tx.QueryRowContext(ctx, "SELECT "+roomExists+", lock_fence FROM item_stock WHERE item_id = ? AND bucket = ?", itemID, itemID, b).Scan(&roomed, &lastFence)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("item %d bucket row %d: %w", itemID, b, stock.ErrNotFound)
	case err != nil:
		return dbError("read bucket row", err)
	case fence > 0 && lastFence > fence:
		return fenceStaleError(fence, lastFence)
	case roomless && roomed && single:
		return fmt.Errorf("item %d: %w", itemID, stock.ErrPassRequired)
	case roomless && roomed:
		return ErrBatchRefused
	}
	return errRowShort
}

// BucketLockFence reads the highest lock fence bucket row b of a bucketed
// item has accepted (LockFence is the items row's, for one bucket).
func (s *Store) BucketLockFence(ctx context.Context, itemID int64, b int) (int64, error) {
	var fence int64
	err := s.sql.QueryRowContext(ctx, "SELECT lock_fence FROM item_stock WHERE item_id = ? AND bucket = ?", itemID, b).Scan(&fence)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("item %d bucket row %d: %w", itemID, b, stock.ErrNotFound)
	}
	if err != nil {
		return 0, dbError("read lock fence", err)
	}
	return fence, nil
}

// respreadStock changes a bucketed item's total stock from its rows'
// (locked, in rows) to n, in the transaction holding them: a raise is
// shared evenly (the remainder to the first rows), a cut taken from the
// rows' free units as evenly as they allow. The caller has checked that n
// is not below the sum of sold.
func respreadStock(ctx context.Context, tx *sql.Tx, itemID int64, rows []bucketRow, n int64) error {
	var total int64
	for _, r := range rows {
		total += r.Stock
	}
	next := make([]int64, len(rows))
	for i, r := range rows {
		next[i] = r.Stock
	}
	if delta := n - total; delta >= 0 {
		for i, add := range splitEvenly(delta, len(rows)) {
			next[i] += add
		}
	} else {
		cut := -delta
		order := make([]int, len(rows))
		for i := range order {
			order[i] = i
		}
		// The poorest rows first: each gives at most an even share of what
		// is left to cut, and the richer ones make up the rest.
		slices.SortStableFunc(order, func(x, y int) int { return int(rows[x].free() - rows[y].free()) })
		for j, i := range order {
			left := int64(len(order) - j)
			take := min(rows[i].free(), (cut+left-1)/left)
			next[i] -= take
			cut -= take
		}
		if cut != 0 {
			return fmt.Errorf("stock %d: the bucket rows have too few free units: %w", n, stock.ErrStockBelowSold)
		}
	}
	for i, r := range rows {
		if next[i] == r.Stock {
			continue
		}
		if _, err := tx.ExecContext(ctx, "UPDATE item_stock SET stock = ? WHERE item_id = ? AND bucket = ?", next[i], itemID, r.B); err != nil {
			return dbError("update bucket stock", err)
		}
	}
	return nil
}

// BucketRow is one of a bucketed item's rows as read, with the live
// orders (created or paid) whose buyer's home bucket it is.
type BucketRow struct {
	Bucket      int
	Stock, Sold int64
	Live        int64
}

// BucketRows reads a bucketed item's rows and counts its live orders per
// home bucket, in one transaction (nil for an item with one bucket). Each
// row's Sold should equal its Live.
func (s *Store) BucketRows(ctx context.Context, id int64, k int) ([]BucketRow, error) {
	if k <= 1 {
		return nil, nil
	}
	var out []BucketRow
	err := s.inTx(ctx, &sql.TxOptions{ReadOnly: !s.sqlite}, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT bucket, stock, sold FROM item_stock WHERE item_id = ? ORDER BY bucket", id)
		if err != nil {
			return dbError("read bucket rows", err)
		}
		for rows.Next() {
			var r BucketRow
			if err := rows.Scan(&r.Bucket, &r.Stock, &r.Sold); err != nil {
				rows.Close()
				return dbError("read bucket rows", err)
			}
			out = append(out, r)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return dbError("read bucket rows", err)
		}
		if len(out) != k {
			return fmt.Errorf("item %d has %d bucket rows, want %d", id, len(out), k)
		}
		users, err := tx.QueryContext(ctx, "SELECT user_id FROM orders WHERE item_id = ? AND status IN (?, ?)", id, stock.StatusCreated, stock.StatusPaid)
		if err != nil {
			return dbError("read orders", err)
		}
		defer users.Close()
		for users.Next() {
			var u string
			if err := users.Scan(&u); err != nil {
				return dbError("read orders", err)
			}
			out[stock.HomeBucketOf(u, k)].Live++
		}
		return users.Err()
	})
	return out, err
}
