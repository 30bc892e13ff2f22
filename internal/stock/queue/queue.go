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
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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
}

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

// Added makes a new lua-async item's stream known to this process's
// writers at once.
func (q *Queue) Added(id int64) { q.writers.Added(id) }

// Enqueue checks the Idempotency-Key, the sale window, the buyer and what
// is left, takes a unit and queues the order orderID on the item's stream,
// atomically (enqueue.lua); a missing gate is built first. The order comes
// back pending: it will be in the database once a writer reaches it.
// replayOf is set instead when the key already names an order. Refusals:
// stock.ErrIdempotencyConflict, *gate.DupError, stock.ErrSoldOut,
// stock.ErrSaleNotStarted, stock.ErrSaleEnded, and stock.ErrUnavailable
// while fsync durability is asked for and Redis does not give it.
func (q *Queue) Enqueue(ctx context.Context, it *stock.Item, req stock.OrderRequest, orderID string) (o *stock.Order, replayOf string, err error) {
	if err := q.fsync.check(); err != nil {
		return nil, "", err
	}
	now := time.Now()
	hk := q.hot.Get(q.keys, it.ID)
	keys := []string{hk.Meta, hk.Buyers, hk.Stream, q.keys.Queued(it.ID, orderID)}
	withKey, withIndex := "0", "0"
	if req.IdempotencyKey != "" {
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
		it.ID, withKey, withIndex}
	for attempt := 0; ; attempt++ {
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
		case "sold_out":
			return nil, "", stock.ErrSoldOut
		case "not_started":
			return nil, "", stock.ErrSaleNotStarted
		case "ended":
			return nil, "", stock.ErrSaleEnded
		case "missing":
			if attempt > 0 {
				return nil, "", fmt.Errorf("redis: gate for item %d vanished while rebuilding: %w", it.ID, stock.ErrUnavailable)
			}
			if err := q.BuildGate(ctx, it.ID); err != nil {
				return nil, "", err
			}
		default:
			return nil, "", fmt.Errorf("redis: enqueue: unexpected status %q", res[0])
		}
	}
}

// index points the order id at its item (Keys.OrderIndex), through the
// pipeline, after the script admitted it, on a Redis Cluster: there the
// index lies outside the item's slot, so the script cannot write it, and
// writing it before would leave one for every refused request. (On one
// Redis the script writes it.) It is best effort: the order is
// admitted whatever happens here, so the 202 stands; without its index a
// queued order reads as not found until a writer has written it (usually
// within milliseconds), which its buyer's poll survives.
func (q *Queue) index(ctx context.Context, itemID int64, orderID string) {
	key := q.keys.OrderIndex(orderID)
	ttl := q.cfg.QueuedOrderTTL
	// A buyer who gave up still has the order, and may ask for it by id
	// after a keyed retry: the index is written all the same.
	err := q.pipe.Do(context.WithoutCancel(ctx), func(ctx context.Context, p redis.Pipeliner) {
		p.Set(ctx, key, itemID, ttl)
	}, nil)
	if err != nil {
		q.log.Warn("lua-async: queued order admitted, but its index was not written; GET finds it once written",
			"item", itemID, "order", orderID, "err", err)
	}
}

// QueuedOrder reads a queued order: its index names the item, and the
// item's marker (Keys.Queued) says it is queued. stock.ErrNotFound when
// either is missing (never queued, or written since).
func (q *Queue) QueuedOrder(ctx context.Context, id string) (*stock.Order, error) {
	notFound := fmt.Errorf("order %s: %w", id, stock.ErrNotFound)
	v, err := q.rdb.Get(ctx, q.keys.OrderIndex(id)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, notFound
	}
	if err != nil {
		return nil, gate.Error("read queued order", err)
	}
	if strings.Contains(v, "|") {
		// "item|user|unix ms": a marker from before the index, written
		// by the enqueue script itself, and so the truth.
		return parseMarker(id, v)
	}
	itemID, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("redis: queued order %s: malformed index %q", id, v)
	}
	return q.marked(ctx, itemID, id)
}

// QueuedOrderOf reads a queued order of item itemID from its marker alone,
// and writes the order's index again: a replay knows the item, and the
// index may never have been written (the request that queued the order
// was abandoned in flight). stock.ErrNotFound when it is not queued.
func (q *Queue) QueuedOrderOf(ctx context.Context, itemID int64, id string) (*stock.Order, error) {
	o, err := q.marked(ctx, itemID, id)
	if err == nil {
		q.index(ctx, itemID, id)
	}
	return o, err
}

