package queue

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
)

// Stats reads the queue of a lua-async item: the sums of its buckets'
// streams (the oldest entry of any) for an item with several.
func (q *Queue) Stats(ctx context.Context, id int64) (stock.AsyncStats, error) {
	k, err := q.bucketsOf(ctx, id)
	if err != nil {
		return stock.AsyncStats{}, err
	}
	return itemStats(ctx, q.rdb, q.keys, id, k)
}

// itemStats sums the stats of an item's k streams.
func itemStats(ctx context.Context, rdb redis.UniversalClient, keys gate.Keys, id int64, k int) (stock.AsyncStats, error) {
	var total stock.AsyncStats
	for _, bk := range gate.AllBuckets(id, k) {
		st, err := stats(ctx, rdb, keys, bk)
		if err != nil {
			return total, err
		}
		addStats(&total, st)
	}
	return total, nil
}

// addStats adds st's counts to total and keeps the older oldest age.
func addStats(total *stock.AsyncStats, st stock.AsyncStats) {
	total.Queued += st.Queued
	total.Unacked += st.Unacked
	total.DeadLetters += st.DeadLetters
	total.OldestAge = max(total.OldestAge, st.OldestAge)
}

func stats(ctx context.Context, rdb redis.UniversalClient, keys gate.Keys, bk gate.Bucket) (stock.AsyncStats, error) {
	var st stock.AsyncStats
	bkk := keys.Bucket(bk)
	stream := bkk.Stream
	pipe := rdb.Pipeline()
	qlen := pipe.XLen(ctx, stream)
	pend := pipe.XPending(ctx, stream, Group)
	dlen := pipe.XLen(ctx, bkk.Dead)
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
	items, err := st.ItemBucketsSoldBy(ctx, stock.StrategyLuaAsync)
	if err != nil {
		return total, err
	}
	for _, it := range items {
		st, err := itemStats(ctx, rdb, keys, it.ID, it.Buckets)
		if err != nil {
			return total, err
		}
		addStats(&total, st)
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
