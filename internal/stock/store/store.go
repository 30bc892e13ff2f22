// Package store is the source of truth: items and orders in MySQL (or
// SQLite, embedded). Every sale ends here in a conditional UPDATE that
// cannot take sold above stock, next to UNIQUE(item_id, user_id): that is
// what makes oversell and a second order per buyer impossible, whatever
// Redis says.
//
// gorm serves the cold paths (creating and reading items, reading orders);
// database/sql serves the statements whose condition is the guarantee
// (orders, group commit, fenced and conditional UPDATEs, the lifecycle's
// transitions), each run through one transaction helper (inTx). Errors are
// classified where each statement runs: a domain outcome (stock.ErrSoldOut,
// ...) or, through dbError, stock.ErrUnavailable for an outage.
package store

import (
	"context"
	"database/sql"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/stock"
)

// DefaultPaymentTimeout is Options.PaymentTimeout's default: orders never
// expire.
const DefaultPaymentTimeout time.Duration = 0

// Options tunes a Store. A nil *Options means every default.
type Options struct {
	// PaymentTimeout is how long after its sale an order may be paid; an
	// order unpaid by then is cancelled (by the shop's sweeper) and its
	// unit returned. Default DefaultPaymentTimeout (0): never. Negative is
	// refused by New.
	PaymentTimeout time.Duration
	// WithoutEvents turns the order events off: no change writes its row
	// in order_events. Only for measuring what the outbox costs
	// (loadtest); a service always writes them.
	WithoutEvents bool
}

// Store reads and writes items and orders.
type Store struct {
	db     *gorm.DB
	sql    *sql.DB // the hot path, without gorm's per-call work
	sqlite bool    // one connection, serial transactions, no FOR UPDATE

	paymentTimeout time.Duration
	withoutEvents  bool

	// moveHook, when set (by tests), runs inside a move between bucket
	// rows, after the donors' UPDATEs and before the recipient's.
	moveHook func(ctx context.Context, tx *sql.Tx)
	// takenHook, when set (by tests), runs inside a batch's transaction
	// (an item of one bucket) once its UPDATE took the units, just before
	// COMMIT: the moment another writer's conflict or a cut matters.
	takenHook func(ctx context.Context, tx *sql.Tx)
}

// New wraps an open gorm handle whose schema is migrated.
func New(db *gorm.DB, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.PaymentTimeout < 0 {
		return nil, stock.Invalidf("payment timeout %s is negative", o.PaymentTimeout)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, dbError("open", err)
	}
	return &Store{db: db, sql: sqlDB, sqlite: db.Dialector.Name() == "sqlite", paymentTimeout: o.PaymentTimeout, withoutEvents: o.WithoutEvents}, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.sql.PingContext(ctx); err != nil {
		return dbError("ping", err)
	}
	return nil
}

// deadline is the payment deadline of an order sold at now, nil for none.
func (s *Store) deadline(now time.Time) *time.Time {
	if s.paymentTimeout <= 0 {
		return nil
	}
	d := now.Add(s.paymentTimeout)
	return &d
}

// Created fills in what the database holds for an order just written at now.
func (s *Store) Created(o *stock.Order, now time.Time) {
	o.Status, o.ExpiresAt, o.CreatedAt, o.UpdatedAt = stock.StatusCreated, s.deadline(now), now, now
}

// Now is the current time at the precision DATETIME(6) keeps, so what a
// 201 answer says equals what a later read returns.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
