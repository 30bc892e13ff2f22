package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
)

// deadLetter moves entries to the item's dead-letter stream with the reason,
// and acknowledges them, in one MULTI. Their pending markers stay: the
// orders were admitted and are not written; an admin requeues them once
// the cause is fixed. It tries for ackPatience (see ack) and reports
// whether they moved; if not, they stay pending and come back.
func (w *Writers) deadLetter(bk gate.Bucket, msgs []redis.XMessage, reason string) bool {
	stream, dead := w.streamKey(bk), w.keys.Bucket(bk).Dead
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	err := w.patiently(func(ctx context.Context) error {
		_, err := w.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, m := range msgs {
				vals := map[string]any{FieldDeadEntry: m.ID, FieldDeadReason: reason, FieldDeadAt: now}
				for k, v := range m.Values {
					vals[k] = v
				}
				p.XAdd(ctx, &redis.XAddArgs{Stream: dead, Values: vals})
			}
			p.XAck(ctx, stream, Group, ids...)
			p.XDel(ctx, stream, ids...)
			return nil
		})
		return err
	})
	if err != nil {
		w.log.Warn("lua-async writers: entries not moved to the dead-letter stream; left pending", "item", bk.Item, "bucket", bk.B,
			"entries", len(msgs), "err", err)
		return false
	}
	w.log.Error("lua-async: entries moved to the dead-letter stream", "item", bk.Item, "bucket", bk.B, "entries", len(msgs), "reason", reason, "stream", dead)
	if o := w.cfg.Observer; o != nil {
		o.DeadLettered(len(msgs))
	}
	return true
}

// DeadLetters lists up to limit entries of an item's dead-letter stream
// (its buckets' streams, bucket by bucket, for an item with several).
func (q *Queue) DeadLetters(ctx context.Context, id int64, limit int64) ([]stock.DeadLetter, error) {
	it, err := q.store.Item(ctx, id)
	if err != nil {
		return nil, err
	}
	var msgs []redis.XMessage
	for _, bk := range gate.AllBuckets(id, it.Buckets) {
		if int64(len(msgs)) >= limit {
			break
		}
		got, err := q.rdb.XRangeN(ctx, q.keys.Bucket(bk).Dead, "-", "+", limit-int64(len(msgs))).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, gate.Error("read dead letters", err)
		}
		msgs = append(msgs, got...)
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
// no order at all (no order id or user) stay, and are logged. An item with
// several buckets has a dead-letter stream per bucket, each moved back to
// its own bucket's stream.
func (q *Queue) Requeue(ctx context.Context, id int64) (int, error) {
	it, err := q.store.Item(ctx, id)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, bk := range gate.AllBuckets(id, it.Buckets) {
		n, err := q.requeue(ctx, bk)
		moved += n
		if err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// requeue is Requeue for one stream.
func (q *Queue) requeue(ctx context.Context, bk gate.Bucket) (int, error) {
	const page = 1000
	bkk := q.keys.Bucket(bk)
	id := bk.Item
	keys := []string{bkk.Dead, bkk.Stream}
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
			"item", id, "kept", kept, "stream", bkk.Dead)
	}
	return moved, nil
}
