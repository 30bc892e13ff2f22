// Package queue is the lua-async strategy's queue: Enqueue admits an order
// through the gate and queues it in the item's Redis stream in one script;
// Writers persist the stream in batches through store, with a claimer that
// takes over the entries of a writer that died and a dead-letter stream for
// entries that keep failing. It guards "no lost order" for 202 answers: an
// entry is acknowledged only after its transaction committed, and writing
// is idempotent.
package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
)

// Queue admits lua-async orders and reads and repairs the queues; with
// Config.Writers it also runs this process's writers.
type Queue struct {
	store   *store.Store
	rdb     redis.UniversalClient
	keys    gate.Keys
	gate    *gate.Gate
	pipe    *gate.Pipeline
	cfg     Config
	log     *slog.Logger
	hot     gate.HotKeysCache
	fsync   *fsyncWatch // nil unless cfg.Durability is fsync
	writers *Writers
	// cluster: rdb is a Redis Cluster client, where the order's index
	// (outside the item's slot) is set apart from the enqueue script.
	cluster bool

	building gate.Builds // one gate build per item at a time here
	buckets  sync.Map    // item id -> its bucket count (int), which never changes
	// routing, when set, gives an item's bucket count from the caller's
	// cache (SetRouting); else the database is read.
	routing func(ctx context.Context, id int64) (int, error)
}

// SetRouting makes the queue learn items' bucket counts from fn (the
// shop's routing cache) rather than from the database. Call it before
// any order.
func (q *Queue) SetRouting(fn func(ctx context.Context, id int64) (int, error)) { q.routing = fn }

// New checks cfg, starts the durability watch and the writers. Close stops
// them. log nil is slog.Default().
func New(st *store.Store, rdb redis.UniversalClient, gt *gate.Gate, pipe *gate.Pipeline, cfg Config, log *slog.Logger) (*Queue, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	q := &Queue{store: st, rdb: rdb, keys: gt.Keys(), gate: gt, pipe: pipe, cfg: cfg, log: log}
	_, q.cluster = rdb.(*redis.ClusterClient)
	if cfg.Durability == DurabilityFsync {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		if q.fsync, err = watchFsync(ctx, rdb, cfg.DurabilityCheck); err != nil {
			return nil, err
		}
	}
	if cfg.Writers == 0 {
		cfg.Writers = NoWriters // withDefaults made "none" 0
	}
	w, err := StartWriters(st, rdb, q.keys, cfg, log)
	if err != nil {
		q.fsync.close()
		return nil, err
	}
	q.writers = w
	return q, nil
}

// Close stops the writers (after their current batch: what is still
// queued stays in Redis for other writers) and the durability watch.
func (q *Queue) Close() {
	q.building.Close()
	q.writers.Close()
	q.fsync.close()
}

// ConsumerPrefix starts the consumer name of every writer of this process.
func (q *Queue) ConsumerPrefix() string { return q.writers.name }

// Added makes a new lua-async item's streams (one per bucket) known to
// this process's writers at once.
func (q *Queue) Added(id int64, buckets int) { q.writers.Added(id, buckets) }

