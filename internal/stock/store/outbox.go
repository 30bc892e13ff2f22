package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The outbox's reading side: the relay's batches, its marks and lease, the
// admin feed and the backlog metrics.

const eventSelect = "SELECT seq, COALESCE(pub_seq, 0), id, type, order_id, item_id, user_id, status, at FROM order_events "

func scanEvents(rows *sql.Rows, op string) ([]Event, error) {
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.Seq, &e.PubSeq, &e.ID, &e.Type, &e.OrderID, &e.ItemID, &e.UserID, &e.Status, &e.At); err != nil {
			return nil, dbError(op, err)
		}
		e.At = e.At.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(op, err)
	}
	return out, nil
}

// UnpublishedEvents reads up to limit events not yet published, in seq
// order (an order's events in the order they happened).
func (s *Store) UnpublishedEvents(ctx context.Context, limit int) ([]Event, error) {
	rows, err := s.sql.QueryContext(ctx, eventSelect+"WHERE pub_seq IS NULL ORDER BY seq LIMIT ?", limit)
	if err != nil {
		return nil, dbError("read unpublished events", err)
	}
	return scanEvents(rows, "read unpublished events")
}

// EventsAfter reads up to limit published events whose delivery sequence
// (PubSeq, the admin feed's cursor) is above after, in delivery order.
// Delivery order is assigned by the one relay holding the lease, so a
// cursor never skips an event.
func (s *Store) EventsAfter(ctx context.Context, after int64, limit int) ([]Event, error) {
	rows, err := s.sql.QueryContext(ctx, eventSelect+"WHERE pub_seq > ? ORDER BY pub_seq LIMIT ?", after, limit)
	if err != nil {
		return nil, dbError("read events", err)
	}
	return scanEvents(rows, "read events")
}

// OrderEvents reads every event of one order, published or not, in seq
// order.
func (s *Store) OrderEvents(ctx context.Context, orderID string) ([]Event, error) {
	rows, err := s.sql.QueryContext(ctx, eventSelect+"WHERE order_id = ? ORDER BY seq", orderID)
	if err != nil {
		return nil, dbError("read order events", err)
	}
	return scanEvents(rows, "read order events")
}

// OutboxBacklog counts the unpublished events and gives the time of the
// oldest, the first in seq order (zero when there is none).
func (s *Store) OutboxBacklog(ctx context.Context) (n int64, oldest time.Time, err error) {
	if err = s.sql.QueryRowContext(ctx, "SELECT COUNT(*) FROM order_events WHERE pub_seq IS NULL").Scan(&n); err != nil {
		return 0, time.Time{}, dbError("read outbox backlog", err)
	}
	err = s.sql.QueryRowContext(ctx, "SELECT at FROM order_events WHERE pub_seq IS NULL ORDER BY seq LIMIT 1").Scan(&oldest)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return n, time.Time{}, nil
	case err != nil:
		return 0, time.Time{}, dbError("read outbox backlog", err)
	}
	return n, oldest.UTC(), nil
}

// ErrLeaseHeld means another relay holds the outbox lease.
var ErrLeaseHeld = errors.New("another relay holds the outbox lease")

// ErrMarkedElsewhere means some events of a batch were marked published
// by somebody else meanwhile: nothing of the batch was marked.
var ErrMarkedElsewhere = errors.New("events marked published elsewhere")

// OutboxLease is the right to publish and mark the outbox's events: on
// MySQL a named lock (GET_LOCK, per database) held by one connection of
// its own, released when the holder closes it or dies (its connection
// closes). Marks run on that connection, so a relay that lost it cannot
// mark. On SQLite (one process per file) the lease is always granted.
type OutboxLease struct {
	s    *Store
	conn *sql.Conn // nil on SQLite
}

const leaseName = "CONCAT('seckill.outbox.', LEFT(MD5(DATABASE()), 32))"

// AcquireOutboxLease takes the outbox lease, or answers ErrLeaseHeld at
// once when another relay holds it.
func (s *Store) AcquireOutboxLease(ctx context.Context) (*OutboxLease, error) {
	if s.sqlite {
		return &OutboxLease{s: s}, nil
	}
	conn, err := s.sql.Conn(ctx)
	if err != nil {
		return nil, dbError("outbox lease", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK("+leaseName+", 0)").Scan(&got); err != nil {
		_ = conn.Close()
		return nil, dbError("outbox lease", err)
	}
	if got.Int64 != 1 {
		_ = conn.Close()
		return nil, ErrLeaseHeld
	}
	return &OutboxLease{s: s, conn: conn}, nil
}

// Check tells whether the lease is still held (its connection alive and
// the lock its own).
func (l *OutboxLease) Check(ctx context.Context) error {
	if l.conn == nil {
		return nil
	}
	var mine sql.NullBool
	if err := l.conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK("+leaseName+") = CONNECTION_ID()").Scan(&mine); err != nil {
		return dbError("outbox lease", err)
	}
	if !mine.Bool {
		return ErrLeaseHeld
	}
	return nil
}

// Close gives the lease up.
func (l *OutboxLease) Close() error {
	if l.conn == nil {
		return nil
	}
	_, _ = l.conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK("+leaseName+")")
	return l.conn.Close()
}

// MarkPublished records evs (a batch UnpublishedEvents read, published in
// its order) as published at now, giving them the next delivery sequence
// numbers in their order, in one transaction on the lease's connection.
func (l *OutboxLease) MarkPublished(ctx context.Context, evs []Event, now time.Time) error {
	if len(evs) == 0 {
		return nil
	}
	var tx *sql.Tx
	var err error
	if l.conn != nil {
		tx, err = l.conn.BeginTx(ctx, nil)
	} else {
		tx, err = l.s.sql.BeginTx(ctx, nil)
	}
	if err != nil {
		return dbError("begin", err)
	}
	defer func() { _ = tx.Rollback() }()
	var last int64
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(pub_seq), 0) FROM order_events").Scan(&last); err != nil {
		return dbError("read delivery sequence", err)
	}
	var sb strings.Builder
	sb.WriteString("UPDATE order_events SET published_at = ?, pub_seq = CASE seq")
	args := []any{now}
	for i, e := range evs {
		sb.WriteString(" WHEN ? THEN ?")
		args = append(args, e.Seq, last+int64(i)+1)
	}
	sb.WriteString(" END WHERE pub_seq IS NULL AND seq IN (" + placeholders(len(evs)) + ")")
	for _, e := range evs {
		args = append(args, e.Seq)
	}
	res, err := tx.ExecContext(ctx, sb.String(), args...)
	if err != nil {
		return dbError("mark events published", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return dbError("mark events published", err)
	} else if n != int64(len(evs)) {
		return fmt.Errorf("%d of %d: %w", int64(len(evs))-n, len(evs), ErrMarkedElsewhere)
	}
	if err := tx.Commit(); err != nil {
		return dbError("commit", err)
	}
	return nil
}
