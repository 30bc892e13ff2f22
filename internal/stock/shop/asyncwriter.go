package shop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
)

// asyncGroup is the consumer group every writer of every process joins.
const asyncGroup = "writers"

// AsyncConfig tunes the lua-async pipeline. Zero values mean the defaults.
type AsyncConfig struct {
	// Writers is how many goroutines of this process persist queued
	// orders. 0 runs none: another process (seckill worker) does it.
	Writers int
	// Batch is the most orders a writer reads, and writes in one
	// transaction, at a time. Default 500.
	Batch int
	// Block is how long a writer's XREADGROUP waits for entries. Default 200ms.
	Block time.Duration
	// ClaimIdle is how long an entry may sit delivered but unacknowledged
	// before another writer claims it (XAUTOCLAIM), whatever its writer's
	// lease says: the slow backstop. A writer renews its entries every
	// quarter of ClaimIdle while it works on them. Default 30s.
	ClaimIdle time.Duration
	// Lease is how long a writer's liveness lease lives without renewal
	// (a heartbeat renews it four times as often). Entries of a writer
	// whose lease is gone are taken over at once: this, not ClaimIdle,
	// bounds recovery after a crash. Default 1s.
	Lease time.Duration
	// MaxDeliveries is how many deliveries an entry gets before it goes to
	// the dead-letter stream. Default 5.
	MaxDeliveries int
	// PendingTTL bounds the life of an order's pending marker (the record
	// that answers GET /orders/{id} until the order is written). Default 7 days.
	PendingTTL time.Duration
	// Observer receives the writers' events (metrics). Default none.
	Observer AsyncObserver
	// Durability is what a 202 waits for: DurabilityMemory (default) or
	// DurabilityFsync.
	Durability string
	// DurabilityCheck is how often DurabilityFsync re-reads Redis's
	// settings. Default 5s.
	DurabilityCheck time.Duration
	// AfterCommit, when set, runs after a batch commits and before it is
	// acknowledged: a fault-injection point for crash tests.
	AfterCommit func()
}

// AsyncObserver receives the writers' events. It must be fast and safe for
// concurrent use.
type AsyncObserver interface {
	// Persisted reports one committed batch: orders written, orders found
	// already done (redeliveries), orders recorded as failed, and how long
	// the transaction took.
	Persisted(written, already, failed int, took time.Duration)
	// DeadLettered reports entries moved to the dead-letter stream.
	DeadLettered(n int)
	// WriteFailed reports a failed attempt to persist a batch; outage is
	// true when the database or Redis could not be reached.
	WriteFailed(outage bool)
	// QueueLost reports queued orders not written because Redis lost them
	// (its data) before their batch committed.
	QueueLost(n int)
}

func (c *AsyncConfig) withDefaults() {
	if c.Batch <= 0 {
		c.Batch = maxBatch
	}
	if c.Block <= 0 {
		c.Block = 200 * time.Millisecond
	}
	if c.ClaimIdle <= 0 {
		c.ClaimIdle = 30 * time.Second
	}
	if c.Lease <= 0 {
		c.Lease = defaultLease
	}
	if c.MaxDeliveries <= 0 {
		c.MaxDeliveries = 5
	}
	if c.Durability == "" {
		c.Durability = DurabilityMemory
	}
	if c.DurabilityCheck <= 0 {
		c.DurabilityCheck = 5 * time.Second
	}
	if c.PendingTTL <= 0 {
		c.PendingTTL = 7 * 24 * time.Hour
	}
}

// asyncWriters persist the orders lua-async queues in Redis streams, one
// stream per item, through one consumer group. Each entry is acknowledged
// (and deleted) only after its transaction committed, so a writer that dies
// loses nothing: its entries stay pending and another writer takes them over
// once the dead one's lease is gone (see asynclease.go). Writing is idempotent, so an entry written twice (a
// writer that died between COMMIT and XACK) is done, not doubled.
type asyncWriters struct {
	cfg   AsyncConfig
	store *store.Store
	rdb   redis.UniversalClient
	keys  gate.Keys
	log   *slog.Logger
	name  string // consumer name base: host, pid and a random part

	mu         sync.Mutex
	items      []int64
	refreshed  time.Time
	grouped    map[int64]bool
	groupRetry time.Time // no group creation before (Redis failed)
	groupWarn  time.Time // last warning about it

	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	hbStop chan struct{} // stops the heartbeat, after the writers
	hbWG   sync.WaitGroup
}

