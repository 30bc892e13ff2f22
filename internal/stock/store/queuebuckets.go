package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// PersistQueuedBucket is PersistQueued for a batch of bucket b of a
// lua-async item with bucket rows (docs/DESIGN.md, "Buckets for
// lua-async"; the writers of such an item's bucket streams call it): the
// batch's orders are those of buyers whose home is b, and they take their
// units from row b with
//
//	UPDATE item_stock SET sold = sold + n WHERE item_id = ? AND bucket = b AND sold + n <= stock AND queue_epoch = ?
//
// so K batches of one item commit on K rows at once. Row b's queue epoch
// fences a batch read from bucket b's lost stream (ErrQueueLost). When row
// b has too few free units, units are moved to it from the other rows
// (moveUnits) and the batch runs again; a batch larger than the whole
// item's free units is settled as PersistQueued settles it (the first
// orders written, the rest recorded sold_out).
func (s *Store) PersistQueuedBucket(ctx context.Context, itemID int64, b int, batch []*Queued, now time.Time) (Persisted, error) {
	if b < 0 {
		return Persisted{}, fmt.Errorf("store: bucket row %d of item %d", b, itemID)
	}
	return s.persistQueued(ctx, itemID, b, batch, now)
}

// writeQueuedBucket is writeQueued on bucket row b, moving units to it
// when it is short, at most maxMoveRounds times, then in one transaction
// holding all the item's rows (as insertBucketed). ErrBatchRefused: the
// item has fewer free units than orders (nothing written).
func (s *Store) writeQueuedBucket(ctx context.Context, itemID int64, b int, epoch int64, orders []*Queued, keyNull map[string]bool,
	failed map[string]string, byID map[string]*Queued, now time.Time) error {
	need := int64(len(orders))
	locked := false // the last rounds move and take in one transaction (see insertBucketed)
	take := func(tx *sql.Tx) error {
		if locked {
			free, err := s.moveInTx(ctx, tx, itemID, b, need)
			if err != nil {
				return err
			}
			if free < need {
				return errItemShort
			}
		}
		r, err := tx.ExecContext(ctx, "UPDATE item_stock SET sold = sold + ? WHERE item_id = ? AND bucket = ? AND sold + ? <= stock AND queue_epoch = ?",
			need, itemID, b, need, epoch)
		if err != nil {
			return dbError("take units", err)
		}
		if taken, err := oneRow(r, "take units"); err != nil || taken {
			return err
		}
		var free int64
		if err := s.fenceBucket(ctx, tx, itemID, b, epoch, &free); err != nil {
			return err
		}
		if locked {
			return fmt.Errorf("database: bucket row %d of item %d short of units just moved to it under its lock", b, itemID)
		}
		return errRowShort
	}
	fenced := func(tx *sql.Tx) error { return s.fenceBucket(ctx, tx, itemID, b, epoch, nil) }
	for round := 0; ; round++ {
		locked = round >= maxMoveRounds
		err := s.writeQueuedTx(ctx, itemID, orders, keyNull, failed, byID, now, take, fenced)
		switch {
		case isLockConflict(err) && !errors.Is(err, errCommit) && round < maxMoveRounds+deadlockAttempts && ctx.Err() == nil:
			continue // rolled back whole (a failed COMMIT may have written: never rerun)
		case errors.Is(err, errItemShort):
			return ErrBatchRefused
		case !errors.Is(err, errRowShort):
			return err
		}
		free, err := s.moveUnits(ctx, itemID, b, need)
		switch {
		case err != nil:
			return err
		case free < need:
			return ErrBatchRefused
		}
	}
}

// fenceBucket reads bucket row b in tx: ErrQueueLost if its queue epoch
// is not epoch, stock.ErrNotFound if there is no such row; its free units
// into free when free is not nil.
func (s *Store) fenceBucket(ctx context.Context, tx *sql.Tx, itemID int64, b int, epoch int64, free *int64) error {
	var left, have int64
	err := tx.QueryRowContext(ctx, "SELECT stock - sold, queue_epoch FROM item_stock WHERE item_id = ? AND bucket = ?", itemID, b).Scan(&left, &have)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("item %d bucket row %d: %w", itemID, b, stock.ErrNotFound)
	case err != nil:
		return dbError("read bucket row", err)
	case have != epoch:
		return fmt.Errorf("item %d bucket row %d has queue epoch %d, the batch %d: %w", itemID, b, have, epoch, ErrQueueLost)
	}
	if free != nil {
		*free = left
	}
	return nil
}

// MoveBucketQueueEpoch moves bucket row b's queue epoch on in a
// transaction of its own and returns the new one (for tests and tools; the
// rebuild after Redis lost bucket b's stream moves it under the item's
// locks, LockedItem.MoveBucketQueueEpoch).
func (s *Store) MoveBucketQueueEpoch(ctx context.Context, itemID int64, b int) (int64, error) {
	var epoch int64
	err := s.inTx(ctx, nil, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE item_stock SET queue_epoch = queue_epoch + 1 WHERE item_id = ? AND bucket = ?", itemID, b); err != nil {
			return dbError("move queue epoch", err)
		}
		return tx.QueryRowContext(ctx, "SELECT queue_epoch FROM item_stock WHERE item_id = ? AND bucket = ?", itemID, b).Scan(&epoch)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("item %d bucket row %d: %w", itemID, b, stock.ErrNotFound)
	}
	return epoch, err
}
