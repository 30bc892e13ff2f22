package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// The order lifecycle in the database. Every transition out of "created"
// is one conditional UPDATE on the order's status with rows affected
// checked, so of a payment, a cancellation and any number of expiry sweeps
// racing on one order exactly one wins, on any number of instances.

// orderByID names the orders table for an UPDATE of one order found by its
// id, with more conditions on columns of the status indexes. On MySQL and
// MariaDB it forces the primary key: the optimizer can pick a range of
// orders_status_expires instead (MariaDB did, with ASCII ids and a few
// thousand created orders expired), and that locks the index entries of
// other orders, so two such UPDATEs on different orders, each followed by
// the item's row, deadlock (TestExpiryRacesPayment).
func (s *Store) orderByID() string {
	if s.sqlite {
		return "orders"
	}
	return "orders FORCE INDEX (PRIMARY)"
}

// PayOrder marks a created order paid, unless its payment deadline has
// passed at now. It reports whether this call made the change.
// The paid event is written in the same transaction.
func (s *Store) PayOrder(ctx context.Context, id string, now time.Time) (bool, error) {
	err := s.inTx(ctx, nil, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			"UPDATE "+s.orderByID()+" SET status = ?, updated_at = ? WHERE id = ? AND status = ? AND (expires_at IS NULL OR expires_at > ?)",
			stock.StatusPaid, now, id, stock.StatusCreated, now)
		if err != nil {
			return dbError("pay order", err)
		}
		if won, err := oneRow(res, "pay order"); err != nil {
			return err
		} else if !won {
			return errLost
		}
		return s.appendOrderEvent(ctx, tx, EventPaid, id, now)
	})
	if errors.Is(err, errLost) {
		return false, nil
	}
	return err == nil, err
}

// CancelOrder cancels a created order and gives its unit back to the item,
// in one transaction, with its event (cancelled, or expired with expiry). With expiry, only an order whose payment deadline has
// passed at now is cancelled. With returned (a strategy without a Redis
// gate), the return of the unit is complete with the commit and is recorded
// in the same statement. It reports whether this call made the change; only
// that call has taken sold down.
func (s *Store) CancelOrder(ctx context.Context, o *stock.Order, now time.Time, expiry, returned bool) (won bool, err error) {
	for attempt := 1; ; attempt++ {
		won, err = s.cancelOrderOnce(ctx, o, now, expiry, returned)
		if attempt < deadlockAttempts && isDeadlock(err) && ctx.Err() == nil {
			continue
		}
		return won, err
	}
}

// deadlockAttempts bounds how often a lifecycle transaction that InnoDB
// chose as a deadlock victim is run again. The cancel locks the order row,
// then the item's; a writer's batch inserts orders (index locks), then
// updates the item: the two can deadlock. InnoDB rolls the victim back
// whole, and the conditional UPDATE on status makes a rerun safe: it wins
// only if nothing else did meanwhile.
const deadlockAttempts = 3

// errLost rolls back a cancellation that found the order already changed.
var errLost = errors.New("order changed meanwhile")

func (s *Store) cancelOrderOnce(ctx context.Context, o *stock.Order, now time.Time, expiry, returned bool) (bool, error) {
	q := "UPDATE " + s.orderByID() + " SET status = ?, updated_at = ?"
	args := []any{stock.StatusCancelled, now}
	if returned {
		q += ", stock_returned_at = ?"
		args = append(args, now)
	}
	q += " WHERE id = ? AND status = ?"
	args = append(args, o.ID, stock.StatusCreated)
	if expiry {
		q += " AND expires_at <= ?"
		args = append(args, now)
	}
	err := s.inTx(ctx, nil, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return dbError("cancel order", err)
		}
		if won, err := oneRow(res, "cancel order"); err != nil {
			return err
		} else if !won {
			return errLost
		}
		typ := EventCancelled
		if expiry {
			typ = EventExpired
		}
		if err := s.appendOrderEvent(ctx, tx, typ, o.ID, now); err != nil {
			return err
		}
		var user string
		var k int
		err = tx.QueryRowContext(ctx, "SELECT orders.user_id, items.buckets FROM orders JOIN items ON items.id = orders.item_id WHERE orders.id = ?", o.ID).
			Scan(&user, &k)
		if err != nil {
			return dbError("read order's item", err)
		}
		if k > 1 {
			// The unit goes back to the row of the buyer's home bucket,
			// which it was taken from (or which a move credited for it).
			res, err = tx.ExecContext(ctx, "UPDATE item_stock SET sold = sold - 1 WHERE item_id = ? AND bucket = ? AND sold > 0",
				o.ItemID, stock.HomeBucketOf(user, k))
		} else {
			res, err = tx.ExecContext(ctx, "UPDATE items SET sold = sold - 1, updated_at = ? WHERE id = ? AND sold > 0", now, o.ItemID)
		}
		if err != nil {
			return dbError("return unit", err)
		}
		if back, err := oneRow(res, "return unit"); err != nil {
			return err
		} else if !back {
			if k > 1 {
				return fmt.Errorf("database: item %d's bucket row %d has nothing sold, yet order %s held a unit of it", o.ItemID, stock.HomeBucketOf(user, k), o.ID)
			}
			return fmt.Errorf("database: item %d has nothing sold, yet order %s held a unit of it", o.ItemID, o.ID)
		}
		return nil
	})
	if errors.Is(err, errLost) {
		return false, nil
	}
	return err == nil, err
}

// OrderRef names an order and its item.
type OrderRef struct {
	ID     string
	ItemID int64
}

// DueOrders lists up to limit created orders whose payment deadline has
// passed at now, oldest deadline first (index orders_status_expires).
func (s *Store) DueOrders(ctx context.Context, now time.Time, limit int) ([]OrderRef, error) {
	return s.orderRefs(ctx, "list due orders",
		"SELECT id, item_id FROM orders WHERE status = ? AND expires_at <= ? ORDER BY expires_at LIMIT ?",
		stock.StatusCreated, now, limit)
}

// UnreturnedOrders lists up to limit cancelled orders, cancelled at or
// before before, whose unit is not recorded as back in stock (index
// orders_status_returned).
func (s *Store) UnreturnedOrders(ctx context.Context, before time.Time, limit int) ([]OrderRef, error) {
	return s.orderRefs(ctx, "list unreturned orders",
		"SELECT id, item_id FROM orders WHERE status = ? AND stock_returned_at IS NULL AND updated_at <= ? ORDER BY updated_at LIMIT ?",
		stock.StatusCancelled, before, limit)
}

func (s *Store) orderRefs(ctx context.Context, op, q string, args ...any) ([]OrderRef, error) {
	rows, err := s.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, dbError(op, err)
	}
	defer rows.Close()
	var refs []OrderRef
	for rows.Next() {
		var r OrderRef
		if err := rows.Scan(&r.ID, &r.ItemID); err != nil {
			return nil, dbError(op, err)
		}
		refs = append(refs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(op, err)
	}
	return refs, nil
}

// MarkStockReturned records that a cancelled order's unit is back in the
// Redis gate. It reports whether this call recorded it.
func (s *Store) MarkStockReturned(ctx context.Context, id string, now time.Time) (bool, error) {
	res, err := s.sql.ExecContext(ctx,
		"UPDATE "+s.orderByID()+" SET stock_returned_at = ? WHERE id = ? AND status = ? AND stock_returned_at IS NULL",
		now, id, stock.StatusCancelled)
	if err != nil {
		return false, dbError("record stock returned", err)
	}
	return oneRow(res, "record stock returned")
}
