package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/seckill/seckill/internal/stock"
)

// errCommit marks a failed COMMIT: the outcome of the transaction is then
// unknown to this process (see ErrMaybeCommitted).
var errCommit = errors.New("commit failed")

// inTx runs fn in one transaction and commits if fn returns nil; any error
// rolls it back. fn's errors are returned as they are (classified where
// each statement ran); BEGIN and COMMIT failures are classified here, a
// COMMIT failure also marked errCommit.
func (s *Store) inTx(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	tx, err := s.sql.BeginTx(ctx, opts)
	if err != nil {
		return dbError("begin", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if opts != nil && opts.ReadOnly {
		_ = tx.Rollback() // nothing to commit
		return nil
	}
	if err := tx.Commit(); err != nil {
		if errors.Is(err, sql.ErrTxDone) {
			// ctx ended after fn's last statement and database/sql rolled
			// the transaction back before COMMIT could be sent: nothing
			// was written, and the database did not answer in time.
			return fmt.Errorf("database: commit: rolled back when its context ended: %w: %w", stock.ErrUnavailable, err)
		}
		return commitError(err)
	}
	return nil
}

// commitError classifies a failed COMMIT. A deadlock (1213) answered to
// the COMMIT itself is Galera's certification failure (or a brute-force
// abort by a replicated write): the server rolled the transaction back
// whole, so nothing was written and it is a plain 503 (ErrUnavailable),
// not errCommit. Anything else (a cut connection, a timeout) leaves the
// outcome unknown: errCommit, which the callers read back.
func commitError(err error) error {
	if isDeadlock(err) {
		return fmt.Errorf("database: commit: rolled back by the server (a Galera certification failure), nothing written: %w: %w", stock.ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %w", errCommit, dbError("commit", err))
}

// LockedItem is an item whose row a transaction holds locked (see
// WithItemLocked): no order can take a unit of it, and no stock change or
// gate build runs, until the transaction ends.
type LockedItem struct {
	ID int64
	// QueueEpoch is the item's lua-async queue epoch (see MoveQueueEpoch).
	QueueEpoch int64
	// Buckets is the item's bucket count (1 for an item without bucket
	// rows).
	Buckets int

	tx *sql.Tx
}

// WithItemLocked runs fn in a transaction holding the item's row lock
// (SELECT ... FOR UPDATE; SQLite has one connection, so its transactions
// are serial anyway), and, for an item with several buckets, its bucket
// rows' locks (ascending), which its orders take instead of the items
// row's, and commits if fn returns nil.
func (s *Store) WithItemLocked(ctx context.Context, id int64, fn func(ctx context.Context, it *LockedItem) error) error {
	return s.inTx(ctx, nil, func(tx *sql.Tx) error {
		q := "SELECT queue_epoch, buckets FROM items WHERE id = ?"
		if !s.sqlite {
			q += " FOR UPDATE"
		}
		it := &LockedItem{ID: id, tx: tx}
		var k int
		if err := tx.QueryRowContext(ctx, q, id).Scan(&it.QueueEpoch, &k); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("item %d: %w", id, stock.ErrNotFound)
			}
			return dbError("lock item", err)
		}
		it.Buckets = max(1, k)
		if k > 1 {
			if _, err := s.lockBucketRows(ctx, tx, id); err != nil {
				return err
			}
		}
		return fn(ctx, it)
	})
}

// Stock reads the locked item's stock.
func (it *LockedItem) Stock(ctx context.Context) (int64, error) {
	var n int64
	if err := it.tx.QueryRowContext(ctx, "SELECT stock FROM items WHERE id = ?", it.ID).Scan(&n); err != nil {
		return 0, dbError("read stock", err)
	}
	return n, nil
}

// MoveQueueEpoch starts a new lua-async queue epoch for the item: a batch
// read from the queue before (one Redis lost) can no longer be written
// (PersistQueued refuses its epoch).
func (it *LockedItem) MoveQueueEpoch(ctx context.Context) error {
	if _, err := it.tx.ExecContext(ctx, "UPDATE items SET queue_epoch = ? WHERE id = ?", it.QueueEpoch+1, it.ID); err != nil {
		return dbError("move queue epoch", err)
	}
	it.QueueEpoch++
	return nil
}

// BucketQueueEpochs reads the queue epoch of each of the locked item's k
// bucket rows (a lua-async item with bucket rows; see
// PersistQueuedBucket), index b for row b.
func (it *LockedItem) BucketQueueEpochs(ctx context.Context, k int) ([]int64, error) {
	rows, err := it.tx.QueryContext(ctx, "SELECT bucket, queue_epoch FROM item_stock WHERE item_id = ? ORDER BY bucket", it.ID)
	if err != nil {
		return nil, dbError("read queue epochs", err)
	}
	defer rows.Close()
	out := make([]int64, k)
	seen := 0
	for rows.Next() {
		var b int
		var e int64
		if err := rows.Scan(&b, &e); err != nil {
			return nil, dbError("read queue epochs", err)
		}
		if b < 0 || b >= k {
			return nil, fmt.Errorf("item %d: bucket row %d of %d", it.ID, b, k)
		}
		out[b] = e
		seen++
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("read queue epochs", err)
	}
	if seen != k {
		return nil, fmt.Errorf("item %d has %d bucket rows, not %d: %w", it.ID, seen, k, stock.ErrNotFound)
	}
	return out, nil
}

// MoveBucketQueueEpoch starts a new queue epoch for the locked item's
// bucket row b: a batch read from bucket b's stream before (Redis lost
// it) can no longer be written (PersistQueuedBucket refuses its epoch).
// The other rows' epochs, and so their batches, are untouched.
func (it *LockedItem) MoveBucketQueueEpoch(ctx context.Context, b int) error {
	r, err := it.tx.ExecContext(ctx, "UPDATE item_stock SET queue_epoch = queue_epoch + 1 WHERE item_id = ? AND bucket = ?", it.ID, b)
	if err != nil {
		return dbError("move queue epoch", err)
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("item %d bucket row %d: %w", it.ID, b, stock.ErrNotFound)
	}
	return nil
}

// Buyers reads what the database says of the locked item's buyers (see
// BuyersSnapshot), inside the lock.
func (it *LockedItem) Buyers(ctx context.Context) (Buyers, error) {
	return buyersIn(ctx, it.tx, it.ID)
}
