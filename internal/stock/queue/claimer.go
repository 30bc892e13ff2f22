package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/gate"
)

// claimer takes over entries whose writer died. Four times per lease it
// takes over, per stream, the entries of consumers whose lease is gone; every
// half ClaimIdle it also claims whatever has been idle longer than ClaimIdle
// (XAUTOCLAIM), the backstop. An entry delivered more than MaxDeliveries
// times goes to the dead-letter stream; the others are persisted by the
// claimer itself.
func (w *Writers) claimer(consumer string) {
	defer w.wg.Done()
	backstop := time.Now()
	for w.sleep(w.cfg.Lease / 4) {
		items := w.active(context.Background())
		if len(items) == 0 {
			continue
		}
		w.takeOverDead(consumer, items)
		if time.Since(backstop) < max(w.cfg.ClaimIdle/2, 50*time.Millisecond) {
			continue
		}
		backstop = time.Now()
		for _, id := range items {
			if w.stopped() {
				return
			}
			w.claimStream(consumer, id)
			w.forgetIdleConsumers(consumer, id)
		}
	}
}

func (w *Writers) claimStream(consumer string, bk gate.Bucket) {
	stream := w.streamKey(bk)
	start := "0-0"
	for !w.stopped() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		msgs, next, err := w.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: stream, Group: Group,
			MinIdle: w.cfg.ClaimIdle, Start: start, Count: int64(w.cfg.Batch), Consumer: consumer}).Result()
		var counts map[string]int64
		if err == nil && len(msgs) > 0 {
			counts, err = w.deliveries(ctx, stream, consumer, msgs)
		}
		cancel()
		if err != nil {
			if isNoGroup(err) {
				w.regroup(bk)
			} else if !errors.Is(err, redis.Nil) {
				w.log.Warn("lua-async writers: cannot claim idle entries", "item", bk.Item, "bucket", bk.B, "err", err)
			}
			return
		}
		if len(msgs) > 0 {
			var over, ok []redis.XMessage
			for _, m := range msgs {
				if counts[m.ID] > int64(w.cfg.MaxDeliveries) {
					over = append(over, m)
				} else {
					ok = append(ok, m)
				}
			}
			w.log.Warn("lua-async writers: claimed entries of a writer that stopped", "item", bk.Item, "bucket", bk.B, "entries", len(msgs), "dead_lettered", len(over))
			if len(over) > 0 {
				w.deadLetter(bk, over, fmt.Sprintf("delivered more than %d times without being persisted", w.cfg.MaxDeliveries))
			}
			if len(ok) > 0 {
				w.handle(consumer, bk, ok)
			}
		}
		if next == "0-0" || next == "" {
			return
		}
		start = next
	}
}

// deliveries reads how often each claimed entry has been delivered.
func (w *Writers) deliveries(ctx context.Context, stream, consumer string, msgs []redis.XMessage) (map[string]int64, error) {
	pend, err := w.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: Group,
		Start: msgs[0].ID, End: msgs[len(msgs)-1].ID, Count: int64(len(msgs)), Consumer: consumer}).Result()
	if err != nil {
		return nil, err
	}
	counts := make(map[string]int64, len(pend))
	for _, p := range pend {
		counts[p.ID] = p.RetryCount
	}
	return counts, nil
}
