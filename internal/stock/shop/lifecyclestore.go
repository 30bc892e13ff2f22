package shop

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/stock"
)

// The order lifecycle in the database. Every transition out of "created"
// is one conditional UPDATE on the order's status with rows affected
// checked, so of a payment, a cancellation and any number of expiry sweeps
// racing on one order exactly one wins, on any number of instances.

// payOrder marks a created order paid, unless its payment deadline has
// passed at now. It reports whether this call made the change.
func (s *Store) payOrder(ctx context.Context, id string, now time.Time) (bool, error) {
	res, err := s.sql.ExecContext(ctx,
		"UPDATE orders SET status = ?, updated_at = ? WHERE id = ? AND status = ? AND (expires_at IS NULL OR expires_at > ?)",
		stock.StatusPaid, now, id, stock.StatusCreated, now)
	if err != nil {
		return false, dbError("pay order", err)
	}
	return oneRow(res, "pay order")
}

// cancelOrder cancels a created order and gives its unit back to the item,
// in one transaction. With expiry, only an order whose payment deadline has
// passed at now is cancelled. With returned (a strategy without a Redis
// gate), the return of the unit is complete with the commit and is recorded
// in the same statement. It reports whether this call made the change; only
// that call has taken sold down.
func (s *Store) cancelOrder(ctx context.Context, o *stock.Order, now time.Time, expiry, returned bool) (won bool, err error) {
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

// isDeadlock reports whether err is MySQL's deadlock (1213), whose
// transaction was rolled back whole and may simply run again.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

func (s *Store) cancelOrderOnce(ctx context.Context, o *stock.Order, now time.Time, expiry, returned bool) (won bool, err error) {
	q := "UPDATE orders SET status = ?, updated_at = ?"
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
	tx, err := s.sql.BeginTx(ctx, nil)
	if err != nil {
		return false, dbError("begin", err)
	}
	defer func() {
		if err != nil || !won {
			_ = tx.Rollback()
		}
	}()
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return false, dbError("cancel order", err)
	}
	if won, err = oneRow(res, "cancel order"); err != nil || !won {
		return false, err
	}
	res, err = tx.ExecContext(ctx, "UPDATE items SET sold = sold - 1, updated_at = ? WHERE id = ? AND sold > 0", now, o.ItemID)
	if err != nil {
		return false, dbError("return unit", err)
	}
	back, err := oneRow(res, "return unit")
	if err != nil {
		return false, err
	}
	if !back {
		return false, fmt.Errorf("database: item %d has nothing sold, yet order %s held a unit of it", o.ItemID, o.ID)
	}
	if err = tx.Commit(); err != nil {
		return false, dbError("commit", err)
	}
	return true, nil
}

// oneRow reads whether a conditional UPDATE of one row changed it.
func oneRow(res sql.Result, op string) (bool, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return false, dbError(op, err)
	}
	return n == 1, nil
}

// orderRef names an order and its item.
type orderRef struct {
	ID     string
	ItemID int64
}

// dueOrders lists up to limit created orders whose payment deadline has
// passed at now, oldest deadline first (index orders_status_expires).
func (s *Store) dueOrders(ctx context.Context, now time.Time, limit int) ([]orderRef, error) {
	return s.orderRefs(ctx, "list due orders",
		"SELECT id, item_id FROM orders WHERE status = ? AND expires_at <= ? ORDER BY expires_at LIMIT ?",
		stock.StatusCreated, now, limit)
}

// unreturnedOrders lists up to limit cancelled orders, cancelled at or
// before before, whose unit is not recorded as back in stock (index
// orders_status_returned).
func (s *Store) unreturnedOrders(ctx context.Context, before time.Time, limit int) ([]orderRef, error) {
	return s.orderRefs(ctx, "list unreturned orders",
		"SELECT id, item_id FROM orders WHERE status = ? AND stock_returned_at IS NULL AND updated_at <= ? ORDER BY updated_at LIMIT ?",
		stock.StatusCancelled, before, limit)
}

func (s *Store) orderRefs(ctx context.Context, op, q string, args ...any) ([]orderRef, error) {
	rows, err := s.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, dbError(op, err)
	}
	defer rows.Close()
	var refs []orderRef
	for rows.Next() {
		var r orderRef
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

// markStockReturned records that a cancelled order's unit is back in the
// Redis gate. It reports whether this call recorded it.
func (s *Store) markStockReturned(ctx context.Context, id string, now time.Time) (bool, error) {
	res, err := s.sql.ExecContext(ctx,
		"UPDATE orders SET stock_returned_at = ? WHERE id = ? AND status = ? AND stock_returned_at IS NULL",
		now, id, stock.StatusCancelled)
	if err != nil {
		return false, dbError("record stock returned", err)
	}
	return oneRow(res, "record stock returned")
}

// gateSnapshot reads what a Redis gate is built from, in one consistent
// snapshot (one read transaction: InnoDB's REPEATABLE READ, SQLite's
// transaction): the item, and the ids of its cancelled orders. The item's
// sold already excludes exactly those orders, so a gate seeded with
// taken = sold counts each of them as returned; its released set gets
// those ids, which makes a later release of one of them a no-op, and a
// release of any order cancelled after the snapshot count once.
func (s *Store) gateSnapshot(ctx context.Context, itemID int64) (it *stock.Item, cancelled []string, err error) {
	tx, err := s.sql.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, nil, dbError("begin snapshot", err)
	}
	defer func() { _ = tx.Rollback() }() // read only: nothing to commit
	var r itemRow
	err = tx.QueryRowContext(ctx, "SELECT id, stock, sold, starts_at, ends_at FROM items WHERE id = ?", itemID).
		Scan(&r.ID, &r.Stock, &r.Sold, &r.StartsAt, &r.EndsAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("item %d: %w", itemID, stock.ErrNotFound)
	}
	if err != nil {
		return nil, nil, dbError("read item", err)
	}
	rows, err := tx.QueryContext(ctx, "SELECT id FROM orders WHERE item_id = ? AND status = ?", itemID, stock.StatusCancelled)
	if err != nil {
		return nil, nil, dbError("list cancelled orders", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, nil, dbError("list cancelled orders", err)
		}
		cancelled = append(cancelled, id)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, dbError("list cancelled orders", err)
	}
	return &stock.Item{ID: r.ID, Stock: r.Stock, Sold: r.Sold, StartsAt: utcPtr(r.StartsAt), EndsAt: utcPtr(r.EndsAt)}, cancelled, nil
}
