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
		Cancelled: snap.Cancelled, Queued: queued, Epoch: epoch, Roomed: snap.Roomed}); err != nil {
		return err
	}
	q.log.WarnContext(ctx, "lua-async gate rebuilt from the database and the stream", "item", id,
		"stock", it.Stock, "sold", it.Sold, "queued", len(queued), "buyers", len(snap.Users), "queue_epoch", epoch)
	return nil
}
