package stock

import "time"

// Reports the service gives about its Redis side, for operators.

// AsyncStats is the state of a lua-async item's queue.
type AsyncStats struct {
	// Queued counts orders admitted and not yet written (stream entries).
	Queued int64
	// Unacked counts those delivered to a writer that has not finished them.
	Unacked int64
	// DeadLetters counts entries parked in the dead-letter stream.
	DeadLetters int64
	// OldestAge is how long the oldest queued order has waited (0: none).
	OldestAge time.Duration
}

// DeadLetter is one entry of an item's dead-letter stream.
type DeadLetter struct {
	Entry  string // id in the dead-letter stream
	Order  Order  // the order as it was queued (status pending)
	Reason string
	At     time.Time
}

// Reconciliation compares an item's Redis state with the database, the
// source of truth, and says what (if anything) was repaired.
type Reconciliation struct {
	ItemID   int64
	Strategy StrategyName
	// Gated says the item keeps stock in the Redis gate (lua, lua-async):
	// only then are the Redis fields below compared.
	Gated bool

	// The database.
	Stock, Sold  int64
	Orders       int64 // order rows not cancelled
	FailedOrders int64 // lua-async orders recorded as failed

	// Redis (the gate: lua and lua-async).
	GatePresent bool
	GateStock   int64
	GateTaken   int64
	SoldOutMark bool  // the gate refuses orders until the stock changes
	Buyers      int64 // entries in the buyers hash
	Queued      int64 // lua-async: orders queued and not yet written
	DeadLetters int64 // lua-async: entries in the dead-letter stream
	Reserved    int64 // lua: reservations young enough to be in flight
	Orphaned    int64 // lua: reservations over a minute old with no order

	// ExpectedTaken is what the gate should have taken: sold plus the
	// orders in flight (queued, or reserved and being written).
	ExpectedTaken int64

	Drift    []string // empty: Redis agrees with the database
	Repaired bool
	Note     string // why a repair was not made, or what it did
}
