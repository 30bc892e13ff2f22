package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
)

// What a lua-async 202 waits for (Config.Durability).
const (
	// DurabilityMemory answers once the order is queued in Redis memory.
	// Redis losing its data (a restart without persistence, a failover to a
	// replica that had not received the write, FLUSHALL) loses it.
	DurabilityMemory = "memory"
	// DurabilityFsync answers only while Redis writes every command to its
	// append-only file and fsyncs it before replying (appendonly yes,
	// appendfsync always): the queued order then survives a Redis crash or
	// restart, and a power loss of its host. Checked at start and every
	// DurabilityCheck; while Redis does not do it, lua-async orders get 503.
	DurabilityFsync = "fsync"
)

// errNotFsyncing is the refusal while Redis does not fsync every write.
var errNotFsyncing = errors.New("redis does not fsync every write (appendonly yes, appendfsync always), which SECKILL_ASYNC_DURABILITY=fsync requires")

// CheckFsync reads Redis's persistence settings: every master's, on a
// Redis Cluster, since each keeps its own slots' queues.
func CheckFsync(ctx context.Context, rdb redis.UniversalClient) error {
	return gate.EachMaster(ctx, rdb, func(ctx context.Context, addr string, c redis.Cmdable) error {
		cfg, err := c.ConfigGet(ctx, "append*").Result()
		if err != nil {
			return gate.Error("CONFIG GET append* on "+addr, err)
		}
		if cfg["appendonly"] != "yes" || cfg["appendfsync"] != "always" {
			return fmt.Errorf("%w: %s has appendonly %q, appendfsync %q", errNotFsyncing, addr, cfg["appendonly"], cfg["appendfsync"])
		}
		return nil
	})
}

// fsyncWatch keeps knowing whether Redis fsyncs every write.
type fsyncWatch struct {
	ok   atomic.Bool
	last atomic.Pointer[error]
	stop chan struct{}
	wg   sync.WaitGroup
}

// watchFsync checks once (an error refuses to start) and then every period.
func watchFsync(ctx context.Context, rdb redis.UniversalClient, period time.Duration) (*fsyncWatch, error) {
	if err := CheckFsync(ctx, rdb); err != nil {
		return nil, err
	}
	w := &fsyncWatch{stop: make(chan struct{})}
	w.ok.Store(true)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				cctx, cancel := context.WithTimeout(context.Background(), period)
				err := CheckFsync(cctx, rdb)
				cancel()
				w.ok.Store(err == nil)
				w.last.Store(&err)
			}
		}
	}()
	return w, nil
}

// check is nil while Redis fsyncs every write; otherwise ErrUnavailable.
func (w *fsyncWatch) check() error {
	if w == nil || w.ok.Load() {
		return nil
	}
	err := errNotFsyncing
	if p := w.last.Load(); p != nil && *p != nil {
		err = *p
	}
	return fmt.Errorf("lua-async order refused: %w: %w", stock.ErrUnavailable, err)
}

func (w *fsyncWatch) close() {
	if w != nil {
		close(w.stop)
		w.wg.Wait()
	}
}
