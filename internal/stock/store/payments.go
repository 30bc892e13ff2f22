package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// Payments from the provider (docs/API.md, "Payments from the provider"):
// each verified webhook event that names a payment is recorded once in
// payment_events, by its event id, in the same transaction as what it did
// to its order (paid, with the paid event) or the refund_due event it
// wrote.

// errDuplicatePayment rolls back a payment whose event id is recorded.
var errDuplicatePayment = errors.New("payment event recorded before")

// RecordPayment records p and applies it to its order, in one transaction.
// A created order whose payment deadline had not passed when it was paid
// (p.PaidAt, or p.ReceivedAt when that is zero or later),
// whose item's price_cents is p.Amount and whose currency is currency
// (compared without case) is marked paid, with its paid event. A payment
// for an order that can no longer be paid (cancelled, expired, failed, past
// its deadline, or paid already) is recorded as refund_due, with a
// refund_due event. A payment that names no order, or whose amount or
// currency do not match, is recorded as rejected. An event id recorded
// before changes nothing and answers the first outcome (Duplicate).
func (s *Store) RecordPayment(ctx context.Context, p stock.Payment, currency string) (stock.PaymentRecord, error) {
	now := p.ReceivedAt.UTC().Truncate(time.Microsecond)
	if now.IsZero() {
		now = Now()
	}
	var rec stock.PaymentRecord
	err := s.inTx(ctx, nil, func(tx *sql.Tx) error {
		// The event's row first: a concurrent delivery of the same event
		// waits here for this one's commit, then finds it.
		_, err := tx.ExecContext(ctx, "INSERT INTO payment_events (event_id, type, order_id, amount, currency, outcome, reason, received_at) VALUES (?, ?, ?, ?, ?, '', '', ?)",
			p.EventID, p.Type, p.OrderID, p.Amount, p.Currency, now)
		if err != nil {
			if isDupKey(err) {
				return errDuplicatePayment
			}
			return dbError("record payment", err)
		}
		if rec, err = s.applyPayment(ctx, tx, p, currency, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE payment_events SET outcome = ?, reason = ? WHERE event_id = ?",
			rec.Outcome, truncate(rec.Reason, 255), p.EventID); err != nil {
			return dbError("record payment", err)
		}
		return nil
	})
	if errors.Is(err, errDuplicatePayment) {
		return s.recordedPayment(ctx, p.EventID)
	}
	if err != nil {
		return stock.PaymentRecord{}, err
	}
	return rec, nil
}

