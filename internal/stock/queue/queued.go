package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
)

// index points the order id at its item (Keys.OrderIndex), through the
// pipeline, after the script admitted it, on a Redis Cluster: there the
// index lies outside the item's slot, so the script cannot write it, and
// writing it before would leave one for every refused request. (On one
// Redis the script writes it.) It is best effort: the order is
// admitted whatever happens here, so the 202 stands; without its index a
// queued order reads as not found until a writer has written it (usually
// within milliseconds), which its buyer's poll survives.
//
// It waits for the index no longer than ctx allows: the index's slot may
// lie on a master that does not answer (down, failing over) while the
// item's answered, and the admitted order's answer must not wait for it
// past the request's deadline. A keyed retry writes the index again
// (QueuedOrderOf).
func (q *Queue) index(ctx context.Context, itemID int64, orderID string) {
	key := q.keys.OrderIndex(orderID)
	ttl := q.cfg.QueuedOrderTTL
	err := q.pipe.Do(ctx, func(ctx context.Context, p redis.Pipeliner) {
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
	m, err := q.marker(ctx, itemID, id)
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("order %s: %w", id, stock.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return parseMarker(id, strconv.FormatInt(itemID, 10)+"|"+m)
}

// marker reads order id's queued marker ("user|unix ms|key"); redis.Nil
// when there is none. An item with several buckets has its marker in the
// buyer's home bucket, which the order id does not tell: the K buckets'
// markers are read in one pipeline (K <= 64, and only for an order not in
// the database yet).
func (q *Queue) marker(ctx context.Context, itemID int64, id string) (string, error) {
	v, known := q.buckets.Load(itemID)
	if !known || v.(int) <= 1 {
		// Bucket 0's marker first (every marker of an item of one
		// bucket): an item not seen yet costs no database read when it
		// is there.
		m, err := q.rdb.Get(ctx, q.keys.Queued(itemID, id)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", gate.Error("read queued order", err)
		}
		if err == nil || known {
			return m, err
		}
	}
	k, err := q.bucketsOf(ctx, itemID)
	if err != nil {
		return "", err
	}
	if k <= 1 {
		return "", redis.Nil
	}
	cmds := make([]*redis.StringCmd, k)
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, bk := range gate.AllBuckets(itemID, k) {
			cmds[b] = p.Get(ctx, q.keys.Bucket(bk).Queued(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", gate.Error("read queued order", err)
	}
	for _, c := range cmds {
		if m, err := c.Result(); err == nil {
			return m, nil
		}
	}
	for _, c := range cmds {
		if err := c.Err(); !errors.Is(err, redis.Nil) {
			return "", gate.Error("read queued order", err) // a bucket that could not say
		}
	}
	return "", redis.Nil
}

// parseMarker reads "item|user|unix ms|key" (key "" for none); a marker
// written before the key was part of it ends at the time.
func parseMarker(id, v string) (*stock.Order, error) {
	o, _, _, err := parseMarkerKey(id, v)
	return o, err
}

// parseMarkerKey is parseMarker with the Idempotency-Key the order was
// placed with, and whether the marker tells it.
func parseMarkerKey(id, v string) (o *stock.Order, key string, known bool, err error) {
	parts := strings.SplitN(v, "|", 4)
	if len(parts) < 3 {
		return nil, "", false, fmt.Errorf("redis: queued order %s: malformed marker %q", id, v)
	}
	itemID, err1 := strconv.ParseInt(parts[0], 10, 64)
	ms, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, "", false, fmt.Errorf("redis: queued order %s: malformed marker %q", id, v)
	}
	if len(parts) == 4 {
		key, known = parts[3], true
	}
	at := time.UnixMilli(ms).UTC()
	return &stock.Order{ID: id, ItemID: itemID, UserID: parts[1], Status: stock.StatusPending, CreatedAt: at, UpdatedAt: at}, key, known, nil
}

// QueuedKey tells the Idempotency-Key ("" for none) that queued order id
// of item itemID was placed with, from its marker: known is false when
// the order is not queued (written, failed, or never) or its marker is
// older than the key's place in it.
func (q *Queue) QueuedKey(ctx context.Context, itemID int64, id string) (key string, known bool, err error) {
	m, err := q.marker(ctx, itemID, id)
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	_, key, known, err = parseMarkerKey(id, strconv.FormatInt(itemID, 10)+"|"+m)
	return key, known, err
}
