package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock/gate"
)

// A writer that dies (kill -9, OOM, a lost host) leaves the entries it read
// pending. Waiting ClaimIdle to notice is slow (30 s by default), so every
// consumer also keeps a liveness lease: a plain key with a short TTL that a
// heartbeat goroutine renews whatever the database is doing. A survivor
// that finds a consumer holding entries without a lease takes them over at
// once (takeover.lua). A live writer stalled on the database keeps its lease
// and so its entries; while it works on a batch it also renews the entries
// themselves (renew.lua), so the XAUTOCLAIM backstop leaves them alone too.

// consumers are the names this process reads the streams with.
func (w *Writers) consumers() []string {
	if w.cfg.Writers <= 0 {
		return nil
	}
	names := make([]string, 0, w.cfg.Writers+1)
	for i := 0; i < w.cfg.Writers; i++ {
		names = append(names, fmt.Sprintf("%s-w%d", w.name, i))
	}
	return append(names, w.name+"-claim")
}

func (w *Writers) isMine(consumer string) bool {
	for _, c := range w.consumers() {
		if c == consumer {
			return true
		}
	}
	return false
}

// beat sets every lease of this process, in one round trip.
func (w *Writers) beat() error {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Lease/2)
	defer cancel()
	_, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range w.consumers() {
			p.Set(ctx, w.keys.WriterLease(c), w.name, w.cfg.Lease)
		}
		return nil
	})
	return err
}

// heartbeat renews the leases four times per lease until the writers have
// stopped (close then deletes them).
func (w *Writers) heartbeat() {
	defer w.hbWG.Done()
	last := time.Now()
	lapsed := false
	t := time.NewTicker(w.cfg.Lease / 4)
	defer t.Stop()
	for {
		select {
		case <-w.hbStop:
			return
		case <-t.C:
		}
		if err := w.beat(); err != nil {
			if !lapsed && time.Since(last) > w.cfg.Lease {
				lapsed = true
				w.log.Warn("lua-async writers: liveness lease lapsed (Redis unreachable); another process may take over this one's queued orders (they are written once either way)",
					"lease", w.cfg.Lease, "err", err)
			}
			continue
		}
		last, lapsed = time.Now(), false
	}
}

// dropLeases deletes this process's leases (on a graceful stop).
func (w *Writers) dropLeases() {
	names := w.consumers()
	if len(names) == 0 {
		return
	}
	keys := make([]string, len(names))
	for i, c := range names {
		keys[i] = w.keys.WriterLease(c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, k := range keys { // plain DELs: the keys may sit on different slots
		_ = w.rdb.Del(ctx, k).Err()
	}
}

// renewing renews consumer's claim on its entries of the item's stream
// every quarter of ClaimIdle until the returned stop is called: the claim
// holds for as long as the batch is in flight, however long a transaction
// or a backoff takes.
func (w *Writers) renewing(consumer string, bk gate.Bucket) (stop func()) {
	every := max(w.cfg.ClaimIdle/4, 10*time.Millisecond)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			w.renew(consumer, bk, max(w.cfg.ClaimIdle/2, 100*time.Millisecond))
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// renew resets the idle time of the entries consumer still owns on the
// item's stream (renew.lua), within timeout.
func (w *Writers) renew(consumer string, bk gate.Bucket, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := renewScript.Run(ctx, w.rdb, []string{w.streamKey(bk)}, Group, consumer, w.cfg.Batch).Err()
	if err != nil && !errors.Is(err, redis.Nil) && !isNoGroup(err) {
		w.log.Warn("lua-async writers: cannot renew claim", "item", bk.Item, "bucket", bk.B, "err", err)
	}
}

// takeOverDead claims, on every stream, the entries of consumers whose lease
// is gone, and persists them.
func (w *Writers) takeOverDead(taker string, items []gate.Bucket) {
	dead, err := w.deadConsumers(items)
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			w.log.Warn("lua-async writers: cannot check other writers' leases", "err", err)
		}
		return
	}
	for _, d := range dead {
		if w.stopped() {
			return
		}
		w.takeOver(taker, d.item, d.consumer)
	}
}

type heldBy struct {
	item     gate.Bucket
	consumer string
}

// deadConsumers lists, per stream, the other processes' consumers that own
// pending entries and have no lease: two round trips for all streams.
func (w *Writers) deadConsumers(items []gate.Bucket) ([]heldBy, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cmds := make([]*redis.XPendingCmd, len(items))
	_, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range items {
			cmds[i] = p.XPending(ctx, w.streamKey(id), Group)
		}
		return nil
	})
	var held []heldBy
	for i, c := range cmds {
		res, cerr := c.Result()
		if cerr != nil {
			if isNoGroup(cerr) {
				w.regroup(items[i])
			}
			continue
		}
		for name, n := range res.Consumers {
			if n > 0 && !w.isMine(name) {
				held = append(held, heldBy{item: items[i], consumer: name})
			}
		}
	}
	if len(held) == 0 {
		if err != nil && !isNoGroup(err) {
			return nil, err
		}
		return nil, nil
	}
	exists := make([]*redis.IntCmd, len(held))
	if _, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, h := range held {
			exists[i] = p.Exists(ctx, w.keys.WriterLease(h.consumer))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var dead []heldBy
	for i, h := range held {
		if exists[i].Val() == 0 {
			dead = append(dead, h)
		}
	}
	return dead, nil
}

