package shop

import (
	"log/slog"
	"time"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/queue"
)

// Defaults of Config. A zero field means its default.
const (
	DefaultStrategy       = stock.StrategyLua
	DefaultLockTTL        = 5 * time.Second
	DefaultLockWait       = 5 * time.Second
	DefaultIdempotencyTTL = queue.DefaultIdempotencyTTL
	DefaultRequestTimeout = 10 * time.Second
	DefaultWriteTimeout   = time.Second
	DefaultSweepInterval  = time.Second
	DefaultMissingItemTTL = time.Second
)

// Config tunes a Service. Zero values mean the documented defaults.
type Config struct {
	// DefaultStrategy is used for items created without one. Default
	// DefaultStrategy (lua).
	DefaultStrategy stock.StrategyName
	// KeyPrefix starts every Redis key. Default gate.DefaultKeyPrefix
	// (seckill).
	KeyPrefix string
	// LockTTL is the lease of the per-item lock. Default DefaultLockTTL (5s).
	LockTTL time.Duration
	// LockWait bounds how long an order waits for the item's lock. Default
	// DefaultLockWait (5s).
	LockWait time.Duration
	// IdempotencyTTL is how long an Idempotency-Key stays bound to its
	// user. Default DefaultIdempotencyTTL (24h).
	IdempotencyTTL time.Duration
	// RequestTimeout is the longest an order request lives (the handler's
	// bound): a caller without a deadline waits for its write at most this
	// long, and a lua reservation without an order is taken for an orphan
	// only once it is well older than this. Default DefaultRequestTimeout
	// (10s).
	RequestTimeout time.Duration
	// WriteTimeout bounds each step (a statement, the commit) of a lua or
	// lock order transaction (group commit), after the item's lock is
	// held: a stalled database answers 503 in about this long, while a
	// large batch on a busy database still gets a budget per step. Default
	// DefaultWriteTimeout (1s).
	WriteTimeout time.Duration
	// ReplayWait bounds how long a keyed replay waits for its original,
	// still in flight, to commit (within the replay's own deadline); one
	// that has not by then answers 503, to be retried with the same key.
	// Default RequestTimeout: as long as the original can still commit.
	ReplayWait time.Duration
	// RedisWait bounds how long an order's call through the gate's
	// pipeline (a reservation, an admission, an Idempotency-Key claim)
	// waits for Redis once sent: past it the order answers 503 (see
	// gate.PipelineOptions.Wait), so a Cluster master that stops
	// answering fails its own items fast. Default 0: the request's
	// deadline only.
	RedisWait time.Duration
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
	// LockObserver receives the item locks' events (metrics). Default none.
	LockObserver lock.Observer
	// Orders receives the outcome of every order that reached an item's
	// strategy (metrics). Default none.
	Orders OrderObserver
	// Queue tunes the lua-async queue and its writers (its IdempotencyTTL
	// is this Config's). Zero fields mean queue's defaults (queue.Default*).
	Queue queue.Config
	// SweepInterval is how often the sweeper expires orders past their
	// deadline and finishes stock returns that failed. Default
	// DefaultSweepInterval (1s); negative: no sweeper (tests call ExpireDue
	// and ReturnStock themselves).
	SweepInterval time.Duration
	// Lifecycle receives order transitions and stock returns (metrics).
	// Default none.
	Lifecycle LifecycleObserver
	// MissingItemTTL is how long the public paths (an item's page, its
	// orders) answer an item id the database said does not exist from
	// memory (see missingItems); an item created by another instance is
	// unknown here at most that long. Default DefaultMissingItemTTL (1s);
	// negative: off, every unknown id is read.
	MissingItemTTL time.Duration
	// Now is the clock that judges payment deadlines: a payment or a
	// cancellation, and the sweeper's expiry. Default time.Now. Tests set
	// one they move, so a deadline passes without waiting for it (a short
	// real payment timeout races a busy machine).
	Now func() time.Time
}

// OrderObserver receives order outcomes. It must be fast and safe for
// concurrent use.
type OrderObserver interface {
	// Order reports one order on strategy; err is nil for a sale or replay.
	Order(strategy stock.StrategyName, err error)
}

func (c *Config) withDefaults() {
	if c.MissingItemTTL == 0 {
		c.MissingItemTTL = DefaultMissingItemTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.DefaultStrategy == "" {
		c.DefaultStrategy = DefaultStrategy
	}
	if c.LockTTL == 0 {
		c.LockTTL = DefaultLockTTL
	}
	if c.LockWait == 0 {
		c.LockWait = DefaultLockWait
	}
	if c.IdempotencyTTL == 0 {
		c.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.ReplayWait == 0 {
		c.ReplayWait = c.RequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
}
