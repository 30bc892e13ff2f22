package shop

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
)

var (
	//go:embed lua/enqueue.lua
	enqueueSrc string

	enqueueScript = redis.NewScript(enqueueSrc)
)

// placeAsync is the "lua-async" strategy. One script checks the
// Idempotency-Key, the sale window, the buyer and what is left, takes a
// unit and queues the order on the item's stream, atomically; writers
// persist it in batches. The answer is the order, pending: it will be in
// the database once a writer reaches it (see asyncWriters).
func (s *Service) placeAsync(ctx context.Context, it *stock.Item, req stock.OrderRequest) (*stock.Order, bool, error) {
	if s.soldOut.SoldOut(it.ID) {
		if req.IdempotencyKey == "" {
			return nil, false, stock.ErrSoldOut
		}
		return s.soldOutAsync(ctx, it, req)
	}
	if err := s.fsync.check(); err != nil {
		return nil, false, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, false, fmt.Errorf("order id: %w", err)
	}
	gen := s.soldOut.Generation(it.ID)
	now := time.Now()
	gk := s.hotKeys.Get(s.keys, it.ID)
	keys := []string{gk.Meta, gk.Buyers, gk.Stream, s.keys.QueuedOrder(id.String())}
	if req.IdempotencyKey != "" {
		keys = append(keys, s.keys.Idem(it.ID, req.IdempotencyKey))
	}
	args := []any{req.UserID, id.String(), now.UnixMilli(), it.ID, req.IdempotencyKey,
		int64(s.cfg.IdempotencyTTL / time.Second), int64(s.cfg.Async.PendingTTL / time.Second)}
	for attempt := 0; ; attempt++ {
		// An enqueue abandoned in flight needs no settling: the script is
		// atomic, and the order it queued is written like any other (the
		// lost 202 is found by a keyed retry; a retry without a key hears
		// already_purchased, which is true).
		res, err := s.pipe.RunScript(ctx, enqueueScript, nil, keys, args...).StringSlice()
		if err != nil {
			return nil, false, gate.Error("enqueue", err)
		}
		if len(res) != 2 {
			return nil, false, fmt.Errorf("redis: enqueue: unexpected reply %q", res)
		}
		switch res[0] {
		case "ok":
			at := time.UnixMilli(now.UnixMilli()).UTC()
			return &stock.Order{ID: res[1], ItemID: it.ID, UserID: req.UserID, Status: stock.StatusPending, CreatedAt: at, UpdatedAt: at}, false, nil
		case "replay":
			return s.replayAsync(ctx, res[1])
		case "conflict":
			return nil, false, stock.ErrIdempotencyConflict
		case "dup":
			if req.IdempotencyKey != "" {
				// Redis may have lost the key's claim (evicted, or part of
				// its state lost) while the buyer's order lives on: the
				// order row says which key placed it. It waits, within
				// ReplayWait, for a queued order to be written.
				if prev := s.replay(ctx, req, true); prev != nil {
					return prev, true, nil
				}
			}
			return nil, false, &gate.DupError{OrderID: res[1]}
		case "sold_out":
			s.markSoldOut(ctx, it.ID, gen)
			return nil, false, stock.ErrSoldOut
		case "not_started":
			return nil, false, stock.ErrSaleNotStarted
		case "ended":
			return nil, false, stock.ErrSaleEnded
		case "missing":
			if attempt > 0 {
				return nil, false, fmt.Errorf("redis: gate for item %d vanished while rebuilding: %w", it.ID, stock.ErrUnavailable)
			}
			if err := s.rebuildAsync(ctx, it.ID); err != nil {
				return nil, false, err
			}
		default:
			return nil, false, fmt.Errorf("redis: enqueue: unexpected status %q", res[0])
		}
	}
}

// soldOutAsync answers a keyed request for an item this process knows is
// sold out with one GET: the key may name an order its user placed before.
func (s *Service) soldOutAsync(ctx context.Context, it *stock.Item, req stock.OrderRequest) (*stock.Order, bool, error) {
	var cmd *redis.StringCmd
	if err := s.pipe.Do(ctx, func(ctx context.Context, p redis.Pipeliner) {
		cmd = p.Get(ctx, s.keys.Idem(it.ID, req.IdempotencyKey))
	}, nil); err != nil {
		return nil, false, gate.Error("read idempotency key", err)
	}
	prev, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return nil, false, stock.ErrSoldOut
	}
	if err != nil {
		return nil, false, gate.Error("read idempotency key", err)
	}
	user, orderID, _ := strings.Cut(prev, "|")
	switch {
	case user != req.UserID:
		return nil, false, stock.ErrIdempotencyConflict
	case orderID == "":
		return nil, false, stock.ErrSoldOut
	}
	return s.replayAsync(ctx, orderID)
}

