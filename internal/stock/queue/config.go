package queue

import (
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/stock"
)

// Group is the consumer group every writer of every process joins, on
// every item's stream.
const Group = "writers"

// Defaults of Config. A zero field means its default.
const (
	// DefaultWriters is how many writer goroutines a process runs.
	DefaultWriters = 2
	// NoWriters runs none: this process only admits; another process
	// (seckill worker) writes.
	NoWriters = -1
	// DefaultBatch is the most orders a writer reads, and writes in one
	// transaction, at a time (8 placeholders each, well under MySQL's
	// 65,535).
	DefaultBatch = 500
	// DefaultBlock is how long a writer's XREADGROUP waits for entries.
	DefaultBlock = 200 * time.Millisecond
	// DefaultClaimIdle is how long an entry may sit delivered but
	// unacknowledged before another writer claims it.
	DefaultClaimIdle = 30 * time.Second
	// DefaultLease is how long a writer's liveness lease lives without a
	// heartbeat.
	DefaultLease = time.Second
	// DefaultMaxDeliveries is how many deliveries an entry gets before it
	// goes to the dead-letter stream.
	DefaultMaxDeliveries = 5
	// DefaultQueuedOrderTTL bounds the life of a queued order's marker.
	DefaultQueuedOrderTTL = 7 * 24 * time.Hour
	// DefaultDurability is what a 202 waits for.
	DefaultDurability = DurabilityMemory
	// DefaultDurabilityCheck is how often DurabilityFsync re-reads Redis's
	// settings.
	DefaultDurabilityCheck = 5 * time.Second
	// DefaultIdempotencyTTL is how long an Idempotency-Key stays bound.
	DefaultIdempotencyTTL = 24 * time.Hour
)

// Config tunes the lua-async queue and its writers. Zero values mean the
// defaults (the Default* constants).
type Config struct {
	// Writers is how many goroutines of this process persist queued
	// orders. Default DefaultWriters (2); NoWriters (negative) runs none,
	// for a process whose queue another process (seckill worker) writes.
	Writers int
	// Batch is the most orders a writer reads, and writes in one
	// transaction, at a time. Default DefaultBatch (500).
	Batch int
	// Block is how long a writer's XREADGROUP waits for entries. Default
	// DefaultBlock (200ms).
	Block time.Duration
	// ClaimIdle is how long an entry may sit delivered but unacknowledged
	// before another writer claims it (XAUTOCLAIM), whatever its writer's
	// lease says: the slow backstop. A writer renews its entries every
	// quarter of ClaimIdle while it works on them. Default
	// DefaultClaimIdle (30s).
	ClaimIdle time.Duration
	// Lease is how long a writer's liveness lease lives without renewal
	// (a heartbeat renews it four times as often). Entries of a writer
	// whose lease is gone are taken over at once: this, not ClaimIdle,
	// bounds recovery after a crash. Default DefaultLease (1s).
	Lease time.Duration
	// MaxDeliveries is how many deliveries an entry gets before it goes to
	// the dead-letter stream. Default DefaultMaxDeliveries (5).
	MaxDeliveries int
	// QueuedOrderTTL bounds the life of a queued order's marker (the
	// record that answers GET /orders/{id} until the order is written).
	// Default DefaultQueuedOrderTTL (7 days).
	QueuedOrderTTL time.Duration
	// IdempotencyTTL is how long an Idempotency-Key stays bound to its
	// user and order. Default DefaultIdempotencyTTL (24h).
	IdempotencyTTL time.Duration
	// Observer receives the writers' events (metrics). Default none.
	Observer Observer
	// Durability is what a 202 waits for: DurabilityMemory or
	// DurabilityFsync. Default DefaultDurability (memory).
	Durability string
	// DurabilityCheck is how often DurabilityFsync re-reads Redis's
	// settings. Default DefaultDurabilityCheck (5s).
	DurabilityCheck time.Duration
	// AfterCommit, when set, runs after a batch commits and before it is
	// acknowledged: a fault-injection point for crash tests. Default none.
	AfterCommit func()
}

// Observer receives the writers' events. It must be fast and safe for
// concurrent use.
type Observer interface {
	// Persisted reports one committed batch: orders written, orders found
	// already done (redeliveries), orders recorded as failed, and how long
	// the transaction took.
	Persisted(written, already, failed int, took time.Duration)
	// DeadLettered reports entries moved to the dead-letter stream.
	DeadLettered(n int)
	// WriteFailed reports a failed attempt to persist a batch; outage is
	// true when the database or Redis could not be reached.
	WriteFailed(outage bool)
	// QueueLost reports queued orders not written because Redis lost them
	// (its data) before their batch committed.
	QueueLost(n int)
}

// withDefaults fills in the defaults and checks what has no default.
func (c *Config) withDefaults() error {
	switch {
	case c.Writers == 0:
		c.Writers = DefaultWriters
	case c.Writers < 0:
		c.Writers = 0
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.Block <= 0 {
		c.Block = DefaultBlock
	}
	if c.ClaimIdle <= 0 {
		c.ClaimIdle = DefaultClaimIdle
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.MaxDeliveries <= 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	if c.QueuedOrderTTL <= 0 {
		c.QueuedOrderTTL = DefaultQueuedOrderTTL
	}
	if c.IdempotencyTTL <= 0 {
		c.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if c.Durability == "" {
		c.Durability = DefaultDurability
	}
	if c.DurabilityCheck <= 0 {
		c.DurabilityCheck = DefaultDurabilityCheck
	}
	if c.Durability != DurabilityMemory && c.Durability != DurabilityFsync {
		return fmt.Errorf("unknown lua-async durability %q (want memory or fsync): %w", c.Durability, stock.ErrInvalid)
	}
	return nil
}
