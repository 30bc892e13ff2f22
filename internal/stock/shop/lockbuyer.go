package shop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
)

// lockBuyer sells for the "lock" strategy (lockStrategy): take the item's
// Redis lock, check and write in one database transaction, release. The
// write carries the lock's
// fencing token, so a holder whose lease lapsed (a long GC pause, say)
// cannot write after the next holder did.
//
// Each item has one writer goroutine per process: requests queue to it, so
// only it contends for the Redis lock and the others wait in memory. It
// writes every order queued while it held the lock in one transaction
// (group commit), and keeps the lock while more orders queue, for at most
// maxHold, so other instances get their turn.
//
// An item with several buckets (K > 1) has a lock, a fence counter and a
// writer per bucket: an order of user u queues to bucket
// stock.HomeBucketOf(u, K), whose writer takes that bucket's lock (its key
// carries the bucket's hash tag, gate.Bucket.Tag, so a Cluster spreads an
// item's K locks over its masters) and writes bucket row b with the
// bucket's fence, which the row stores (item_stock.lock_fence). The K
// buckets of one item write in parallel.
type lockBuyer struct {
	log    *slog.Logger
	locker *lock.Client
	keys   gate.Keys
	ttl    time.Duration
	wait   time.Duration
	writer *orderWriter

	held sync.Map // writeKey -> *heldLock, touched only by the key's writer
}

// maxHold bounds how long one process keeps an item's Redis lock while
// more orders keep coming.
const maxHold = 250 * time.Millisecond

type heldLock struct {
	l     *lock.Lock
	since time.Time
}

var _ buyer = (*lockBuyer)(nil)
var _ writeGuard = (*lockBuyer)(nil)

// redisWait bounds each acquire call (Config.RedisWait): a stalled Redis
// fails a lock order as soon as a gate call would.
func newLockBuyer(st *store.Store, rdb redis.UniversalClient, keys gate.Keys, ttl, wait, redisWait time.Duration, log *slog.Logger, obs lock.Observer) *lockBuyer {
	locker := lock.New(rdb, &lock.ClientOptions{Observer: obs, CallTimeout: redisWait})
	s := &lockBuyer{log: log, locker: locker, keys: keys, ttl: ttl, wait: wait}
	s.writer = newOrderWriter(st, s)
	return s
}

// Buy queues the order to the item's writer (its buyer's home bucket's),
// which writes it under the lock.
func (s *lockBuyer) Buy(ctx context.Context, it *stock.Item, req stock.OrderRequest, orderID string, committed func(*stock.Order)) (*stock.Order, error) {
	if err := it.Window(time.Now()); err != nil {
		return nil, err
	}
	o := &stock.Order{ID: orderID, ItemID: it.ID, UserID: req.UserID}
	if err := s.writer.write(ctx, o, req.IdempotencyKey, req.Pass, it.Buckets, committed); err != nil {
		return nil, err
	}
	return o, nil
}

// lockKey is the Redis key of wk's lock: the item's for one bucket, the
// bucket's (gate.Keys.BucketLock) for several. Bucket 0's is the item's.
func (s *lockBuyer) lockKey(wk writeKey) string {
	if wk.buckets <= 1 {
		return s.keys.Lock(wk.item)
	}
	return s.keys.BucketLock(gate.Bucket{Item: wk.item, B: wk.bucket, K: wk.buckets})
}

// what names wk in errors and logs.
func (wk writeKey) what() string {
	if wk.buckets <= 1 {
		return fmt.Sprintf("item %d", wk.item)
	}
	return fmt.Sprintf("item %d bucket %d", wk.item, wk.bucket)
}