func newAsyncWriters(cfg AsyncConfig, st *store.Store, rdb redis.UniversalClient, keys gate.Keys, log *slog.Logger) *asyncWriters {
	host, _ := os.Hostname()
	return &asyncWriters{cfg: cfg, store: st, rdb: rdb, keys: keys, log: log,
		name:    fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(3)),
		grouped: map[int64]bool{}, stop: make(chan struct{}), hbStop: make(chan struct{})}
}

// start runs cfg.Writers writers, one claimer and the heartbeat of their
// leases; the leases are set before any of them reads.
func (w *asyncWriters) start() {
	if w.cfg.Writers <= 0 {
		return
	}
	if err := w.beat(); err != nil {
		w.log.Warn("lua-async writers: cannot set the liveness leases yet; retrying", "err", err)
	}
	w.hbWG.Add(1)
	go w.heartbeat()
	for i := 0; i < w.cfg.Writers; i++ {
		w.wg.Add(1)
		go w.writer(fmt.Sprintf("%s-w%d", w.name, i))
	}
	w.wg.Add(1)
	go w.claimer(w.name + "-claim")
}

// close stops the writers after their current batch and waits for them,
// then drops their leases: entries they had not acknowledged are taken
// over by another process's writers at once.
func (w *asyncWriters) close() {
	w.once.Do(func() {
		close(w.stop)
		w.wg.Wait()
		if w.cfg.Writers > 0 {
			close(w.hbStop)
			w.hbWG.Wait()
			w.dropLeases()
		}
	})
	w.wg.Wait()
}

func (w *asyncWriters) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// sleep waits d or until stop; false when stopped.
func (w *asyncWriters) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.stop:
		return false
	case <-t.C:
		return true
	}
}

// active lists the lua-async items, from the database at most once a
// second, and makes sure each stream has the consumer group.
func (w *asyncWriters) active(ctx context.Context) []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.refreshed) >= time.Second {
		if ids, err := w.store.ItemsSoldBy(ctx, stock.StrategyLuaAsync); err == nil {
			w.items = ids
			w.refreshed = time.Now()
		} else if w.refreshed.IsZero() || time.Since(w.refreshed) > 10*time.Second {
			w.log.Warn("lua-async writers: cannot list items; using the last list", "err", err)
			w.refreshed = time.Now() // retry in a second, warn at most every 10
		}
	}
	for _, id := range w.items {
		if w.grouped[id] || time.Now().Before(w.groupRetry) {
			continue
		}
		if err := w.ensureGroup(ctx, id); err != nil {
			// Redis is out: try again in a second, warn every ten.
			w.groupRetry = time.Now().Add(time.Second)
			if time.Since(w.groupWarn) >= 10*time.Second {
				w.groupWarn = time.Now()
				w.log.Warn("lua-async writers: cannot create consumer group; retrying", "item", id, "err", err)
			}
			break
		}
		w.grouped[id] = true
	}
	out := make([]int64, 0, len(w.items))
	for _, id := range w.items {
		if w.grouped[id] {
			out = append(out, id)
		}
	}
	return out
}

// added makes a new item's stream known at once (this process created it).
func (w *asyncWriters) added(id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, have := range w.items {
		if have == id {
			return
		}
	}
	w.items = append(w.items, id)
}

// regroup forgets which groups exist, after Redis said one is missing (it
// lost its data): the next active() creates them again.
func (w *asyncWriters) regroup() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.grouped = map[int64]bool{}
}

// ensureGroup creates the item's consumer group at the start of the stream
// (creating the stream if needed), so entries added before are delivered.
func (w *asyncWriters) ensureGroup(ctx context.Context, id int64) error {
	err := w.rdb.XGroupCreateMkStream(ctx, w.keys.Stream(id), asyncGroup, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return gate.Error("create consumer group", err)
	}
	return nil
}

func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// writer reads new entries of every lua-async stream and persists them.
func (w *asyncWriters) writer(consumer string) {
	defer w.wg.Done()
	ctx := context.Background()
	wait := newBackoff()
	for !w.stopped() {
		items := w.active(ctx)
		if len(items) == 0 {
			w.sleep(w.cfg.Block)
			continue
		}
		streams := make([]string, 0, 2*len(items))
		byStream := make(map[string]int64, len(items))
		for _, id := range items {
			s := w.keys.Stream(id)
			streams = append(streams, s)
			byStream[s] = id
		}
		for range items {
			streams = append(streams, ">")
		}
		res, err := w.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: asyncGroup, Consumer: consumer,
			Streams: streams, Count: int64(w.cfg.Batch), Block: w.cfg.Block}).Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue
		case isNoGroup(err):
			w.log.Warn("lua-async writers: a consumer group is missing (Redis lost data?); creating it again", "err", err)
			w.regroup()
			continue
		case err != nil:
			if d := wait.next(); d == wait.first() || wait.every(10*time.Second) {
				w.log.Warn("lua-async writers: cannot read the streams; retrying", "err", err)
			}
			w.sleep(wait.current())
			continue
		}
		wait.reset()
		for _, st := range res {
			if id, ok := byStream[st.Stream]; ok && len(st.Messages) > 0 {
				w.handle(consumer, id, st.Messages)
			}
		}
	}
}

