package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	items      []gate.Bucket // the streams: one per item, or per bucket of an item with several
	refreshed  time.Time
	grouped    map[gate.Bucket]bool
	groupRetry map[gate.Bucket]time.Time // no group creation before (Redis failed)
	groupWarn  time.Time                 // last warning about it

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
		grouped: map[gate.Bucket]bool{}, groupRetry: map[gate.Bucket]time.Time{}, stop: make(chan struct{}), hbStop: make(chan struct{})}
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

// active lists the lua-async streams (one per item, or one per bucket of
// an item with several), from the database at most once a second, and
// makes sure each stream has the consumer group.
func (w *Writers) active(ctx context.Context) []gate.Bucket {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.refreshed) >= time.Second {
		if items, err := w.store.ItemBucketsSoldBy(ctx, stock.StrategyLuaAsync); err == nil {
			w.items = w.items[:0]
			for _, it := range items {
				w.items = append(w.items, gate.AllBuckets(it.ID, it.Buckets)...)
			}
			w.refreshed = time.Now()
		} else if w.refreshed.IsZero() || time.Since(w.refreshed) > 10*time.Second {
			w.log.Warn("lua-async writers: cannot list items; using the last list", "err", err)
			w.refreshed = time.Now() // retry in a second, warn at most every 10
		}
	}
	for _, id := range w.items {
		if w.grouped[id] || time.Now().Before(w.groupRetry[id]) {
			continue
		}
		if err := w.ensureGroup(ctx, id); err != nil {
			// Its master is out: try it again in a second, warn every
			// ten; the other items' streams are read meanwhile. One
			// failure a call: each may take the whole timeout.
			w.groupRetry[id] = time.Now().Add(time.Second)
			if time.Since(w.groupWarn) >= 10*time.Second {
				w.groupWarn = time.Now()
				w.log.Warn("lua-async writers: cannot create consumer group; retrying", "item", id.Item, "bucket", id.B, "err", err)
			}
			break
		}
		w.grouped[id] = true
	}
	out := make([]gate.Bucket, 0, len(w.items))
	for _, id := range w.items {
		if w.grouped[id] {
			out = append(out, id)
		}
	}
	return out
}

// Added makes a new item's streams (one per bucket) known at once (this
// process created it).
func (w *Writers) Added(id int64, buckets int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, have := range w.items {
		if have.Item == id {
			return
		}
	}
	w.items = append(w.items, gate.AllBuckets(id, buckets)...)
}

// regroup forgets that the item's group exists, after Redis said it is
// missing (its master lost its data): the next active() creates it again.
func (w *Writers) regroup(id gate.Bucket) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.grouped, id)
}

// ensureGroup creates the stream's consumer group at its start (creating
// the stream if needed), so entries added before are delivered.
func (w *Writers) ensureGroup(ctx context.Context, id gate.Bucket) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := w.rdb.XGroupCreateMkStream(ctx, w.streamKey(id), Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return gate.Error("create consumer group", err)
	}
	return nil
}

// streamKey is the stream of bk: the item's (Keys.Stream) for bucket 0,
// the bucket's own otherwise.
func (w *Writers) streamKey(bk gate.Bucket) string { return w.keys.Bucket(bk).Stream }

func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