// applyPayment decides p's outcome in tx and makes the order's change.
func (s *Store) applyPayment(ctx context.Context, tx *sql.Tx, p stock.Payment, currency string, now time.Time) (stock.PaymentRecord, error) {
	rejected := func(format string, args ...any) (stock.PaymentRecord, error) {
		return stock.PaymentRecord{Outcome: stock.PaymentRejected, Reason: fmt.Sprintf(format, args...)}, nil
	}
	if !stock.ValidOrderID(p.OrderID) {
		return rejected("metadata.order_id names no order")
	}
	q := "SELECT status, expires_at, updated_at, item_id FROM " + s.orderByID() + " WHERE id = ?"
	if !s.sqlite {
		q += " FOR UPDATE" // the order row only: the item's row is read unlocked below
	}
	paidAt := now // what the deadline is judged by
	if pa := p.PaidAt.UTC().Truncate(time.Microsecond); !pa.IsZero() && pa.Before(now) {
		paidAt = pa
	}
	var status string
	var expires sql.NullTime
	var updated time.Time
	var itemID int64
	switch err := tx.QueryRowContext(ctx, q, p.OrderID).Scan(&status, &expires, &updated, &itemID); {
	case errors.Is(err, sql.ErrNoRows):
		return rejected("order %s does not exist", p.OrderID)
	case err != nil:
		return stock.PaymentRecord{}, dbError("read order", err)
	}
	item := func(r stock.PaymentRecord, err error) (stock.PaymentRecord, error) {
		r.ItemID = itemID
		return r, err
	}
	var price int64
	if err := tx.QueryRowContext(ctx, "SELECT price_cents FROM items WHERE id = ?", itemID).Scan(&price); err != nil {
		return stock.PaymentRecord{}, dbError("read item's price", err)
	}
	if !strings.EqualFold(p.Currency, currency) {
		return item(rejected("currency %q is not %q", p.Currency, strings.ToLower(currency)))
	}
	if p.Amount != price {
		return item(rejected("amount %d is not the item's price_cents %d", p.Amount, price))
	}
	var reason string
	switch {
	case status == stock.StatusCreated && expires.Valid && !expires.Time.After(paidAt):
		reason = "the order's payment deadline had passed"
	case status == stock.StatusCreated:
		res, err := tx.ExecContext(ctx,
			"UPDATE "+s.orderByID()+" SET status = ?, updated_at = ? WHERE id = ? AND status = ? AND (expires_at IS NULL OR expires_at > ?)",
			stock.StatusPaid, now, p.OrderID, stock.StatusCreated, paidAt)
		if err != nil {
			return stock.PaymentRecord{}, dbError("pay order", err)
		}
		if won, err := oneRow(res, "pay order"); err != nil {
			return stock.PaymentRecord{}, err
		} else if !won {
			// Not on MySQL (the row is locked); SQLite's transactions are serial.
			return stock.PaymentRecord{}, fmt.Errorf("database: order %s changed inside the transaction that pays it", p.OrderID)
		}
		if err := s.appendOrderEvent(ctx, tx, EventPaid, p.OrderID, now); err != nil {
			return stock.PaymentRecord{}, err
		}
		return stock.PaymentRecord{Outcome: stock.PaymentPaid, ItemID: itemID}, nil
	case status == stock.StatusPaid:
		reason = "the order was paid already"
	default:
		reason = "the order is " + status
		// As stock.Order.Expired: cancelled at or after its deadline.
		if status == stock.StatusCancelled && expires.Valid && !updated.Before(expires.Time) {
			reason = "the order expired"
		}
	}
	if err := s.appendOrderEvent(ctx, tx, EventRefundDue, p.OrderID, now); err != nil {
		return stock.PaymentRecord{}, err
	}
	return stock.PaymentRecord{Outcome: stock.PaymentRefundDue, Reason: reason, ItemID: itemID}, nil
}

// recordedPayment reads the outcome the event id was recorded with.
func (s *Store) recordedPayment(ctx context.Context, eventID string) (stock.PaymentRecord, error) {
	rec := stock.PaymentRecord{Duplicate: true}
	err := s.sql.QueryRowContext(ctx, "SELECT outcome, reason FROM payment_events WHERE event_id = ?", eventID).Scan(&rec.Outcome, &rec.Reason)
	if err != nil {
		return stock.PaymentRecord{}, dbError("read payment", err)
	}
	return rec, nil
}

// PaymentEvent is one row of payment_events.
type PaymentEvent struct {
	stock.Payment
	stock.PaymentRecord
}

// PaymentEvents reads the payments recorded for an order, oldest first.
func (s *Store) PaymentEvents(ctx context.Context, orderID string) ([]PaymentEvent, error) {
	rows, err := s.sql.QueryContext(ctx, "SELECT event_id, type, order_id, amount, currency, outcome, reason, received_at FROM payment_events WHERE order_id = ? ORDER BY received_at, event_id", orderID)
	if err != nil {
		return nil, dbError("read payments", err)
	}
	defer rows.Close()
	var out []PaymentEvent
	for rows.Next() {
		var e PaymentEvent
		if err := rows.Scan(&e.EventID, &e.Type, &e.OrderID, &e.Amount, &e.Currency, &e.Outcome, &e.Reason, &e.ReceivedAt); err != nil {
			return nil, dbError("read payments", err)
		}
		e.ReceivedAt = e.ReceivedAt.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("read payments", err)
	}
	return out, nil
}

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
