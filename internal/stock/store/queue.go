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

// Queued is one lua-async order as its item's stream holds it.
type Queued struct {
	Entry   string // the stream entry id
	ID      string // order id
	ItemID  int64
	UserID  string
	Key     string    // Idempotency-Key, "" = none
	Created time.Time // when the gate admitted it
	Epoch   int64     // the queue epoch of the gate that admitted it
}

// Persisted says what one batch of queued orders came to. Every order of the
// batch is in exactly one of the three.
type Persisted struct {
	Written []*Queued          // inserted by this call
	Already []*Queued          // in the database before (a redelivery): done
	Failed  map[string]string  // order id -> reason (API code), recorded by this call
	byID    map[string]*Queued // every order of the batch
}

// errQueuedClash means a concurrent writer inserted some of the batch's
// rows first; running the batch again sorts them out.
var errQueuedClash = errors.New("queued orders clash with a concurrent write")

// ErrQueueLost means a batch comes from a queue Redis lost: the item's gate
// was rebuilt without it (its queue epoch moved on), so it is not written.
var ErrQueueLost = errors.New("the batch comes from a queue Redis lost; the gate was rebuilt without it")

// PersistQueued writes a batch of one item's queued orders in one
// transaction: a multi-row INSERT and UPDATE items SET sold = sold + k WHERE
// sold + k <= stock, rows affected checked. It is idempotent: orders already
// written or already recorded as failed count as done. An order whose user
// already holds another order, or for which no unit is left, is recorded in
// order_failures with the reason, in the same transaction. The order of the
// batch (stream order, which is admission order) decides who gets the last
// units. Every order of the batch carries the same queue epoch, and the
// batch commits only while the item has it (ErrQueueLost otherwise).
//
// The first try is optimistic: unless one of the batch's orders is already
// recorded as failed, it does not read which of the batch's users and keys
// already hold an order, and lets the unique keys say so instead. Any
// duplicate rolls that try back whole (errQueuedClash), and the batch runs
// again reading them first, so the outcome is the same; only a batch that
// meets nothing in the database, the usual one, skips the read.
func (s *Store) PersistQueued(ctx context.Context, itemID int64, batch []*Queued, now time.Time) (Persisted, error) {
	return s.persistQueued(ctx, itemID, itemsRow, batch, now)
}

// itemsRow is persistQueued's row for an item without bucket rows: its
// items row.
const itemsRow = -1

// persistQueued is PersistQueued on the items row (b = itemsRow) or on
// bucket row b (PersistQueuedBucket).
func (s *Store) persistQueued(ctx context.Context, itemID int64, b int, batch []*Queued, now time.Time) (Persisted, error) {
	careful := false
	for attempt := 0; ; attempt++ {
		res, err := s.persistQueuedOnce(ctx, itemID, b, batch, now, careful)
		if errors.Is(err, errQueuedClash) && attempt < 4 {
			careful = true
			continue
		}
		return res, err
	}
}

func (s *Store) persistQueuedOnce(ctx context.Context, itemID int64, b int, batch []*Queued, now time.Time, careful bool) (Persisted, error) {
	res := Persisted{Failed: map[string]string{}, byID: make(map[string]*Queued, len(batch))}
	if !careful {
		failed, err := s.anyFailed(ctx, batch)
		if err != nil {
			return res, err
		}
		careful = failed
	}
	var known knownState
	if careful {
		var err error
		if known, err = s.knownQueued(ctx, itemID, batch); err != nil {
			return res, err
		}
	} else {
		known = newKnownState()
	}
	var accept []*Queued
	keyNull := map[string]bool{} // order ids whose key another user's order holds
	for _, q := range batch {
		if _, dup := res.byID[q.ID]; dup {
			continue // the same entry twice (claimed and read again)
		}
		res.byID[q.ID] = q
		switch {
		case known.ids[q.ID]:
			res.Already = append(res.Already, q)
		case known.users[q.UserID] != "":
			res.Failed[q.ID] = "already_purchased"
		default:
			if q.Key != "" {
				if u, held := known.keys[q.Key]; held && u != q.UserID {
					keyNull[q.ID] = true
				} else {
					known.keys[q.Key] = q.UserID
				}
			}
			known.users[q.UserID] = q.ID
			accept = append(accept, q)
		}
	}
	limit := len(accept)
	for {
		for _, q := range accept[limit:] {
			res.Failed[q.ID] = "sold_out"
		}
		var err error
		if b == itemsRow {
			err = s.writeQueued(ctx, itemID, batch[0].Epoch, accept[:limit], keyNull, res.Failed, res.byID, now)
		} else {
			err = s.writeQueuedBucket(ctx, itemID, b, batch[0].Epoch, accept[:limit], keyNull, res.Failed, res.byID, now)
		}
		if !errors.Is(err, ErrBatchRefused) {
			if err == nil {
				res.Written = accept[:limit]
			}
			return res, err
		}
		// Fewer units left than orders, or a lost queue.
		left, epoch, err := s.queuedRemaining(ctx, itemID, b)
		if err != nil {
			return res, err
		}
		if epoch != batch[0].Epoch {
			return res, fmt.Errorf("item %d has queue epoch %d, the batch %d: %w", itemID, epoch, batch[0].Epoch, ErrQueueLost)
		}
		limit = int(max(0, min(left, int64(limit-1))))
		for _, q := range accept[limit:] {
			res.Failed[q.ID] = "sold_out"
		}
	}
}