func (q *Queue) marked(ctx context.Context, itemID int64, id string) (*stock.Order, error) {
	m, err := q.rdb.Get(ctx, q.keys.Queued(itemID, id)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("order %s: %w", id, stock.ErrNotFound)
	}
	if err != nil {
		return nil, gate.Error("read queued order", err)
	}
	return parseMarker(id, strconv.FormatInt(itemID, 10)+"|"+m)
}

// parseMarker reads "item|user|unix ms".
func parseMarker(id, v string) (*stock.Order, error) {
	parts := strings.SplitN(v, "|", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("redis: queued order %s: malformed marker %q", id, v)
	}
	itemID, err1 := strconv.ParseInt(parts[0], 10, 64)
	ms, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("redis: queued order %s: malformed marker %q", id, v)
	}
	at := time.UnixMilli(ms).UTC()
	return &stock.Order{ID: id, ItemID: itemID, UserID: parts[1], Status: stock.StatusPending, CreatedAt: at, UpdatedAt: at}, nil
}

// BuildGate creates a lua-async item's gate after Redis lost it: taken
// is what the database sold plus the orders still queued in the item's
// stream (and its dead-letter stream) that the database does not have yet,
// and the buyers are the database's plus the queued ones.
//
// It runs holding the item's row lock, which every writer's batch needs to
// take its units, so no batch commits while the database and the streams
// are read and the gate built: each order is counted exactly once. If
// the streams are empty, Redis lost the queue (or it had drained, and then
// no writer holds anything): the item's queue epoch moves on, so a batch
// some writer read from the lost queue can never be written after this
// gate was built without it (PersistQueued refuses the old epoch). Nothing
// can be queued meanwhile: the enqueue script refuses while the gate is
// missing. Rebuilders in other processes wait for the row lock, then find
// the gate built.
func (q *Queue) BuildGate(ctx context.Context, id int64) error {
	return q.building.Do(ctx, id, func(ctx context.Context) error {
		return q.store.WithItemLocked(ctx, id, q.buildLocked)
	})
}

func (q *Queue) buildLocked(ctx context.Context, locked *store.LockedItem) error {
	id := locked.ID
	if built, err := q.gate.Exists(ctx, id); err != nil || built {
		return err // built by another process while this one waited
	}
	var inFlight []redis.XMessage
	for _, key := range []string{q.keys.Stream(id), q.keys.Dead(id)} {
		msgs, err := q.rdb.XRange(ctx, key, "-", "+").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return gate.Error("read stream for rebuild", err)
		}
		inFlight = append(inFlight, msgs...)
	}
	if len(inFlight) == 0 {
		if err := locked.MoveQueueEpoch(ctx); err != nil {
			return err
		}
	}
	epoch := locked.QueueEpoch
	snap, err := locked.Buyers(ctx)
	if err != nil {
		return err
	}
	queued := map[string]string{}
	for _, m := range inFlight {
		e, err := ParseEntry(id, m)
		if err != nil || snap.Done[e.ID] {
			continue
		}
		if _, held := queued[e.UserID]; !held {
			queued[e.UserID] = e.ID // a second entry of a user fails as already_purchased
		}
	}
	it := snap.Item
	if _, err := q.gate.Rebuild(ctx, gate.Rebuild{Item: it, Buyers: snap.Users, Done: snap.Done,
		Cancelled: snap.Cancelled, Queued: queued, Epoch: epoch}); err != nil {
		return err
	}
	q.log.WarnContext(ctx, "lua-async gate rebuilt from the database and the stream", "item", id,
		"stock", it.Stock, "sold", it.Sold, "queued", len(queued), "buyers", len(snap.Users), "queue_epoch", epoch)
	return nil
}

// Stats reads the queue of a lua-async item.
func (q *Queue) Stats(ctx context.Context, id int64) (stock.AsyncStats, error) {
	return stats(ctx, q.rdb, q.keys, id)
}

func stats(ctx context.Context, rdb redis.UniversalClient, keys gate.Keys, id int64) (stock.AsyncStats, error) {
	var st stock.AsyncStats
	stream := keys.Stream(id)
	pipe := rdb.Pipeline()
	qlen := pipe.XLen(ctx, stream)
	pend := pipe.XPending(ctx, stream, Group)
	dlen := pipe.XLen(ctx, keys.Dead(id))
	first := pipe.XRangeN(ctx, stream, "-", "+", 1)
	_, _ = pipe.Exec(ctx)
	for _, c := range []redis.Cmder{qlen, dlen, first} {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return st, gate.Error("read queue", err)
		}
	}
	st.Queued, st.DeadLetters = qlen.Val(), dlen.Val()
	if err := pend.Err(); err == nil {
		st.Unacked = pend.Val().Count
	} else if !errors.Is(err, redis.Nil) && !isNoGroup(err) {
		return st, gate.Error("read queue", err)
	}
	if msgs := first.Val(); len(msgs) > 0 {
		if ms, err := strconv.ParseInt(strings.SplitN(msgs[0].ID, "-", 2)[0], 10, 64); err == nil {
			st.OldestAge = max(0, time.Since(time.UnixMilli(ms)))
		}
	}
	return st, nil
}