// replayAsync answers a request whose Idempotency-Key names the lua-async
// order orderID. An order that failed is answered with its failure, as an
// error: a 2xx would promise an order the database refused.
func (s *Service) replayAsync(ctx context.Context, orderID string) (*stock.Order, bool, error) {
	o, err := s.findOrder(ctx, orderID)
	if err != nil {
		return nil, false, fmt.Errorf("order %s of this Idempotency-Key: %w", orderID, err)
	}
	if o.Status == stock.StatusFailed {
		return nil, false, failedOrderError(o)
	}
	return o, true, nil
}

// failedOrderError is what a failed order's reason means to its buyer.
func failedOrderError(o *stock.Order) error {
	cause := stock.ErrOrderFailed
	switch o.Reason {
	case "sold_out":
		cause = stock.ErrSoldOut
	case "already_purchased":
		cause = stock.ErrAlreadyPurchased
	}
	return fmt.Errorf("order %s of this Idempotency-Key failed (%s): %w", o.ID, o.Reason, cause)
}

// findOrder reads an order of any strategy: written, pending in a stream,
// or recorded as failed. The pending marker is read between two database
// reads, so an order written meanwhile is never reported missing.
func (s *Service) findOrder(ctx context.Context, id string) (*stock.Order, error) {
	o, err := s.store.Order(ctx, id)
	if !errors.Is(err, stock.ErrNotFound) {
		return o, err
	}
	if o, err := s.pendingOrder(ctx, id); err == nil || !errors.Is(err, stock.ErrNotFound) {
		return o, err
	}
	if o, err := s.store.Order(ctx, id); !errors.Is(err, stock.ErrNotFound) {
		return o, err
	}
	return s.store.FailedOrder(ctx, id)
}

// pendingOrder reads the marker of a queued order.
func (s *Service) pendingOrder(ctx context.Context, id string) (*stock.Order, error) {
	v, err := s.rdb.Get(ctx, s.keys.QueuedOrder(id)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("order %s: %w", id, stock.ErrNotFound)
	}
	if err != nil {
		return nil, gate.Error("read pending order", err)
	}
	parts := strings.SplitN(v, "|", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("redis: pending order %s: malformed marker %q", id, v)
	}
	itemID, err1 := strconv.ParseInt(parts[0], 10, 64)
	ms, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("redis: pending order %s: malformed marker %q", id, v)
	}
	at := time.UnixMilli(ms).UTC()
	return &stock.Order{ID: id, ItemID: itemID, UserID: parts[1], Status: stock.StatusPending, CreatedAt: at, UpdatedAt: at}, nil
}

// rebuildAsync creates a lua-async item's gate after Redis lost it: taken
// is what the database sold plus the orders still queued in the item's
// stream (and its dead-letter stream) that the database does not have yet,
// and the buyers are the database's plus the queued ones.
//
// It runs holding the item's row lock, which every writer's batch needs to
// take its units, so no batch commits while the database and the streams
// are read and the gate installed: each order is counted exactly once. If
// the streams are empty, Redis lost the queue (or it had drained, and then
// no writer holds anything): the item's queue epoch moves on, so a batch
// some writer read from the lost queue can never be written after this
// gate was built without it (PersistQueued refuses the old epoch). Nothing
// can be queued meanwhile: the enqueue script refuses while the gate is
// missing. Rebuilders in other processes wait for the row lock, then find
// the gate installed.
func (s *Service) rebuildAsync(ctx context.Context, id int64) error {
	_, err, _ := s.loading.Do("rebuild:"+strconv.FormatInt(id, 10), func() (any, error) {
		return nil, s.store.WithItemLocked(ctx, id, s.rebuildAsyncLocked)
	})
	return err
}

