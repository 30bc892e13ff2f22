package queue

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
)

// BuildGate creates a lua-async item's gate after Redis lost it: taken
// is what the database sold plus the orders still queued in the item's
// stream (and its dead-letter stream) that the database does not have yet,
// and the buyers are the database's plus the queued ones.
//
// It runs holding the item's row lock (and a bucketed item's bucket rows'),
// which every writer's batch needs to take its units, so no batch commits
// while the database and the streams are read and the gate built: each
// order is counted exactly once. If the streams are empty, Redis lost the
// queue (or it had drained, and then no writer holds anything): the
// item's queue epoch moves on, so a batch some writer read from the lost
// queue can never be written after this gate was built without it
// (PersistQueued refuses the old epoch). Nothing can be queued meanwhile:
// the enqueue script refuses while the gate is missing. Rebuilders in
// other processes wait for the row lock, then find the gate built.
//
// An item with several buckets is rebuilt whole if any bucket is missing
// (what a lost bucket held cannot be known without stopping the others).
// Every bucket's meta is deleted before the streams are read, so no
// surviving bucket queues an order the read misses. Each bucket b has a
// stream of its own and a queue epoch of its own (bucket row b's): only
// the buckets whose two streams are both empty get their epoch moved on,
// so a surviving bucket's batches in flight stay valid, and only the lost
// bucket's stale batches are fenced.
func (q *Queue) BuildGate(ctx context.Context, id int64) error {
	return q.building.Do(ctx, id, func(ctx context.Context) error {
		return q.store.WithItemLocked(ctx, id, q.buildLocked)
	})
}

func (q *Queue) buildLocked(ctx context.Context, locked *store.LockedItem) error {
	id, k := locked.ID, max(1, locked.Buckets)
	if built, err := q.gate.ExistsAll(ctx, id, k); err != nil || built {
		return err // built by another process while this one waited
	}
	return q.rebuildLocked(ctx, locked)
}

// rebuildLocked rebuilds the gate of the locked item, whatever Redis holds
// of it (BuildGate, and a reconcile's repair of an item with several
// buckets).
func (q *Queue) rebuildLocked(ctx context.Context, locked *store.LockedItem) error {
	id, k := locked.ID, max(1, locked.Buckets)
	if k > 1 {
		if err := q.gate.ClearMetas(ctx, id, k); err != nil {
			return err
		}
	}
	var inFlight []redis.XMessage
	empty := make([]bool, k)
	for b, bk := range gate.AllBuckets(id, k) {
		keys := q.keys.Bucket(bk)
		n := 0
		for _, key := range []string{keys.Stream, keys.Dead} {
			msgs, err := q.rdb.XRange(ctx, key, "-", "+").Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return gate.Error("read stream for rebuild", err)
			}
			n += len(msgs)
			inFlight = append(inFlight, msgs...)
		}
		empty[b] = n == 0
	}
	var epochs []int64
	if k == 1 {
		if empty[0] {
			if err := locked.MoveQueueEpoch(ctx); err != nil {
				return err
			}
		}
	} else {
		for b := range empty {
			if empty[b] {
				if err := locked.MoveBucketQueueEpoch(ctx, b); err != nil {
					return err
				}
			}
		}
		var err error
		if epochs, err = locked.BucketQueueEpochs(ctx, k); err != nil {
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
		Cancelled: snap.Cancelled, Queued: queued, Epoch: epoch, Epochs: epochs, Roomed: snap.Roomed}); err != nil {
		return err
	}
	q.log.WarnContext(ctx, "lua-async gate rebuilt from the database and the stream", "item", id, "buckets", k,
		"stock", it.Stock, "sold", it.Sold, "queued", len(queued), "buyers", len(snap.Users), "queue_epoch", epoch, "bucket_epochs", epochs)
	return nil
}

// RebuildLocked rebuilds the gate of an item whose rows the caller holds
// locked (store.WithItemLocked), whatever Redis holds of it: a reconcile's
// repair of a lua-async item with several buckets.
func (q *Queue) RebuildLocked(ctx context.Context, locked *store.LockedItem) error {
	return q.rebuildLocked(ctx, locked)
}
