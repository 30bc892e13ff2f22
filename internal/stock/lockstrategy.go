package stock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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
// wait in memory without touching Redis. When requests are queued behind
// the holder, the Redis lock passes straight to the next one (same lease,
// same fence) instead of being released and taken again, for at most
// maxHold, so other instances get their turn.
type LockStrategy struct {
	store  *Store
	log    *slog.Logger
	locker *lock.Client
	keys   keyspace
	ttl    time.Duration
	wait   time.Duration

	gates   sync.Map // int64 -> *itemGate
	soldOut *soldOutMemo
}

// maxHold bounds how long one process keeps an item's Redis lock while
// handing it from request to request.
const maxHold = 250 * time.Millisecond

// itemGate queues this process's requests for one item. held is touched
// only by the goroutine that holds sem.
type itemGate struct {
	sem     chan struct{} // capacity 1
	waiting atomic.Int64
	held    *lock.Lock
	since   time.Time
}

var _ Strategy = (*LockStrategy)(nil)

func newLockStrategy(store *Store, rdb redis.UniversalClient, keys keyspace, ttl, wait time.Duration, memo *soldOutMemo, log *slog.Logger) *LockStrategy {
	return &LockStrategy{store: store, log: log, locker: lock.New(rdb, nil), keys: keys, ttl: ttl, wait: wait, soldOut: memo}
}

// Buy waits (bounded) for the item's lock and sells one unit under it.
func (s *LockStrategy) Buy(ctx context.Context, it *Item, req OrderRequest, orderID string, committed func(*Order)) (*Order, error) {
	if err := it.window(time.Now()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.wait)
	defer cancel()

	g := s.gate(it.ID)
	g.waiting.Add(1)
	select {
	case g.sem <- struct{}{}:
		g.waiting.Add(-1)
	case <-ctx.Done():
		g.waiting.Add(-1)
		s.dropIdle(it.ID, g)
		return nil, fmt.Errorf("waited %s for item %d: %w", s.wait, it.ID, ErrUnavailable)
	}
	defer func() { s.handOn(it.ID, g); <-g.sem }()
	// Whoever held the gate before may have found the item sold out.
	if s.soldOut.soldOut(it.ID) {
		return nil, ErrSoldOut
	}
	l, err := s.obtain(ctx, it.ID, g)
	if err != nil {
		return nil, err
	}
	o := &Order{ID: orderID, ItemID: it.ID, UserID: req.UserID}
	if err := s.store.InsertOrder(ctx, o, req.IdempotencyKey, l.Fence()); err != nil {
		return nil, err
	}
	// Still inside the gate: whoever finds the item sold out after this
	// sees the order settled under its key.
	if committed != nil {
		committed(o)
	}
	return o, nil
}

// obtain returns the Redis lock the gate already holds, if its lease is
// still good, or takes it. The caller holds g.sem.
func (s *LockStrategy) obtain(ctx context.Context, itemID int64, g *itemGate) (*lock.Lock, error) {
	if g.held != nil && g.held.Context().Err() == nil {
		return g.held, nil
	}
	g.held = nil
	wait := time.Until(deadline(ctx, s.wait))
	if wait <= 0 {
		return nil, fmt.Errorf("waited %s for item %d: %w", s.wait, itemID, ErrUnavailable)
	}
	l, err := s.locker.Obtain(ctx, s.keys.lock(itemID), s.ttl, &lock.Options{Wait: wait})
	if err != nil {
		if errors.Is(err, lock.ErrNotObtained) {
			return nil, fmt.Errorf("lock for item %d: %w: %w", itemID, ErrUnavailable, err)
		}
		return nil, redisError("obtain lock", err)
	}
	g.held, g.since = l, time.Now()
	return l, nil
}

// handOn keeps the Redis lock for the next queued request, or releases it
// when nobody waits or it has been held long enough. The caller holds g.sem.
func (s *LockStrategy) handOn(itemID int64, g *itemGate) {
	if g.held == nil || (g.waiting.Load() > 0 && time.Since(g.since) < maxHold && g.held.Context().Err() == nil) {
		return
	}
	s.release(itemID, g)
}

// dropIdle releases a lock left for a waiter that gave up, if the gate is free.
func (s *LockStrategy) dropIdle(itemID int64, g *itemGate) {
	select {
	case g.sem <- struct{}{}:
		if g.waiting.Load() == 0 && g.held != nil {
			s.release(itemID, g)
		}
		<-g.sem
	default: // the holder decides when it is done
	}
}

func (s *LockStrategy) release(itemID int64, g *itemGate) {
	l := g.held
	g.held = nil
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl)
	defer cancel()
	// A lapsed lease is harmless (the fence guarded the writes), but worth
	// knowing about.
	if err := l.Release(ctx); err != nil {
		s.log.Warn("lock release", "item", itemID, "err", err)
	}
}

func (s *LockStrategy) gate(id int64) *itemGate {
	if g, ok := s.gates.Load(id); ok {
		return g.(*itemGate)
	}
	g, _ := s.gates.LoadOrStore(id, &itemGate{sem: make(chan struct{}, 1)})
	return g.(*itemGate)
}

// close releases every lock the gates still hold.
func (s *LockStrategy) close() {
	s.gates.Range(func(k, v any) bool {
		g := v.(*itemGate)
		g.sem <- struct{}{}
		if g.held != nil {
			s.release(k.(int64), g)
		}
		<-g.sem
		return true
	})
}

func deadline(ctx context.Context, d time.Duration) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(d)
}
