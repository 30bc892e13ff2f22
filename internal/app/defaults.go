package app

import (
	"strings"
	"time"

	"github.com/seckill/seckill/internal/handler"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/shop"
)

// The defaults of Config, each defined once: those the domain packages own
// (shop, queue, gate) are theirs, named here; the wiring, the validation,
// the flag help and the configuration table in docs/OPERATIONS.md (checked by
// TestReadmeListsEverySetting) all read them from here.
const (
	DefaultAddr       = ":8080"
	DefaultSQLitePath = "seckill.db"
	DefaultStrategy   = string(shop.DefaultStrategy)
	DefaultKeyPrefix  = gate.DefaultKeyPrefix
	// The values of SECKILL_REDIS_MODE.
	RedisModeSingle  = "single"
	RedisModeCluster = "cluster"
	DefaultRedisMode = RedisModeSingle
	// DefaultRequestTimeout bounds each request's work; at most
	// maxRequestTimeout, which keeps it under the server's write timeout.
	DefaultRequestTimeout = shop.DefaultRequestTimeout
	maxRequestTimeout     = time.Minute
	// DefaultLockWait and DefaultDBTimeout apply unless half the request
	// timeout is less; the embedded SQLite, whose one connection queues
	// every write, gets DefaultSQLiteDBTimeout.
	DefaultLockWait        = shop.DefaultLockWait
	DefaultDBTimeout       = shop.DefaultWriteTimeout
	DefaultSQLiteDBTimeout = 5 * time.Second
	// DefaultRedisTimeout bounds each Redis call, so an outage answers 503
	// within about a second; the embedded Redis cannot have a network
	// outage but is slow under a stampede.
	DefaultRedisTimeout         = time.Second
	DefaultEmbeddedRedisTimeout = 10 * time.Second
	DefaultShutdownTimeout      = 15 * time.Second
	DefaultLogLevel             = "info"
	// DefaultRateUser lets a user place a burst of 10 orders and 10 a
	// second after it: plenty for a person retrying (with idempotent
	// replays), and far above the 2-per-user bursts of the load tests; a
	// bot hammering one account gets 429s. It applies with a real Redis
	// only: the embedded one runs Lua several times slower, a stampede on
	// it already nears its timeouts, and a single process needs no shared
	// budget.
	DefaultRateUser = "10/s"
	DefaultRateIP   = "0"
	// DefaultMissingItemTTL is how long an unknown item id is answered
	// from memory; an item created on another instance is unknown there
	// at most that long, so it stays short.
	DefaultMissingItemTTL = shop.DefaultMissingItemTTL
	maxMissingItemTTL     = time.Minute
	// DefaultReadyzTTL is how long a /readyz check answers: a flood of the
	// public /readyz costs one check a second at most.
	DefaultReadyzTTL = time.Second
	maxReadyzTTL     = time.Minute
	// DefaultWriters is how many lua-async writers a process runs.
	DefaultWriters     = queue.DefaultWriters
	maxWriters         = 64
	DefaultWriterBatch = queue.DefaultBatch
	maxWriterBatch     = 5000
	// DefaultClaimIdle is the backstop claim of a live writer's stale
	// entries; minClaimIdle is the least accepted: a writer renews its
	// claim every quarter of it, so only a writer that could not reach
	// Redis for seconds on end can lose its entries to the backstop.
	DefaultClaimIdle       = queue.DefaultClaimIdle
	minClaimIdle           = 5 * time.Second
	DefaultMaxDeliveries   = queue.DefaultMaxDeliveries
	maxMaxDeliveries       = 1000
	DefaultAsyncDurability = string(queue.DefaultDurability)
	// DefaultPaymentTimeout is the payment deadline of an order unless
	// SECKILL_PAYMENT_TIMEOUT says otherwise.
	DefaultPaymentTimeout = 15 * time.Minute
	// DefaultCurrency is the currency prices are in (SECKILL_CURRENCY).
	DefaultCurrency = handler.DefaultCurrency
	// DefaultUserJWKSRefresh is how often an identity provider's key set
	// is read again; a token of a key it does not hold reads it too.
	DefaultUserJWKSRefresh = handler.DefaultUserKeysRefresh
	minUserJWKSRefresh     = time.Minute
	maxUserJWKSRefresh     = 24 * time.Hour
	// DefaultRoomPoWBits: the proof-of-work of joining a waiting room is
	// off unless SECKILL_ROOM_POW_BITS turns it on.
	DefaultRoomPoWBits = 0
	// DefaultRoomRateIP lets one client address take a burst of 20
	// waiting-room tickets and 10 a second after it: a household or an
	// office joins at once, while one machine inventing user ids (sybils:
	// 1,780 joins a second measured, issue 33) gets 20 places, not the
	// line's head. Like DefaultRateUser, with a real Redis only.
	DefaultRoomRateIP = "10/s:20"
	// maxRoomMaxTickets bounds SECKILL_ROOM_MAX_TICKETS: about 2 GB of
	// Redis for one room at the measured bytes a ticket.
	maxRoomMaxTickets = 10_000_000
)

// shortDuration writes d as a person would: 15m, not 15m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