// anyFailed reports whether any of the batch's orders is recorded in
// order_failures: a dead letter moved back to the stream can be one, and
// the unique keys of orders would not stop it from being written.
func (s *Store) anyFailed(ctx context.Context, batch []*Queued) (bool, error) {
	ids := make([]any, len(batch))
	for i, q := range batch {
		ids[i] = q.ID
	}
	var one int
	err := s.sql.QueryRowContext(ctx, "SELECT 1 FROM order_failures WHERE id IN ("+placeholders(len(ids))+") LIMIT 1", ids...).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, dbError("read failed orders", err)
	}
	return true, nil
}

// knownState is what the database already holds for a batch's orders.
type knownState struct {
	ids   map[string]bool   // order ids written or recorded as failed
	users map[string]string // user -> order id held for the item
	keys  map[string]string // idempotency key -> user holding it
}

// newKnownState is a database that holds nothing of the batch yet.
func newKnownState() knownState {
	return knownState{ids: map[string]bool{}, users: map[string]string{}, keys: map[string]string{}}
}

// knownQueued reads, in one round trip, which of the batch's orders are
// already done and which users and keys already hold an order of the item.
func (s *Store) knownQueued(ctx context.Context, itemID int64, batch []*Queued) (knownState, error) {
	k := newKnownState()
	var users, keys, ids []any
	for _, q := range batch {
		users = append(users, q.UserID)
		ids = append(ids, q.ID)
		if q.Key != "" {
			keys = append(keys, q.Key)
		}
	}
	var sb strings.Builder
	args := []any{itemID}
	sb.WriteString("SELECT id, user_id, COALESCE(idempotency_key, ''), 0 FROM orders WHERE item_id = ? AND (user_id IN (")
	sb.WriteString(placeholders(len(users)))
	args = append(args, users...)
	if len(keys) > 0 {
		sb.WriteString(") OR idempotency_key IN (")
		sb.WriteString(placeholders(len(keys)))
		args = append(args, keys...)
	}
	sb.WriteString(")) UNION ALL SELECT id, user_id, '', 1 FROM order_failures WHERE id IN (")
	sb.WriteString(placeholders(len(ids)))
	sb.WriteString(")")
	args = append(args, ids...)
	rows, err := s.sql.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return k, dbError("read queued orders", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, user, key string
		var failed bool
		if err := rows.Scan(&id, &user, &key, &failed); err != nil {
			return k, dbError("read queued orders", err)
		}
		k.ids[id] = true
		if !failed {
			k.users[user] = id
			if key != "" {
				k.keys[key] = user
			}
		}
	}
	if err := rows.Err(); err != nil {
		return k, dbError("read queued orders", err)
	}
	return k, nil
}

// writeQueued inserts orders and takes their units, and records failures, in
// one transaction. ErrBatchRefused: fewer units left than orders (nothing
// written); errQueuedClash: a concurrent writer got some rows in first.
func (s *Store) writeQueued(ctx context.Context, itemID, epoch int64, orders []*Queued, keyNull map[string]bool,
	failed map[string]string, byID map[string]*Queued, now time.Time) error {
	return s.writeQueuedTx(ctx, itemID, orders, keyNull, failed, byID, now,
		func(tx *sql.Tx) error {
			// The epoch fences a batch from a lost queue out, atomically with
			// the units it takes; this row lock also orders the batch against
			// a gate build (which holds it, see WithItemLocked).
			r, err := tx.ExecContext(ctx, "UPDATE items SET sold = sold + ?, updated_at = ? WHERE id = ? AND sold + ? <= stock AND queue_epoch = ?",
				len(orders), now, itemID, len(orders), epoch)
			if err != nil {
				return dbError("take units", err)
			}
			if taken, err := oneRow(r, "take units"); err != nil {
				return err
			} else if !taken {
				return ErrBatchRefused
			}
			return nil
		},
		func(tx *sql.Tx) error {
			var have int64
			if err := tx.QueryRowContext(ctx, "SELECT queue_epoch FROM items WHERE id = ?", itemID).Scan(&have); err != nil {
				return dbError("read queue epoch", err)
			}
			if have != epoch {
				return fmt.Errorf("item %d has queue epoch %d, the batch %d: %w", itemID, have, epoch, ErrQueueLost)
			}
			return nil
		})
}

