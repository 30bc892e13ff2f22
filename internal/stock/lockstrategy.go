package stock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// LockStrategy is the "lock" strategy: take the item's Redis lock, check and
// write in one database transaction, release. The write carries the lock's
// fencing token, so a holder whose lease lapsed (a long GC pause, say)
// cannot write after the next holder did.
//
// Requests for one item first queue on a per-process gate, so only one
// goroutine per process contends for the Redis lock at a time; the others
// wait in memory without touching Redis.
type LockStrategy struct {
	store  *Store
	log    *slog.Logger
	locker *lock.Client
	keys   keyspace
	ttl    time.Duration
	wait   time.Duration

	gates   sync.Map // int64 -> chan struct{} (capacity 1)
	soldOut sync.Map // int64 -> time.Time: sold out as of then, trusted for soldOutFor
}

var _ Strategy = (*LockStrategy)(nil)

// soldOutFor is how long a "sold out" answer from the database is trusted
// without asking again. Stock raised through this process clears it at once;
// raised through another instance, it is seen within this time.
const soldOutFor = time.Second

func newLockStrategy(store *Store, rdb redis.UniversalClient, keys keyspace, ttl, wait time.Duration, log *slog.Logger) *LockStrategy {
	return &LockStrategy{store: store, log: log, locker: lock.New(rdb, nil), keys: keys, ttl: ttl, wait: wait}
}

// Buy waits (bounded) for the item's lock and sells one unit under it.
func (s *LockStrategy) Buy(ctx context.Context, it *Item, req OrderRequest, orderID string) (*Order, error) {
	if err := it.window(time.Now()); err != nil {
		return nil, err
	}
	if s.knownSoldOut(it.ID) {
		return nil, ErrSoldOut
	}
	ctx, cancel := context.WithTimeout(ctx, s.wait)
	defer cancel()

	gate := s.gate(it.ID)
	select {
	case gate <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waited %s for item %d: %w", s.wait, it.ID, ErrUnavailable)
	}
	defer func() { <-gate }()
	if s.knownSoldOut(it.ID) {
		return nil, ErrSoldOut
	}

	wait := s.wait
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	if wait <= 0 {
		return nil, fmt.Errorf("waited %s for item %d: %w", s.wait, it.ID, ErrUnavailable)
	}
	l, err := s.locker.Obtain(ctx, s.keys.lock(it.ID), s.ttl, &lock.Options{Wait: wait})
	if err != nil {
		if errors.Is(err, lock.ErrNotObtained) {
			return nil, fmt.Errorf("lock for item %d: %w: %w", it.ID, ErrUnavailable, err)
		}
		return nil, redisError("obtain lock", err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), s.ttl)
		defer rcancel()
		// A lapsed lease is harmless here (the fence guarded the write), but
		// worth knowing about: the next holder waited for nothing.
		if err := l.Release(rctx); err != nil {
			s.log.Warn("lock release", "item", it.ID, "err", err)
		}
	}()

	o := &Order{ID: orderID, ItemID: it.ID, UserID: req.UserID}
	err = s.store.InsertOrder(ctx, o, req.IdempotencyKey, l.Fence())
	if errors.Is(err, ErrSoldOut) {
		s.soldOut.Store(it.ID, time.Now())
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

func (s *LockStrategy) gate(id int64) chan struct{} {
	if g, ok := s.gates.Load(id); ok {
		return g.(chan struct{})
	}
	g, _ := s.gates.LoadOrStore(id, make(chan struct{}, 1))
	return g.(chan struct{})
}

func (s *LockStrategy) knownSoldOut(id int64) bool {
	v, ok := s.soldOut.Load(id)
	return ok && time.Since(v.(time.Time)) < soldOutFor
}

// stockChanged forgets a remembered "sold out" after an admin change.
func (s *LockStrategy) stockChanged(id int64) { s.soldOut.Delete(id) }