// hold returns the fence of wk's lock, taking the lock (waiting up to
// the configured wait) unless this writer holds it with a good lease.
func (s *lockBuyer) hold(ctx context.Context, wk writeKey) (int64, error) {
	v, _ := s.held.Load(wk)
	h, _ := v.(*heldLock)
	if h != nil && h.l.Context().Err() == nil && time.Since(h.since) < maxHold {
		return h.l.Fence(), nil
	}
	if h != nil {
		s.release(ctx, wk, h) // within the callers' deadline too
	}
	ctx, cancel := context.WithTimeout(ctx, s.wait)
	defer cancel()
	l, err := s.locker.Obtain(ctx, s.lockKey(wk), s.ttl, &lock.Options{Wait: s.wait, FenceFloor: s.fenceFloor(wk)})
	if err != nil {
		if errors.Is(err, lock.ErrNotObtained) {
			return 0, fmt.Errorf("lock for %s not obtained in %s: %w: %w", wk.what(), s.wait, stock.ErrUnavailable, err)
		}
		return 0, gate.Error("obtain lock", err)
	}
	s.held.Store(wk, &heldLock{l: l, since: time.Now()})
	return l.Fence(), nil
}

// raiseFence takes wk's lock again with a fence above the database's,
// after the database refused the held fence as stale. That happens when
// Redis's fence counter survived but lags the database (a replica promoted
// before the last INCRs reached it): the counter exists, so FenceFloor does
// not seed it, and without the raise every holder would be refused until
// the counter climbed back. Or this writer's lease lapsed and another holder
// wrote: then the raise changes nothing (the counter is above the
// database's already) and the obtain waits for that holder, as any would.
// The raise only ever raises the counter, so instances raising at once are
// safe and a holder with an older fence stays refused. For a bucket, the
// floor is its row's fence and only its counter is raised.
func (s *lockBuyer) raiseFence(ctx context.Context, wk writeKey) (int64, error) {
	if v, ok := s.held.Load(wk); ok {
		s.release(ctx, wk, v.(*heldLock))
	}
	floor, err := rowLockFence(ctx, s.writer.store, wk)
	if err != nil {
		return 0, err
	}
	counter, err := s.locker.RaiseFence(ctx, s.lockKey(wk), floor)
	if err != nil {
		return 0, gate.Error("raise lock fence", err)
	}
	s.log.Warn("stale lock fence refused: fence counter raised to the database's, lock taken again",
		"item", wk.item, "bucket", wk.bucket, "database", floor, "counter", counter)
	return s.hold(ctx, wk)
}

// fenceFloor reads the highest fence wk's row has accepted. The lock
// seeds its fence counter from it when Redis has lost the counter, so fences
// stay above every fence the database has stored and the sale goes on at
// once instead of being refused as stale until the counter climbs back.
func (s *lockBuyer) fenceFloor(wk writeKey) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) { return rowLockFence(ctx, s.writer.store, wk) }
}

// rowLockFence reads the fence wk's row stores: the items row's for one
// bucket, the bucket row's for several.
func rowLockFence(ctx context.Context, st *store.Store, wk writeKey) (int64, error) {
	if wk.buckets <= 1 {
		return st.LockFence(ctx, wk.item)
	}
	return st.BucketLockFence(ctx, wk.item, wk.bucket)
}

// done releases the lock when no more orders are queued.
func (s *lockBuyer) done(wk writeKey, more bool) {
	if more {
		return
	}
	if v, ok := s.held.Load(wk); ok {
		s.release(context.Background(), wk, v.(*heldLock))
	}
}

func (s *lockBuyer) release(ctx context.Context, wk writeKey, h *heldLock) {
	s.held.Delete(wk)
	ctx, cancel := context.WithTimeout(ctx, s.ttl)
	defer cancel()
	// A lapsed lease is harmless (the fence guarded the writes), but worth
	// knowing about.
	if err := h.l.Release(ctx); err != nil {
		s.log.Warn("lock release", "item", wk.item, "bucket", wk.bucket, "err", err)
	}
}

// close finishes queued writes and releases the locks.
func (s *lockBuyer) close() {
	s.writer.close()
	_ = s.locker.Close()
}