// writeQueuedTx is the transaction of writeQueued and writeQueuedBucket:
// the orders' INSERT and take (which takes their units), or, with no
// order to write, fenced (which checks the queue epoch); then the failures.
// The batch's events (created for each order written, failed for each
// failure) go in the same transaction, one multi-row INSERT each.
func (s *Store) writeQueuedTx(ctx context.Context, itemID int64, orders []*Queued, keyNull map[string]bool,
	failed map[string]string, byID map[string]*Queued, now time.Time, take, fenced func(tx *sql.Tx) error) error {
	return s.inTx(ctx, nil, func(tx *sql.Tx) error {
		if len(orders) > 0 {
			args := make([]any, 0, orderColumns*len(orders))
			deadline := s.deadline(now) // the payment window starts once the order is written
			for _, q := range orders {
				key := q.Key
				if keyNull[q.ID] {
					key = ""
				}
				args = orderValues(args, q.ID, itemID, q.UserID, key, deadline, q.Created, now)
			}
			if _, err := tx.ExecContext(ctx, insertOrders+rowsOf(len(orders), orderColumns), args...); err != nil {
				if e := insertError(err); errors.Is(e, stock.ErrAlreadyPurchased) || errors.Is(e, stock.ErrIdempotencyConflict) || isDupKey(err) {
					return errQueuedClash
				}
				return dbError("insert queued orders", err)
			}
			if err := take(tx); err != nil {
				return err
			}
			evs := make([]Event, len(orders))
			for i, q := range orders {
				evs[i] = Event{ID: NewEventID(), Type: EventCreated, OrderID: q.ID, ItemID: itemID, UserID: q.UserID, Status: stock.StatusCreated, At: now}
			}
			if err := s.appendEvents(ctx, tx, evs...); err != nil {
				return err
			}
		} else if len(failed) > 0 {
			if err := fenced(tx); err != nil {
				return err
			}
		}
		if len(failed) > 0 {
			args := make([]any, 0, 7*len(failed))
			for id, reason := range failed {
				q := byID[id]
				var key *string
				if q.Key != "" {
					key = &q.Key
				}
				args = append(args, q.ID, itemID, q.UserID, key, reason, q.Created, now)
			}
			q := "INSERT INTO order_failures (id, item_id, user_id, idempotency_key, reason, created_at, failed_at) VALUES " +
				rowsOf(len(failed), 7)
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				if isDupKey(err) {
					return errQueuedClash
				}
				return dbError("record failed orders", err)
			}
			evs := make([]Event, 0, len(failed))
			for id := range failed {
				q := byID[id]
				evs = append(evs, Event{ID: NewEventID(), Type: EventFailed, OrderID: q.ID, ItemID: itemID, UserID: q.UserID, Status: stock.StatusFailed, At: now})
			}
			if err := s.appendEvents(ctx, tx, evs...); err != nil {
				return err
			}
		}
		return nil
	})
}

// queuedRemaining reads, after a batch was refused, the units the item has
// left and the queue epoch of the batch's row (the items row, or bucket
// row b, whose free units are the whole item's sum).
func (s *Store) queuedRemaining(ctx context.Context, itemID int64, b int) (left, epoch int64, err error) {
	if b == itemsRow {
		err = s.sql.QueryRowContext(ctx, "SELECT stock - sold, queue_epoch FROM items WHERE id = ?", itemID).Scan(&left, &epoch)
	} else {
		err = s.sql.QueryRowContext(ctx, "SELECT COALESCE(SUM(stock - sold), 0), COALESCE(MAX(CASE WHEN bucket = ? THEN queue_epoch END), -1) FROM item_stock WHERE item_id = ?",
			b, itemID).Scan(&left, &epoch)
	}
	if err != nil {
		return 0, 0, dbError("read remaining", err)
	}
	return left, epoch, nil
}

// FailedOrder reads an order recorded in order_failures.
func (s *Store) FailedOrder(ctx context.Context, id string) (*stock.Order, error) {
	var o stock.Order
	err := s.sql.QueryRowContext(ctx, "SELECT id, item_id, user_id, reason, created_at, failed_at FROM order_failures WHERE id = ?", id).
		Scan(&o.ID, &o.ItemID, &o.UserID, &o.Reason, &o.CreatedAt, &o.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("order %s: %w", id, stock.ErrNotFound)
	}
	if err != nil {
		return nil, dbError("read failed order", err)
	}
	o.Status = stock.StatusFailed
	o.CreatedAt, o.UpdatedAt = o.CreatedAt.UTC(), o.UpdatedAt.UTC()
	return &o, nil
}