// Backlog sums the queues of every lua-async item: orders admitted and not
// yet written, and the age of the oldest.
func (q *Queue) Backlog(ctx context.Context) (stock.AsyncStats, error) {
	return backlog(ctx, q.store, q.rdb, q.keys)
}

// Backlog is Queue.Backlog, for a process that only writes.
func (w *Writers) Backlog(ctx context.Context) (stock.AsyncStats, error) {
	return backlog(ctx, w.store, w.rdb, w.keys)
}

func backlog(ctx context.Context, st *store.Store, rdb redis.UniversalClient, keys gate.Keys) (stock.AsyncStats, error) {
	var total stock.AsyncStats
	ids, err := st.ItemsSoldBy(ctx, stock.StrategyLuaAsync)
	if err != nil {
		return total, err
	}
	for _, id := range ids {
		st, err := stats(ctx, rdb, keys, id)
		if err != nil {
			return total, err
		}
		total.Queued += st.Queued
		total.Unacked += st.Unacked
		total.DeadLetters += st.DeadLetters
		total.OldestAge = max(total.OldestAge, st.OldestAge)
	}
	return total, nil
}

// Drain waits until every lua-async queue is empty (each order
// written, or recorded as failed) or ctx ends, and returns the backlog as
// last read. A process whose Redis closes with it (the embedded one) calls
// it before closing: no other writer can reach that queue, and it would
// be lost.
func (q *Queue) Drain(ctx context.Context) (stock.AsyncStats, error) {
	for {
		st, err := q.Backlog(ctx)
		if err == nil && st.Queued == 0 {
			return st, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return st, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// DeadLetters lists up to limit entries of an item's dead-letter stream.
func (q *Queue) DeadLetters(ctx context.Context, id int64, limit int64) ([]stock.DeadLetter, error) {
	if _, err := q.store.Item(ctx, id); err != nil {
		return nil, err
	}
	msgs, err := q.rdb.XRangeN(ctx, q.keys.Dead(id), "-", "+", limit).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, gate.Error("read dead letters", err)
	}
	out := make([]stock.DeadLetter, 0, len(msgs))
	for _, m := range msgs {
		str := func(k string) string { v, _ := m.Values[k].(string); return v }
		d := stock.DeadLetter{Entry: m.ID, Reason: str(FieldDeadReason),
			Order: stock.Order{ID: str(FieldOrder), ItemID: id, UserID: str(FieldUser), Status: stock.StatusPending}}
		if ms, err := strconv.ParseInt(str(FieldDeadAt), 10, 64); err == nil {
			d.At = time.UnixMilli(ms).UTC()
		}
		if ms, err := strconv.ParseInt(str(FieldTime), 10, 64); err == nil {
			d.Order.CreatedAt = time.UnixMilli(ms).UTC()
			d.Order.UpdatedAt = d.Order.CreatedAt
		}
		out = append(out, d)
	}
	return out, nil
}

// Requeue moves every entry of an item's dead-letter stream back
// to its order stream (with a fresh delivery count), once the cause is
// fixed, and returns how many moved. Each move is atomic. Entries that are
// no order at all (no order id or user) stay, and are logged.
func (q *Queue) Requeue(ctx context.Context, id int64) (int, error) {
	if _, err := q.store.Item(ctx, id); err != nil {
		return 0, err
	}
	const page = 1000
	keys := []string{q.keys.Dead(id), q.keys.Stream(id)}
	moved, kept := 0, 0
	for start := "-"; ; {
		reply, err := requeueScript.Run(ctx, q.rdb, keys, page, start).Slice()
		if err != nil {
			return moved, gate.Error("requeue dead letters", err)
		}
		_, res, err := gate.Reply(reply)
		if err != nil {
			return moved, err
		}
		if len(res) != 3 {
			return moved, fmt.Errorf("redis: requeue dead letters: unexpected reply %v", res)
		}
		m, _ := res[0].(int64)
		k, _ := res[1].(int64)
		last, _ := res[2].(string)
		moved, kept = moved+int(m), kept+int(k)
		if last == "" || m+k < page {
			break
		}
		start = "(" + last
	}
	if kept > 0 {
		q.log.WarnContext(ctx, "lua-async: dead letters without an order id or user left in the dead-letter stream",
			"item", id, "kept", kept, "stream", q.keys.Dead(id))
	}
	return moved, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
