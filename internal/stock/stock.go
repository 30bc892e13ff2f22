// Package stock is the flash-sale domain: items, orders, the errors callers
// branch on, and the strategies that sell units without overselling.
//
// MySQL (or SQLite in the embedded default) is the source of truth: every
// sale ends in a conditional UPDATE that cannot take sold above stock, plus a
// UNIQUE(item_id, user_id) key. Redis is the fast gate in front of it.
package stock

import (
	"errors"
	"time"
)

// Strategy names as stored on items and accepted by the API.
const (
	StrategyLua      = "lua"
	StrategyLock     = "lock"
	StrategyLuaAsync = "lua-async"
)

// Order statuses. An order is created when it is sold, then paid or
// cancelled, once: cancelled (by its user, or because its payment deadline
// passed) returns its unit to stock. Pending is an order a strategy has
// accepted but not yet written to the database.
const (
	// StatusPending is a lua-async order admitted by the gate and queued in
	// Redis, not yet written to the database.
	StatusPending   = "pending"
	StatusCreated   = "created"
	StatusPaid      = "paid"
	StatusCancelled = "cancelled"
	// StatusFailed is a lua-async order the database refused after it was
	// admitted (possible only after Redis lost data); Reason says why.
	StatusFailed = "failed"
)

// Item is a unit of stock on sale.
type Item struct {
	ID         int64
	Name       string
	PriceCents int64
	Stock      int64
	Sold       int64
	Strategy   string
	StartsAt   *time.Time
	EndsAt     *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Remaining is what is left to sell according to the database.
func (it *Item) Remaining() int64 { return it.Stock - it.Sold }

// window reports why the sale is closed at now, or nil when it is open.
func (it *Item) window(now time.Time) error {
	if it.StartsAt != nil && now.Before(*it.StartsAt) {
		return ErrSaleNotStarted
	}
	if it.EndsAt != nil && !now.Before(*it.EndsAt) {
		return ErrSaleEnded
	}
	return nil
}

// Order is one unit sold to one user.
type Order struct {
	ID     string
	ItemID int64
	UserID string
	Status string
	// Reason is why a failed order failed (an API error code), else "".
	Reason string
	// ExpiresAt is the payment deadline: a created order still unpaid then
	// is cancelled and its unit returned. Nil: it never expires.
	ExpiresAt *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// due reports whether o is created and its payment deadline has passed at now.
func (o *Order) due(now time.Time) bool {
	return o.Status == StatusCreated && o.ExpiresAt != nil && !now.Before(*o.ExpiresAt)
}

// expired reports whether o was cancelled by its payment deadline: it was
// cancelled at or after it (the cancellation's time is its updated_at, and
// a cancelled order never changes again).
func (o *Order) expired() bool {
	return o.Status == StatusCancelled && o.ExpiresAt != nil && !o.UpdatedAt.Before(*o.ExpiresAt)
}

// NewItem is what an admin supplies to create an item.
type NewItem struct {
	Name       string
	Stock      int64
	PriceCents int64
	Strategy   string // empty: the service default
	StartsAt   *time.Time
	EndsAt     *time.Time
}

// OrderRequest is one attempt to buy one unit.
type OrderRequest struct {
	ItemID         int64
	UserID         string
	IdempotencyKey string // optional
}

// Limits on input, shared by the handler's validation and the domain.
const (
	MaxStock      = 100_000_000
	MaxPriceCents = 1_000_000_000_000
	MaxNameLen    = 200
	MaxUserIDLen  = 64
	MaxIdemKeyLen = 128
)

// Sentinel errors. Infrastructure failures are wrapped into ErrUnavailable;
// callers test them with errors.Is.
var (
	ErrNotFound            = errors.New("not found")
	ErrInvalid             = errors.New("invalid input")
	ErrSoldOut             = errors.New("sold out")
	ErrAlreadyPurchased    = errors.New("already purchased")
	ErrSaleNotStarted      = errors.New("sale not started")
	ErrSaleEnded           = errors.New("sale ended")
	ErrStockBelowSold      = errors.New("stock below sold")
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")
	ErrOrderPaid           = errors.New("order already paid")
	ErrOrderCancelled      = errors.New("order cancelled")
	ErrOrderExpired        = errors.New("order expired: its payment deadline passed")
	ErrOrderPending        = errors.New("order not yet persisted")
	// ErrOrderFailed is a lua-async order the database refused after it was
	// queued (status failed): it can be neither paid nor cancelled.
	ErrOrderFailed = errors.New("order failed: the database refused it after it was queued")
	ErrUnavailable = errors.New("backend unavailable")
)
