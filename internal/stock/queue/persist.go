package queue

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/gate"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// batchTimeout bounds one batch's transaction.
const batchTimeout = 5 * time.Second

// ackPatience bounds how long a writer keeps trying to acknowledge a batch
// it persisted (or to park entries as dead letters) before it leaves them
// pending and moves on: the item's master may be down for a while, and the
// writer's other items must not wait for it. The entries are read again
// (see read.go) and found written.
const ackPatience = time.Second

// handle persists entries delivered to consumer; malformed ones go to the
// dead-letter stream at once. It reports whether every entry was settled:
// written or parked, and acknowledged; those that were not stay pending
// to consumer.
func (w *Writers) handle(consumer string, bk gate.Bucket, msgs []redis.XMessage) (settled bool) {
	batch := make([]*store.Queued, 0, len(msgs))
	var bad []redis.XMessage
	for _, m := range msgs {
		q, err := ParseEntry(bk.Item, m)
		if err != nil {
			bad = append(bad, m)
			continue
		}
		batch = append(batch, q)
	}
	settled = true
	if len(bad) > 0 {
		settled = w.deadLetter(bk, bad, "malformed entry")
	}
	// The claim is renewed for as long as the batch is in flight: a
	// transaction stalled on the database must not let it lapse.
	defer w.renewing(consumer, bk)()
	// A batch carries one queue epoch (entries of two gates can meet only
	// when a claimed batch straddles a rebuild).
	for len(batch) > 0 {
		n := 1
		for n < len(batch) && batch[n].Epoch == batch[0].Epoch {
			n++
		}
		settled = w.persist(consumer, bk, batch[:n]) && settled
		batch = batch[n:]
	}
	return settled
}

// persist writes a batch, retrying with backoff while the database is out.
// A batch that fails for another reason is split, and an entry that keeps
// failing on its own goes to the dead-letter stream. Its caller (handle)
// renews the claim meanwhile, so no other writer takes the entries over.
// It reports whether the batch was settled (see handle).
func (w *Writers) persist(consumer string, bk gate.Bucket, batch []*store.Queued) bool {
	wait := newBackoff()
	failures := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		start := time.Now()
		res, err := w.write(ctx, bk, batch)
		cancel()
		if errors.Is(err, store.ErrQueueLost) {
			w.log.Error("lua-async: a batch from a queue Redis lost is not written; the gate was rebuilt without it (see the README on what a 202 survives)",
				"item", bk.Item, "bucket", bk.B, "orders", len(batch), "err", err)
			if o := w.cfg.Observer; o != nil {
				o.QueueLost(len(batch))
			}
			return true
		}
		if err == nil {
			if o := w.cfg.Observer; o != nil {
				o.Persisted(len(res.Written), len(res.Already), len(res.Failed), time.Since(start))
			}
			if w.cfg.AfterCommit != nil {
				w.cfg.AfterCommit()
			}
			if len(res.Failed) > 0 {
				w.log.Error("lua-async: admitted orders refused by the database (Redis lost data?); recorded as failed",
					"item", bk.Item, "bucket", bk.B, "failed", len(res.Failed))
			}
			return w.ack(bk, batch)
		}
		outage := errors.Is(err, stock.ErrUnavailable)
		if o := w.cfg.Observer; o != nil {
			o.WriteFailed(outage)
		}
		if !outage {
			failures++
			// A batch is split before any of it goes to the dead-letter
			// stream (MaxDeliveries 1 dead-lettered a whole batch for one
			// refused order): only an entry failing on its own does.
			if len(batch) > 1 && (failures >= 2 || failures >= w.cfg.MaxDeliveries) {
				w.log.Warn("lua-async writers: batch keeps failing; writing its orders one by one", "item", bk.Item, "bucket", bk.B, "orders", len(batch), "err", err)
				settled := true
				for _, q := range batch {
					if w.stopped() {
						return false
					}
					settled = w.persist(consumer, bk, []*store.Queued{q}) && settled
				}
				return settled
			}
			if failures >= w.cfg.MaxDeliveries {
				msgs := make([]redis.XMessage, len(batch))
				for i, q := range batch {
					msgs[i] = message(q)
				}
				return w.deadLetter(bk, msgs, err.Error())
			}
		}
		if failures <= 1 && (wait.n == 0 || wait.every(10*time.Second)) {
			w.log.Warn("lua-async writers: batch not persisted; retrying", "item", bk.Item, "bucket", bk.B, "orders", len(batch), "outage", outage, "err", err)
		}
		if !w.sleep(wait.next()) {
			return false // stopping: the entries stay pending for another writer
		}
	}
}

// write persists a batch of stream bk: on the items row, or on bucket row
// bk.B of an item with several buckets (whose stream holds only the orders
// of buyers whose home is bk.B).
func (w *Writers) write(ctx context.Context, bk gate.Bucket, batch []*store.Queued) (store.Persisted, error) {
	if bk.K > 1 {
		return w.store.PersistQueuedBucket(ctx, bk.Item, bk.B, batch, store.Now())
	}
	return w.store.PersistQueued(ctx, bk.Item, batch, store.Now())
}

// ack acknowledges and deletes persisted entries and drops their queued
// markers, in one MULTI (all in the item's slot), then the markers'
// indexes. Only entries this writer just persisted are deleted: nothing
// unacknowledged is ever trimmed. If Redis is out it keeps trying for
// ackPatience, then reports false: the entries stay pending, are read
// again, and found done.
func (w *Writers) ack(bk gate.Bucket, batch []*store.Queued) bool {
	ids := make([]string, len(batch))
	markers := make([]string, len(batch))
	for i, q := range batch {
		ids[i] = q.Entry
		markers[i] = w.keys.Bucket(bk).Queued(q.ID)
	}
	stream := w.streamKey(bk)
	err := w.patiently(func(ctx context.Context) error {
		_, err := w.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.XAck(ctx, stream, Group, ids...)
			p.XDel(ctx, stream, ids...)
			p.Del(ctx, markers...)
			return nil
		})
		return err
	})
	if err != nil {
		w.log.Warn("lua-async writers: persisted entries not acknowledged; left pending, to be read again and found written",
			"item", bk.Item, "bucket", bk.B, "entries", len(ids), "err", err)
		return false
	}
	w.dropIndexes(batch)
	return true
}

// patiently runs try, each attempt within 2s, with backoff, until it
// succeeds, ackPatience has passed, or the writers stop; the last error.
func (w *Writers) patiently(try func(ctx context.Context) error) error {
	start := time.Now()
	wait := newBackoff()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := try(ctx)
		cancel()
		if err == nil || time.Since(start) >= ackPatience {
			return err
		}
		if !w.sleep(wait.next()) {
			return err
		}
	}
}

// dropIndexes deletes the orders' indexes (Keys.OrderIndex), one DEL each:
// they lie in as many slots as there are orders. Best effort: an index
// left behind points at no marker and expires.
func (w *Writers) dropIndexes(batch []*store.Queued) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, q := range batch {
			p.Del(ctx, w.keys.OrderIndex(q.ID))
		}
		return nil
	})
	if err != nil {
		w.log.Debug("lua-async writers: order indexes not dropped; they expire", "orders", len(batch), "err", err)
	}
}