func (s *Service) rebuildAsyncLocked(ctx context.Context, locked *store.LockedItem) error {
	id := locked.ID
	if built, err := s.gate.Exists(ctx, id); err != nil || built {
		return err // built by another process while this one waited
	}
	var inFlight []redis.XMessage
	for _, key := range []string{s.keys.Stream(id), s.keys.Dead(id)} {
		msgs, err := s.rdb.XRange(ctx, key, "-", "+").Result()
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
	buyers := snap.Users
	taken := snap.Item.Sold
	for _, m := range inFlight {
		q, err := parseQueued(id, m)
		if err != nil || snap.Done[q.ID] {
			continue
		}
		if _, held := buyers[q.UserID]; held {
			continue // will fail as already_purchased; takes no unit
		}
		buyers[q.UserID] = q.ID
		taken++
	}
	it := snap.Item
	created, err := s.gate.BuildWithBuyers(ctx, it, taken, epoch, buyers, snap.Cancelled)
	if err != nil {
		return err
	}
	if created {
		s.cfg.Logger.WarnContext(ctx, "lua-async gate rebuilt from the database and the stream", "item", id,
			"stock", it.Stock, "sold", it.Sold, "queued", taken-it.Sold, "buyers", len(buyers), "queue_epoch", epoch)
	}
	return nil
}

// AsyncStats reads the queue of a lua-async item.
func (s *Service) AsyncStats(ctx context.Context, id int64) (stock.AsyncStats, error) {
	var st stock.AsyncStats
	stream := s.keys.Stream(id)
	pipe := s.rdb.Pipeline()
	qlen := pipe.XLen(ctx, stream)
	pend := pipe.XPending(ctx, stream, asyncGroup)
	dlen := pipe.XLen(ctx, s.keys.Dead(id))
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
func (s *Service) Backlog(ctx context.Context) (stock.AsyncStats, error) {
	var total stock.AsyncStats
	ids, err := s.store.ItemsSoldBy(ctx, stock.StrategyLuaAsync)
	if err != nil {
		return total, err
	}
	for _, id := range ids {
		st, err := s.AsyncStats(ctx, id)
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

// DrainQueues waits until every lua-async queue is empty (each order
// written, or recorded as failed) or ctx ends, and returns the backlog as
// last read. A process whose Redis closes with it (the embedded one) calls
// it before closing: no other writer can reach that queue, and it would
// be lost.
func (s *Service) DrainQueues(ctx context.Context) (stock.AsyncStats, error) {
	for {
		st, err := s.Backlog(ctx)
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
func (s *Service) DeadLetters(ctx context.Context, id int64, limit int64) ([]stock.DeadLetter, error) {
	if _, err := s.store.Item(ctx, id); err != nil {
		return nil, err
	}
	msgs, err := s.rdb.XRangeN(ctx, s.keys.Dead(id), "-", "+", limit).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, gate.Error("read dead letters", err)
	}
	out := make([]stock.DeadLetter, 0, len(msgs))
	for _, m := range msgs {
		str := func(k string) string { v, _ := m.Values[k].(string); return v }
		d := stock.DeadLetter{Entry: m.ID, Reason: str("reason"),
			Order: stock.Order{ID: str("o"), ItemID: id, UserID: str("u"), Status: stock.StatusPending}}
		if ms, err := strconv.ParseInt(str("at"), 10, 64); err == nil {
			d.At = time.UnixMilli(ms).UTC()
		}
		if ms, err := strconv.ParseInt(str("t"), 10, 64); err == nil {
			d.Order.CreatedAt = time.UnixMilli(ms).UTC()
			d.Order.UpdatedAt = d.Order.CreatedAt
		}
		out = append(out, d)
	}
	return out, nil
}

// RequeueDeadLetters moves every entry of an item's dead-letter stream back
// to its order stream (with a fresh delivery count), once the cause is
// fixed, and returns how many moved. Each move is atomic. Entries that are
// no order at all (no order id or user) stay, and are logged.
func (s *Service) RequeueDeadLetters(ctx context.Context, id int64) (int, error) {
	if _, err := s.store.Item(ctx, id); err != nil {
		return 0, err
	}
	const page = 1000
	keys := []string{s.keys.Dead(id), s.keys.Stream(id)}
	moved, kept := 0, 0
	for start := "-"; ; {
		res, err := requeueScript.Run(ctx, s.rdb, keys, page, start).Slice()
		if err != nil {
			return moved, gate.Error("requeue dead letters", err)
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
		s.cfg.Logger.WarnContext(ctx, "lua-async: dead letters without an order id or user left in the dead-letter stream",
			"item", id, "kept", kept, "stream", s.keys.Dead(id))
	}
	return moved, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var (
	//go:embed lua/requeue.lua
	requeueSrc    string
	requeueScript = redis.NewScript(requeueSrc)
)
