package queue

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// deadLetter moves entries to the item's dead-letter stream with the reason,
// and acknowledges them, in one MULTI. Their pending markers stay: the
// orders were admitted and are not written; an admin requeues them once
// the cause is fixed.
func (w *Writers) deadLetter(itemID int64, msgs []redis.XMessage, reason string) {
	stream, dead := w.keys.Stream(itemID), w.keys.Dead(itemID)
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	wait := newBackoff()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
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
		cancel()
		if err == nil {
			break
		}
		if !w.sleep(wait.next()) {
			return
		}
	}
	w.log.Error("lua-async: entries moved to the dead-letter stream", "item", itemID, "entries", len(msgs), "reason", reason, "stream", dead)
	if o := w.cfg.Observer; o != nil {
		o.DeadLettered(len(msgs))
	}
}