// Enqueue checks the Idempotency-Key, the sale window, the buyer and what
// is left, takes a unit and queues the order orderID on the item's stream,
// atomically (enqueue.lua); a missing gate is built first. The order comes
// back pending: it will be in the database once a writer reaches it.
// replayOf is set instead when the key already names an order.
//
// On an item with several buckets the script runs on the buyer's home
// bucket (its meta, buyers, stream and marker, all in the bucket's slot);
// an empty home is refilled from the others (gate.Rebalance) and tried
// again, at most reserveRounds times, and the answer is sold out only when
// every bucket was found empty at one instant. The Idempotency-Key lives
// in the bucket the key picks, generally not the home: the caller claims
// it before (shop), and the script only records it on the entry. Refusals:
// stock.ErrIdempotencyConflict, *gate.DupError, stock.ErrSoldOut,
// stock.ErrSaleNotStarted, stock.ErrSaleEnded, and stock.ErrUnavailable
// while fsync durability is asked for and Redis does not give it.
func (q *Queue) Enqueue(ctx context.Context, it *stock.Item, req stock.OrderRequest, orderID string) (o *stock.Order, replayOf string, err error) {
	if err := q.fsync.check(); err != nil {
		return nil, "", err
	}
	now := time.Now()
	home := gate.HomeBucket(it.ID, it.Buckets, req.UserID)
	var keys []string
	if _, ok := q.buckets.Load(it.ID); !ok {
		q.buckets.Store(it.ID, home.K)
	}
	if home.K > 1 {
		bk := q.keys.Bucket(home)
		keys = []string{bk.Meta, bk.Buyers, bk.Stream, bk.Queued(orderID)}
	} else {
		hk := q.hot.Get(q.keys, it.ID)
		keys = []string{hk.Meta, hk.Buyers, hk.Stream, q.keys.Queued(it.ID, orderID)}
	}
	withKey, withIndex := "0", "0"
	if req.IdempotencyKey != "" && home.K <= 1 {
		keys = append(keys, q.keys.Idem(it.ID, req.IdempotencyKey))
		withKey = "1"
	}
	if !q.cluster {
		// One Redis has no slots: the script sets the index too, which
		// spares a round trip per admission (about 15 % of lua-async's
		// throughput on the 2-core machine).
		keys = append(keys, q.keys.OrderIndex(orderID))
		withIndex = "1"
	}
	args := []any{req.UserID, orderID, now.UnixMilli(), req.IdempotencyKey,
		int64(q.cfg.IdempotencyTTL / time.Second), int64(q.cfg.QueuedOrderTTL / time.Second),
		it.ID, withKey, withIndex, passFlag(req.Pass)}
	built := false
	for round := 0; round < reserveRounds; round++ {
		// An enqueue abandoned in flight needs no settling: the script is
		// atomic, and the order it queued is written like any other (the
		// lost 202 is found by a keyed retry; a retry without a key hears
		// already_purchased, which is true).
		res, err := q.pipe.RunScript(ctx, enqueueScript, nil, keys, args...).StringSlice()
		if err != nil {
			return nil, "", gate.Error("enqueue", err)
		}
		if len(res) != 2 {
			return nil, "", fmt.Errorf("redis: enqueue: unexpected reply %q", res)
		}
		switch res[0] {
		case "ok":
			if q.cluster {
				q.index(ctx, it.ID, res[1])
			}
			at := time.UnixMilli(now.UnixMilli()).UTC()
			return &stock.Order{ID: res[1], ItemID: it.ID, UserID: req.UserID, Status: stock.StatusPending, CreatedAt: at, UpdatedAt: at}, "", nil
		case "replay":
			return nil, res[1], nil
		case "conflict":
			return nil, "", stock.ErrIdempotencyConflict
		case "dup":
			return nil, "", &gate.DupError{OrderID: res[1]}
		case "room":
			return nil, "", fmt.Errorf("item %d: %w", it.ID, stock.ErrPassRequired)
		case "sold_out":
			if home.K <= 1 {
				return nil, "", stock.ErrSoldOut
			}
			soldOut, err := q.gate.Rebalance(ctx, it.ID, home.K, home.B)
			switch {
			case err == nil && soldOut:
				return nil, "", stock.ErrSoldOut
			case errors.Is(err, gate.ErrMissing):
				if built {
					return nil, "", fmt.Errorf("redis: gate for item %d vanished while rebuilding: %w", it.ID, stock.ErrUnavailable)
				}
				built = true
				if err := q.BuildGate(ctx, it.ID); err != nil {
					return nil, "", err
				}
			case err != nil:
				return nil, "", err
			}
		case "not_started":
			return nil, "", stock.ErrSaleNotStarted
		case "ended":
			return nil, "", stock.ErrSaleEnded
		case "missing":
			if built {
				return nil, "", fmt.Errorf("redis: gate for item %d vanished while rebuilding: %w", it.ID, stock.ErrUnavailable)
			}
			built = true
			if err := q.BuildGate(ctx, it.ID); err != nil {
				return nil, "", err
			}
		default:
			return nil, "", fmt.Errorf("redis: enqueue: unexpected status %q", res[0])
		}
	}
	return nil, "", fmt.Errorf("item %d: its buckets kept emptying while units were moved to this buyer's; try again: %w", it.ID, stock.ErrUnavailable)
}

// reserveRounds bounds the enqueue attempts of one order on an item with
// several buckets, each after its home bucket was found empty and units
// were moved there (someone else may take them first).
const reserveRounds = 32

// bucketsOf is item id's bucket count: known from an order, or read from
// the database once (it never changes).
func (q *Queue) bucketsOf(ctx context.Context, id int64) (int, error) {
	if v, ok := q.buckets.Load(id); ok {
		return v.(int), nil
	}
	var k int
	if q.routing != nil {
		n, err := q.routing(ctx, id)
		if err != nil {
			return 0, err
		}
		k = max(1, n)
	} else {
		it, err := q.store.Item(ctx, id)
		if err != nil {
			return 0, err
		}
		k = max(1, it.Buckets)
	}
	q.buckets.Store(id, k)
	return k, nil
}

// passFlag is the enqueue script's pass argument: "1" when the order
// carries a verified waiting-room pass.
func passFlag(pass bool) string {
	if pass {
		return "1"
	}
	return ""
}
