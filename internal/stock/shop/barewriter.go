package shop

import (
	"context"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// BareWriter is the order write of the lua and lock strategies on its own:
// the same group-commit writer (orderWriter), batches and transactions,
// with nothing of Redis around it. It is for measuring what the database
// alone can do with the service's own transactions (loadtest/dbcost's
// floor); the service never uses it. A buyer is anyone who calls Write:
// no gate reserved a unit, so the database's conditional UPDATE is the
// only guard, as it is the last one in the service.
type BareWriter struct {
	w *orderWriter
}

// NewBareWriter returns the lua strategy's writer, or with fenced the lock
// strategy's: every batch carries a fencing token, taken as the Redis lock
// would hand them out (a new token each time the writer would obtain the
// lock: when its queue ran empty, or after maxHold), but from a counter in
// memory instead of Redis. Close stops it.
func NewBareWriter(st *store.Store, fenced bool) *BareWriter {
	var guard writeGuard
	if fenced {
		guard = &memoryFence{store: st, items: map[writeKey]*memoryLock{}}
	}
	return &BareWriter{w: newOrderWriter(st, guard)}
}

// Write queues o to its item's writer and waits for its transaction, as a
// lua or lock order does once its gate or lock part is done: nil means o
// is committed (and o holds what the database holds), stock.ErrSoldOut
// that no unit was left, stock.ErrAlreadyPurchased that its user holds an
// order of the item. key is its Idempotency-Key ("" for none). o carries
// no waiting-room pass, as an order of an item without a room: its UPDATE
// checks item_rooms, as the service's does.
func (b *BareWriter) Write(ctx context.Context, o *stock.Order, key string) error {
	return b.w.write(ctx, o, key, false, 1, nil)
}

// WriteBucketed is Write for an order of a lua item with buckets k > 1:
// it is queued to its buyer's home bucket's writer and takes its unit from
// that bucket's row (docs/DESIGN.md, "Bucket rows"), as the service's is.
func (b *BareWriter) WriteBucketed(ctx context.Context, o *stock.Order, key string, k int) error {
	return b.w.write(ctx, o, key, false, k, nil)
}

// Close lets the writers finish what is queued and waits for them.
func (b *BareWriter) Close() { b.w.close() }

// memoryFence is lockBuyer's writeGuard without Redis: the fence counter
// and the lock's hold are in memory, so a batch is written with the fence
// the lock strategy would write it with, and the database checks and
// stores it the same way. Each item's lock is touched only by that item's
// writer goroutine; the map of them is guarded.
type memoryFence struct {
	store *store.Store
	mu    sync.Mutex
	items map[writeKey]*memoryLock
}

type memoryLock struct {
	fence int64 // the last one handed out
	held  bool
	since time.Time
}

var _ writeGuard = (*memoryFence)(nil)

func (m *memoryFence) lock(wk writeKey) *memoryLock {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.items[wk]
	if l == nil {
		l = &memoryLock{}
		m.items[wk] = l
	}
	return l
}

// hold keeps the fence while the lock would be kept (lockBuyer.hold: at
// most maxHold), and takes the next one otherwise.
func (m *memoryFence) hold(_ context.Context, wk writeKey) (int64, error) {
	l := m.lock(wk)
	if !l.held || time.Since(l.since) >= maxHold {
		l.fence++
		l.held, l.since = true, time.Now()
	}
	return l.fence, nil
}

// raiseFence moves the counter above the database's fence, as
// lockBuyer.raiseFence does with Redis's counter.
func (m *memoryFence) raiseFence(ctx context.Context, wk writeKey) (int64, error) {
	floor, err := rowLockFence(ctx, m.store, wk)
	if err != nil {
		return 0, err
	}
	l := m.lock(wk)
	l.fence, l.held = max(l.fence, floor), false
	return m.hold(ctx, wk)
}

// done lets the lock go when no more orders are queued.
func (m *memoryFence) done(wk writeKey, more bool) {
	if !more {
		m.lock(wk).held = false
	}
}