// handle persists entries delivered to consumer; malformed ones go to the
// dead-letter stream at once.
func (w *asyncWriters) handle(consumer string, itemID int64, msgs []redis.XMessage) {
	batch := make([]*store.Queued, 0, len(msgs))
	var bad []redis.XMessage
	for _, m := range msgs {
		q, err := parseQueued(itemID, m)
		if err != nil {
			bad = append(bad, m)
			continue
		}
		batch = append(batch, q)
	}
	if len(bad) > 0 {
		w.deadLetter(itemID, bad, "malformed entry")
	}
	// The claim is renewed for as long as the batch is in flight: a
	// transaction stalled on the database must not let it lapse.
	defer w.renewing(consumer, itemID)()
	// A batch carries one queue epoch (entries of two gates can meet only
	// when a claimed batch straddles a rebuild).
	for len(batch) > 0 {
		n := 1
		for n < len(batch) && batch[n].Epoch == batch[0].Epoch {
			n++
		}
		w.persist(consumer, itemID, batch[:n])
		batch = batch[n:]
	}
}

// persist writes a batch, retrying with backoff while the database is out.
// A batch that fails for another reason is split, and an entry that keeps
// failing on its own goes to the dead-letter stream. Its caller (handle)
// renews the claim meanwhile, so no other writer takes the entries over.
func (w *asyncWriters) persist(consumer string, itemID int64, batch []*store.Queued) {
	wait := newBackoff()
	failures := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		start := time.Now()
		res, err := w.store.PersistQueued(ctx, itemID, batch, store.Now())
		cancel()
		if errors.Is(err, store.ErrQueueLost) {
			w.log.Error("lua-async: a batch from a queue Redis lost is not written; the gate was rebuilt without it (see the README on what a 202 survives)",
				"item", itemID, "orders", len(batch), "err", err)
			if o := w.cfg.Observer; o != nil {
				o.QueueLost(len(batch))
			}
			return
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
					"item", itemID, "failed", len(res.Failed))
			}
			w.ack(itemID, batch)
			return
		}
		outage := errors.Is(err, stock.ErrUnavailable)
		if o := w.cfg.Observer; o != nil {
			o.WriteFailed(outage)
		}
		if !outage {
			failures++
			if len(batch) > 1 && failures >= 2 {
				w.log.Warn("lua-async writers: batch keeps failing; writing its orders one by one", "item", itemID, "orders", len(batch), "err", err)
				for _, q := range batch {
					if w.stopped() {
						return
					}
					w.persist(consumer, itemID, []*store.Queued{q})
				}
				return
			}
			if failures >= w.cfg.MaxDeliveries {
				msgs := make([]redis.XMessage, len(batch))
				for i, q := range batch {
					msgs[i] = message(q)
				}
				w.deadLetter(itemID, msgs, err.Error())
				return
			}
		}
		if failures <= 1 && (wait.n == 0 || wait.every(10*time.Second)) {
			w.log.Warn("lua-async writers: batch not persisted; retrying", "item", itemID, "orders", len(batch), "outage", outage, "err", err)
		}
		if !w.sleep(wait.next()) {
			return // stopping: the entries stay pending for another writer
		}
	}
}

// ack acknowledges and deletes persisted entries and drops their pending
// markers, in one MULTI. Only entries this writer just persisted are
// deleted: nothing unacknowledged is ever trimmed. If Redis is out it keeps
// trying until stopped; an entry left behind is delivered again and found
// done.
func (w *asyncWriters) ack(itemID int64, batch []*store.Queued) {
	ids := make([]string, len(batch))
	markers := make([]string, len(batch))
	for i, q := range batch {
		ids[i] = q.Entry
		markers[i] = w.keys.QueuedOrder(q.ID)
	}
	stream := w.keys.Stream(itemID)
	wait := newBackoff()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := w.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.XAck(ctx, stream, asyncGroup, ids...)
			p.XDel(ctx, stream, ids...)
			p.Del(ctx, markers...)
			return nil
		})
		cancel()
		if err == nil {
			return
		}
		if wait.n == 0 {
			w.log.Warn("lua-async writers: persisted entries not acknowledged yet; retrying", "item", itemID, "err", err)
		}
		if !w.sleep(wait.next()) {
			return
		}
	}
}