// takeOver claims a dead consumer's entries of one stream (takeover.lua),
// sends those delivered more than MaxDeliveries times to the dead-letter
// stream and persists the others.
func (w *Writers) takeOver(taker string, bk gate.Bucket, dead string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	// Entries idle for half a lease at least: a dead writer's entries are
	// older than that by the time its lease is gone, and an entry a
	// consumer just read is never taken from under it.
	minIdle := (w.cfg.Lease / 2).Milliseconds()
	res, err := takeoverScript.Run(ctx, w.rdb, []string{w.streamKey(bk)},
		Group, dead, taker, minIdle, w.cfg.Batch).Slice()
	cancel()
	if err != nil {
		if isNoGroup(err) {
			w.regroup(bk)
		} else if !errors.Is(err, redis.Nil) {
			w.log.Warn("lua-async writers: cannot take over a stopped writer's entries", "item", bk.Item, "bucket", bk.B, "writer", dead, "err", err)
		}
		return
	}
	counts, msgs, err := ParseTakeover(res)
	if err != nil {
		w.log.Error("lua-async writers: unexpected takeover reply", "item", bk.Item, "bucket", bk.B, "err", err)
		return
	}
	if len(msgs) == 0 {
		return
	}
	var over, ok []redis.XMessage
	for _, m := range msgs {
		// The claim was one more delivery.
		if counts[m.ID]+1 > int64(w.cfg.MaxDeliveries) {
			over = append(over, m)
		} else {
			ok = append(ok, m)
		}
	}
	w.log.Warn("lua-async writers: took over the entries of a writer whose lease is gone", "item", bk.Item, "bucket", bk.B,
		"writer", dead, "entries", len(msgs), "dead_lettered", len(over))
	if len(over) > 0 {
		w.deadLetter(bk, over, fmt.Sprintf("delivered more than %d times without being persisted", w.cfg.MaxDeliveries))
	}
	if len(ok) > 0 {
		w.handle(taker, bk, ok)
	}
}

// ParseTakeover reads takeover.lua's reply: the delivery counts before the
// claim, and the claimed entries.
func ParseTakeover(reply []any) (map[string]int64, []redis.XMessage, error) {
	_, res, err := gate.Reply(reply)
	if err != nil {
		return nil, nil, err
	}
	if len(res) != 2 {
		return nil, nil, fmt.Errorf("want 2 parts, got %d", len(res))
	}
	rows, _ := res[0].([]any)
	entries, _ := res[1].([]any)
	counts := make(map[string]int64, len(rows))
	for _, r := range rows {
		row, _ := r.([]any)
		if len(row) != 4 {
			return nil, nil, fmt.Errorf("pending row %v", r)
		}
		id, _ := row[0].(string)
		n, _ := row[3].(int64)
		counts[id] = n
	}
	msgs := make([]redis.XMessage, 0, len(entries))
	for _, e := range entries {
		pair, _ := e.([]any)
		if len(pair) != 2 {
			return nil, nil, fmt.Errorf("entry %v", e)
		}
		id, _ := pair[0].(string)
		fields, _ := pair[1].([]any)
		vals := make(map[string]any, len(fields)/2)
		for i := 0; i+1 < len(fields); i += 2 {
			k, _ := fields[i].(string)
			vals[k] = fields[i+1]
		}
		msgs = append(msgs, redis.XMessage{ID: id, Values: vals})
	}
	return counts, msgs, nil
}

// forgetIdleConsumers removes from the item's group the consumers of other
// processes that own nothing, have no lease and have been idle for a
// lease: every process start adds consumers, and a process that ends
// without holding anything leaves them behind. takeover.lua removes a
// consumer only if it still owns nothing, in the same step.
func (w *Writers) forgetIdleConsumers(taker string, bk gate.Bucket) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	infos, err := w.rdb.XInfoConsumers(ctx, w.streamKey(bk), Group).Result()
	if err != nil {
		return // no stream or group yet, or Redis out: the next round tries again
	}
	for _, c := range infos {
		// Idle is negative when unknown (miniredis, for a consumer that
		// never read): no sign of life either.
		if c.Pending > 0 || (c.Idle >= 0 && c.Idle < w.cfg.Lease) || w.isMine(c.Name) {
			continue
		}
		if n, err := w.rdb.Exists(ctx, w.keys.WriterLease(c.Name)).Result(); err != nil || n > 0 {
			continue
		}
		if err := takeoverScript.Run(ctx, w.rdb, []string{w.streamKey(bk)}, Group, c.Name, taker,
			w.cfg.Lease.Milliseconds(), w.cfg.Batch).Err(); err != nil {
			return
		}
	}
}
