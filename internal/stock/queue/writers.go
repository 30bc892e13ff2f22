package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
)

// batchTimeout bounds one batch's transaction.
const batchTimeout = 5 * time.Second

// Writers persist the orders lua-async queues in Redis streams, one stream
// per item, through one consumer group. Each entry is acknowledged (and
// deleted) only after its transaction committed, so a writer that dies
// loses nothing: its entries stay unacknowledged and another writer takes
// them over once the dead one's lease is gone (see lease.go). Writing is
// idempotent, so an entry written twice (a writer that died between COMMIT
// and XACK) is done, not doubled.
type Writers struct {
	cfg   Config
	store *store.Store
	rdb   redis.UniversalClient
	keys  gate.Keys
	log   *slog.Logger
	name  string // consumer name base: host, pid and a random part
	// oneStreamPerRead: on a Redis Cluster one XREADGROUP may name only
	// streams of one slot, and every item's stream has a slot of its own.
	oneStreamPerRead bool

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

// StartWriters runs cfg.Writers writers (none for NoWriters), one claimer
// and the heartbeat of their leases; the leases are set before any of them
// reads. Close stops them. log nil is slog.Default().
func StartWriters(st *store.Store, rdb redis.UniversalClient, keys gate.Keys, cfg Config, log *slog.Logger) (*Writers, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	host, _ := os.Hostname()
	w := &Writers{cfg: cfg, store: st, rdb: rdb, keys: keys, log: log,
		name:    fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(3)),
		grouped: map[int64]bool{}, stop: make(chan struct{}), hbStop: make(chan struct{})}
	_, w.oneStreamPerRead = rdb.(*redis.ClusterClient)
	w.start()
	return w, nil
}

// Count is how many writer goroutines run (0: none).
func (w *Writers) Count() int { return w.cfg.Writers }

func (w *Writers) start() {
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

// Close stops the writers after their current batch and waits for them,
// then drops their leases: entries they had not acknowledged are taken
// over by another process's writers at once.
func (w *Writers) Close() {
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

func (w *Writers) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// sleep waits d or until stop; false when stopped.
func (w *Writers) sleep(d time.Duration) bool {
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
func (w *Writers) active(ctx context.Context) []int64 {
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

// Added makes a new item's stream known at once (this process created it).
func (w *Writers) Added(id int64) {
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
func (w *Writers) regroup() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.grouped = map[int64]bool{}
}

// ensureGroup creates the item's consumer group at the start of the stream
// (creating the stream if needed), so entries added before are delivered.
func (w *Writers) ensureGroup(ctx context.Context, id int64) error {
	err := w.rdb.XGroupCreateMkStream(ctx, w.keys.Stream(id), Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return gate.Error("create consumer group", err)
	}
	return nil
}

func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// writer reads new entries of every lua-async stream and persists them.
func (w *Writers) writer(consumer string) {
	defer w.wg.Done()
	ctx := context.Background()
	wait := newBackoff()
	idle := &idleWait{max: w.cfg.Block}
	for !w.stopped() {
		items := w.active(ctx)
		if len(items) == 0 {
			w.sleep(w.cfg.Block)
			continue
		}
		res, err := w.read(ctx, consumer, items, idle)
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
			if len(st.msgs) > 0 {
				w.handle(consumer, st.item, st.msgs)
			}
		}
	}
}

// itemStream is what one read got from an item's stream.
type itemStream struct {
	item int64
	msgs []redis.XMessage
}

// read takes new entries of the items' streams for consumer: one blocking
// XREADGROUP over every stream, or, on a Redis Cluster with several items,
// one XREADGROUP per stream in a pipeline, without blocking (a blocking
// read of one would starve the others); when all are empty it waits a
// little, longer the longer they stay empty, up to the block time.
// redis.Nil when there was nothing.
func (w *Writers) read(ctx context.Context, consumer string, items []int64, idle *idleWait) ([]itemStream, error) {
	if !w.oneStreamPerRead || len(items) == 1 {
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
		res, err := w.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: consumer,
			Streams: streams, Count: int64(w.cfg.Batch), Block: w.cfg.Block}).Result()
		if err != nil {
			return nil, err
		}
		out := make([]itemStream, 0, len(res))
		for _, st := range res {
			if id, ok := byStream[st.Stream]; ok {
				out = append(out, itemStream{item: id, msgs: st.Messages})
			}
		}
		return out, nil
	}
	cmds := make([]*redis.XStreamSliceCmd, len(items))
	_, _ = w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range items {
			cmds[i] = p.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: consumer,
				Streams: []string{w.keys.Stream(id), ">"}, Count: int64(w.cfg.Batch), Block: -1})
		}
		return nil
	}) // each command carries its own error
	var out []itemStream
	for i, cmd := range cmds {
		res, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, st := range res {
			out = append(out, itemStream{item: items[i], msgs: st.Messages})
		}
	}
	if len(out) == 0 {
		w.sleep(idle.next())
		return nil, redis.Nil
	}
	idle.reset()
	return out, nil
}

// idleWait is how long a writer polling streams one by one waits when all
// were empty: from 5ms, doubling, up to max.
type idleWait struct{ d, max time.Duration }

func (i *idleWait) next() time.Duration {
	i.d = min(max(2*i.d, 5*time.Millisecond), i.max)
	return i.d
}

func (i *idleWait) reset() { i.d = 0 }

// handle persists entries delivered to consumer; malformed ones go to the
// dead-letter stream at once.
func (w *Writers) handle(consumer string, itemID int64, msgs []redis.XMessage) {
	batch := make([]*store.Queued, 0, len(msgs))
	var bad []redis.XMessage
	for _, m := range msgs {
		q, err := ParseEntry(itemID, m)
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
func (w *Writers) persist(consumer string, itemID int64, batch []*store.Queued) {
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

// ack acknowledges and deletes persisted entries and drops their queued
// markers, in one MULTI (all in the item's slot), then the markers'
// indexes. Only entries this writer just persisted are deleted: nothing
// unacknowledged is ever trimmed. If Redis is out it keeps trying until
// stopped; an entry left behind is delivered again and found done.
func (w *Writers) ack(itemID int64, batch []*store.Queued) {
	ids := make([]string, len(batch))
	markers := make([]string, len(batch))
	for i, q := range batch {
		ids[i] = q.Entry
		markers[i] = w.keys.Queued(itemID, q.ID)
	}
	stream := w.keys.Stream(itemID)
	wait := newBackoff()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := w.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.XAck(ctx, stream, Group, ids...)
			p.XDel(ctx, stream, ids...)
			p.Del(ctx, markers...)
			return nil
		})
		cancel()
		if err == nil {
			break
		}
		if wait.n == 0 {
			w.log.Warn("lua-async writers: persisted entries not acknowledged yet; retrying", "item", itemID, "err", err)
		}
		if !w.sleep(wait.next()) {
			return
		}
	}
	w.dropIndexes(batch)
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