// deadLetter moves entries to the item's dead-letter stream with the reason,
// and acknowledges them, in one MULTI. Their pending markers stay: the
// orders were admitted and are not written; an admin requeues them once
// the cause is fixed.
func (w *asyncWriters) deadLetter(itemID int64, msgs []redis.XMessage, reason string) {
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
				vals := map[string]any{"entry": m.ID, "reason": reason, "at": now}
				for k, v := range m.Values {
					vals[k] = v
				}
				p.XAdd(ctx, &redis.XAddArgs{Stream: dead, Values: vals})
			}
			p.XAck(ctx, stream, asyncGroup, ids...)
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

// claimer takes over entries whose writer died. Four times per lease it
// takes over, per stream, the entries of consumers whose lease is gone; every
// half ClaimIdle it also claims whatever has been idle longer than ClaimIdle
// (XAUTOCLAIM), the backstop. An entry delivered more than MaxDeliveries
// times goes to the dead-letter stream; the others are persisted by the
// claimer itself.
func (w *asyncWriters) claimer(consumer string) {
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

func (w *asyncWriters) claimStream(consumer string, itemID int64) {
	stream := w.keys.Stream(itemID)
	start := "0-0"
	for !w.stopped() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		msgs, next, err := w.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: stream, Group: asyncGroup,
			MinIdle: w.cfg.ClaimIdle, Start: start, Count: int64(w.cfg.Batch), Consumer: consumer}).Result()
		var counts map[string]int64
		if err == nil && len(msgs) > 0 {
			counts, err = w.deliveries(ctx, stream, consumer, msgs)
		}
		cancel()
		if err != nil {
			if isNoGroup(err) {
				w.regroup()
			} else if !errors.Is(err, redis.Nil) {
				w.log.Warn("lua-async writers: cannot claim idle entries", "item", itemID, "err", err)
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
			w.log.Warn("lua-async writers: claimed entries of a writer that stopped", "item", itemID, "entries", len(msgs), "dead_lettered", len(over))
			if len(over) > 0 {
				w.deadLetter(itemID, over, fmt.Sprintf("delivered more than %d times without being persisted", w.cfg.MaxDeliveries))
			}
			if len(ok) > 0 {
				w.handle(consumer, itemID, ok)
			}
		}
		if next == "0-0" || next == "" {
			return
		}
		start = next
	}
}

// deliveries reads how often each claimed entry has been delivered.
func (w *asyncWriters) deliveries(ctx context.Context, stream, consumer string, msgs []redis.XMessage) (map[string]int64, error) {
	pend, err := w.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: asyncGroup,
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

// parseQueued reads one stream entry written by enqueue.lua.
func parseQueued(itemID int64, m redis.XMessage) (*store.Queued, error) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	q := &store.Queued{Entry: m.ID, ID: str("o"), ItemID: itemID, UserID: str("u"), Key: str("k")}
	ms, err := strconv.ParseInt(str("t"), 10, 64)
	if e := str("e"); e != "" && err == nil {
		q.Epoch, err = strconv.ParseInt(e, 10, 64)
	}
	if err != nil || !stock.ValidOrderID(q.ID) || !stock.ValidUserID(q.UserID) || len(q.Key) > stock.MaxIdemKeyLen {
		return nil, fmt.Errorf("malformed entry %s: %v", m.ID, m.Values)
	}
	q.Created = time.UnixMilli(ms).UTC()
	return q, nil
}

// message is q as a stream entry again (for the dead-letter stream).
func message(q *store.Queued) redis.XMessage {
	return redis.XMessage{ID: q.Entry, Values: map[string]any{"o": q.ID, "u": q.UserID, "k": q.Key,
		"t": strconv.FormatInt(q.Created.UnixMilli(), 10), "e": strconv.FormatInt(q.Epoch, 10)}}
}

// backoff doubles from 50ms to 5s.
type backoff struct {
	n    int
	d    time.Duration
	last time.Time // last time every() said yes
}

func newBackoff() *backoff                { return &backoff{} }
func (b *backoff) first() time.Duration   { return 50 * time.Millisecond }
func (b *backoff) current() time.Duration { return max(b.d, b.first()) }
func (b *backoff) reset()                 { b.n, b.d = 0, 0 }

func (b *backoff) next() time.Duration {
	b.n++
	if b.d == 0 {
		b.d = b.first()
	} else {
		b.d = min(2*b.d, 5*time.Second)
	}
	return b.d
}

// every reports true at most once per period (for rate-limited logging).
func (b *backoff) every(period time.Duration) bool {
	if time.Since(b.last) < period {
		return false
	}
	b.last = time.Now()
	return true
}
