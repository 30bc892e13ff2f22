package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/seckill/seckill/internal/stock"
)

// Moves of free units between an item's bucket rows (docs/DESIGN.md,
// "Bucket rows"). A move needs no lock of the lock strategy's buckets: it
// changes the rows' stock only, by free units, under the rows' database
// locks, never their sold or lock_fence (see insertBucketed).

// moveUnits moves free units of an item to bucket row b, in a transaction
// of its own that locks all the item's rows in ascending bucket order, so
// that b has at least need free units. The donors are the richest rows
// first; each gives the larger of what b still lacks and half its free
// units (so a bucket whose buyers are many is not refilled unit by unit),
// never more than it has free: sold units never move. It returns the
// item's free units in all, as seen under the locks: fewer than need, and
// nothing moved. A deadlock or a lock wait timeout (the transaction is
// rolled back whole) is run again, up to deadlockAttempts times.
func (s *Store) moveUnits(ctx context.Context, itemID int64, b int, need int64) (free int64, err error) {
	for attempt := 1; ; attempt++ {
		free, err = s.moveUnitsOnce(ctx, itemID, b, need)
		if attempt < deadlockAttempts && isLockConflict(err) && ctx.Err() == nil {
			continue
		}
		return free, err
	}
}

func (s *Store) moveUnitsOnce(ctx context.Context, itemID int64, b int, need int64) (free int64, err error) {
	err = s.inTx(ctx, nil, func(tx *sql.Tx) error {
		free, err = s.moveInTx(ctx, tx, itemID, b, need)
		return err
	})
	return free, err
}

// moveInTx is moveUnits inside tx: it locks all the item's rows in
// ascending bucket order and moves free units to row b so that b has at
// least need free units, unless the item has fewer than need free in all
// (then nothing moves). It returns the item's free units in all.
func (s *Store) moveInTx(ctx context.Context, tx *sql.Tx, itemID int64, b int, need int64) (free int64, err error) {
	rows, err := s.lockBucketRows(ctx, tx, itemID)
	if err != nil {
		return 0, err
	}
	if b >= len(rows) || rows[b].B != b {
		return 0, fmt.Errorf("item %d: bucket row %d: %w", itemID, b, stock.ErrNotFound)
	}
	for _, r := range rows {
		free += r.free()
	}
	short := need - rows[b].free()
	if free < need || short <= 0 {
		return free, nil
	}
	donors := make([]bucketRow, 0, len(rows)-1)
	for _, r := range rows {
		if r.B != b && r.free() > 0 {
			donors = append(donors, r)
		}
	}
	slices.SortStableFunc(donors, func(x, y bucketRow) int { return int(y.free() - x.free()) })
	var moved int64
	for _, d := range donors {
		if short <= 0 {
			break
		}
		give := min(d.free(), max(short, d.free()/2))
		res, err := tx.ExecContext(ctx, "UPDATE item_stock SET stock = stock - ? WHERE item_id = ? AND bucket = ? AND stock - sold >= ?",
			give, itemID, d.B, give)
		if err != nil {
			return free, dbError("move units", err)
		}
		if ok, err := oneRow(res, "move units"); err != nil {
			return free, err
		} else if !ok {
			return free, fmt.Errorf("database: bucket row %d of item %d lost free units under its lock", d.B, itemID)
		}
		moved += give
		short -= give
	}
	if s.moveHook != nil {
		s.moveHook(ctx, tx)
	}
	res, err := tx.ExecContext(ctx, "UPDATE item_stock SET stock = stock + ? WHERE item_id = ? AND bucket = ?", moved, itemID, b)
	if err != nil {
		return free, dbError("move units", err)
	}
	if ok, err := oneRow(res, "move units"); err != nil {
		return free, err
	} else if !ok {
		return free, fmt.Errorf("database: bucket row %d of item %d vanished under its lock", b, itemID)
	}
	return free, nil
}
