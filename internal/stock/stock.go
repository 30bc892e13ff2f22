// Package stock is the flash-sale domain: items, orders, the errors callers
// branch on, and the strategies that sell units without overselling.
//
// MySQL (or SQLite in the embedded default) is the source of truth: every
// sale ends in a conditional UPDATE that cannot take sold above stock, plus a
// UNIQUE(item_id, user_id) key. Redis is the fast gate in front of it.
package stock

import "time"

// StrategyName names how an item is sold, as stored on the item and
// accepted by the API. (The strategies themselves, shop.Strategy, live in
// package shop.)
type StrategyName string

// The strategies.
const (
	// StrategyLua reserves a unit in the Redis gate, then writes the order
	// (group commit); 201 once it is in the database.
	StrategyLua StrategyName = "lua"
	// StrategyLock writes under the item's Redis lock with a fencing token;
	// no stock in Redis.
	StrategyLock StrategyName = "lock"
	// StrategyLuaAsync takes a unit in the gate and queues the order in a
	// Redis stream; 202 at once, writers persist it.
	StrategyLuaAsync StrategyName = "lua-async"
)

// Strategies lists every strategy name, in the order the API documents them.
var Strategies = []StrategyName{StrategyLua, StrategyLock, StrategyLuaAsync}

// Queued reports whether orders of this kind wait in a Redis queue, answered
// 202, before a writer puts them in the database: such an item has a queue
// (queued, unacknowledged, dead letters) to show.
func (n StrategyName) Queued() bool { return n == StrategyLuaAsync }

// Valid reports whether n names a strategy.
func (n StrategyName) Valid() bool {
	return n == StrategyLua || n == StrategyLock || n == StrategyLuaAsync
}

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
	Strategy   StrategyName
	// Buckets is how many Redis gate keys, each in its own hash slot, the
	// item's stock is split over (1 to MaxBuckets; 1 for items made before
	// buckets existed). Fixed at creation.
	Buckets   int
	StartsAt  *time.Time
	EndsAt    *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Remaining is what is left to sell according to the database.
func (it *Item) Remaining() int64 { return it.Stock - it.Sold }

// Window reports why the sale is closed at now, or nil when it is open.
func (it *Item) Window(now time.Time) error {
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

// Due reports whether o is created and its payment deadline has passed at now.
func (o *Order) Due(now time.Time) bool {
	return o.Status == StatusCreated && o.ExpiresAt != nil && !now.Before(*o.ExpiresAt)
}

// Expired reports whether o was cancelled by its payment deadline: it was
// cancelled at or after it (the cancellation's time is its updated_at, and
// a cancelled order never changes again).
func (o *Order) Expired() bool {
	return o.Status == StatusCancelled && o.ExpiresAt != nil && !o.UpdatedAt.Before(*o.ExpiresAt)
}

// NewItem is what an admin supplies to create an item.
type NewItem struct {
	Name       string
	Stock      int64
	PriceCents int64
	Strategy   StrategyName // empty: the service default
	Buckets    int          // 0: 1
	StartsAt   *time.Time
	EndsAt     *time.Time
}

// OrderRequest is one attempt to buy one unit.
type OrderRequest struct {
	ItemID         int64
	UserID         string
	IdempotencyKey string // optional
	// Pass says the order carries a waiting-room pass the caller verified
	// for this item and user. Without one, an item whose room is on refuses
	// the order with ErrPassRequired (checked where the sale is decided:
	// the order's transaction, or lua-async's admission script).
	Pass bool
}

// Limits on input. The Validate functions enforce them; the handler uses
// them in its own messages and to bound what it reads.
const (
	MaxStock      = 100_000_000       // most units an item may have
	MaxPriceCents = 1_000_000_000_000 // highest price, in cents
	MaxNameLen    = 200               // longest item name, in bytes
	MaxUserIDLen  = 64                // longest user id, in bytes
	MaxIdemKeyLen = 128               // longest Idempotency-Key, in bytes
	MaxBuckets    = 64                // most gate buckets an item may have
)

// ItemView is the public view of an item, what a buyer's page shows: its
// fixed fields and what is left to sell. Remaining comes from the Redis gate
// when the item has one (the database lags it by the orders in flight or
// queued), from the database otherwise, and is never negative. A view is
// shared and must not be changed.
type ItemView struct {
	ID         int64
	Name       string
	PriceCents int64
	Remaining  int64
	StartsAt   *time.Time
	EndsAt     *time.Time
}
