package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
)

// Order events: the transactional outbox (docs/DESIGN.md, "Order
// events"). Every change of an order writes its row in order_events in
// the same transaction as the change, so a row exists exactly when its
// change committed, a COMMIT cut half-way included. A relay
// (internal/outbox) publishes the rows, in seq order, and marks them.

// Event types.
const (
	EventCreated   = "created"
	EventPaid      = "paid"
	EventCancelled = "cancelled"
	EventExpired   = "expired"
	EventFailed    = "failed"
	// EventRefundDue is a payment that arrived for an order no longer
	// payable (RecordPayment writes it).
	EventRefundDue = "refund_due"
)

// Event is one row of order_events. Its JSON form is the body the relay
// publishes and the admin feed lists.
type Event struct {
	ID      string    `json:"id"` // a UUIDv7, the Nats-Msg-Id
	Type    string    `json:"type"`
	OrderID string    `json:"order_id"`
	ItemID  int64     `json:"item_id"`
	UserID  string    `json:"user_id"`
	Status  string    `json:"status"` // the order's status after the change
	At      time.Time `json:"at"`

	// Seq is the row's place in the outbox (write order).
	Seq int64 `json:"-"`
	// PubSeq is its place in delivery order, 0 while unpublished.
	PubSeq int64 `json:"-"`
}

// NewEventID is a new event id: a UUIDv7, so ids sort by time.
func NewEventID() string { return uuid.Must(uuid.NewV7()).String() }

// Execer is a transaction that runs statements: *sql.Tx, or a gorm
// transaction's tx.Statement.ConnPool.
type Execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

const insertEvents = "INSERT INTO order_events (id, type, order_id, item_id, user_id, status, at) VALUES "

const eventColumns = 7

// AppendEvents writes evs in tx, the transaction of the change they tell
// of, in one statement. An event without an ID gets a new one, one
// without At gets Now().
func AppendEvents(ctx context.Context, tx Execer, evs ...Event) error {
	if len(evs) == 0 {
		return nil
	}
	now := Now()
	args := make([]any, 0, eventColumns*len(evs))
	for _, e := range evs {
		if e.ID == "" {
			e.ID = NewEventID()
		}
		if e.At.IsZero() {
			e.At = now
		}
		args = append(args, e.ID, e.Type, e.OrderID, e.ItemID, e.UserID, e.Status, e.At.UTC())
	}
	if _, err := tx.ExecContext(ctx, insertEvents+rowsOf(len(evs), eventColumns), args...); err != nil {
		return dbError("write order events", err)
	}
	return nil
}

// appendEvents is AppendEvents unless the store writes no events
// (Options.WithoutEvents).
func (s *Store) appendEvents(ctx context.Context, tx Execer, evs ...Event) error {
	if s.withoutEvents {
		return nil
	}
	return AppendEvents(ctx, tx, evs...)
}

// createdEvents are the created events of a batch of orders written at now.
func createdEvents(batch []OrderWrite, now time.Time) []Event {
	evs := make([]Event, len(batch))
	for i, w := range batch {
		evs[i] = Event{ID: NewEventID(), Type: EventCreated, OrderID: w.Order.ID, ItemID: w.Order.ItemID,
			UserID: w.Order.UserID, Status: stock.StatusCreated, At: now}
	}
	return evs
}

// appendOrderEvent writes, in tx, the event typ of order id as the
// order's row now is (after the change tx made to it).
func (s *Store) appendOrderEvent(ctx context.Context, tx *sql.Tx, typ, id string, now time.Time) error {
	if s.withoutEvents {
		return nil
	}
	res, err := tx.ExecContext(ctx, "INSERT INTO order_events (id, type, order_id, item_id, user_id, status, at) SELECT ?, ?, id, item_id, user_id, status, ? FROM orders WHERE id = ?",
		NewEventID(), typ, now, id)
	if err != nil {
		return dbError("write order event", err)
	}
	if ok, err := oneRow(res, "write order event"); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("database: order %s vanished inside the transaction that changed it", id)
	}
	return nil
}
