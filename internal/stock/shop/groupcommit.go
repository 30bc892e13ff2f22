package shop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// maxCommitOrders caps the orders group commit writes in one transaction (8 placeholders each,
// well under MySQL's 65,535).
const maxCommitOrders = 500

// writerIdle is how long an item's group-commit writer waits for work
// before it exits.
const writerIdle = 30 * time.Second

// answerMargin is the time a batch leaves its earliest caller between the
// end of its transaction and that caller's deadline: enough to settle and
// deliver the answer, so no caller waits past its deadline.
const answerMargin = 100 * time.Millisecond

// orderWriter is group commit for one hot row: each item has a writer that
// takes every order queued while its previous transaction committed and
// writes them in one transaction. Each order's caller still waits for the
// commit, so an answer is never given before the order is durable.
//
// Every wait is bounded by the callers' deadlines: a caller whose deadline
// passes while its order is still queued withdraws it; a batch's
// transaction (the lock wait included) ends answerMargin before the earliest
// deadline among its orders, so a caller whose order was taken always hears
// what happened, in time; and the database part of a transaction is bounded
// by budget, so a stalled database answers 503 in about that long.
type orderWriter struct {
	store  *store.Store
	guard  writeGuard    // nil: no lock around the writes
	budget time.Duration // bound on each step of a transaction (stallWatch)
	// maxWait bounds a caller whose context has no deadline, as if it had
	// the request timeout.
	maxWait time.Duration

	mu      sync.Mutex
	queues  map[writeKey]*writeQueue
	closing bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

// writeKey names a writer's queue: one per item, or, for an item with
// several buckets, one per bucket (each bucket's orders take their units
// from the bucket's own row, so an item's K batches commit in parallel;
// a lock item's bucket has its own lock and fence). buckets is the item's
// bucket count (fixed when it is created).
type writeKey struct {
	item    int64
	bucket  int
	buckets int
}

type writeQueue struct {
	ch      chan *commitRequest
	senders int // guarded by orderWriter.mu: sends announced, not yet received
	// downAt is when the queue's last batch ended with every order refused
	// as unavailable (a stalled or cut database, a lock not had), zero
	// otherwise; its cause is down. Only the queue's writer goroutine
	// reads and writes them.
	downAt time.Time
	down   error
}

type commitRequest struct {
	o         *stock.Order
	key       string
	pass      bool               // the order carries a verified waiting-room pass (store.OrderWrite.Pass)
	buckets   int                // the item's buckets (store.OrderWrite.Buckets)
	committed func(*stock.Order) // may be nil
	deadline  time.Time          // the caller's
	queued    time.Time          // when the caller queued it
	state     atomic.Int32       // writeQueued, then writeTaken or writeWithdrawn
	done      chan error
}

// A pending write's state: the writer takes it, or its caller withdraws it
// when its deadline passes first; whoever moves it first decides.
const (
	writeQueued int32 = iota
	writeTaken
	writeWithdrawn
)

// writeGuard wraps a writer queue's writes in a lock (the item's, or for
// an item with several buckets the bucket's): hold returns the fencing
// token to write with, taking the lock if needed; done says whether more
// writes are queued, so the lock can be kept or released. Both are called
// only from the queue's writer goroutine.
//
// raiseFence is called when the database refused the held fence as stale
// (older than the lock_fence of the item's row, or of the bucket's row, so
// nothing was written): it lets the lock go, raises the fence counter to
// the database's fence and takes the lock again, returning the new fence.
type writeGuard interface {
	hold(ctx context.Context, wk writeKey) (fence int64, err error)
	raiseFence(ctx context.Context, wk writeKey) (fence int64, err error)
	done(wk writeKey, more bool)
}

// newOrderWriter returns a writer with the default bounds (see bound).
func newOrderWriter(st *store.Store, guard writeGuard) *orderWriter {
	return &orderWriter{store: st, guard: guard, budget: DefaultWriteTimeout, maxWait: DefaultRequestTimeout,
		queues: map[writeKey]*writeQueue{}, stop: make(chan struct{})}
}

// bound sets the database work one transaction may take, and the wait of a
// caller whose context has no deadline. Call it before any write.
func (w *orderWriter) bound(budget, maxWait time.Duration) {
	w.budget, w.maxWait = budget, maxWait
}

// write queues o (placed with Idempotency-Key key, "" for none, and a
// verified waiting-room pass or not, of an item with buckets buckets: its
// buyer's home bucket's queue) and waits for its transaction. Once the writer has taken
// o, the answer says what happened: the writer answers before ctx's
// deadline. Until then, the end of ctx withdraws o, unwritten.
// committed runs once o is committed, before any answer of its batch is
// delivered, so nobody can see the item sold out before it ran.
func (w *orderWriter) write(ctx context.Context, o *stock.Order, key string, pass bool, buckets int, committed func(*stock.Order)) error {
	if err := ctx.Err(); err != nil {
		return notWritten(err)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(w.maxWait)
	}
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return fmt.Errorf("shutting down: %w", stock.ErrUnavailable)
	}
	wk := writeKey{item: o.ItemID, bucket: stock.HomeBucketOf(o.UserID, buckets), buckets: max(1, buckets)}
	q := w.queues[wk]
	if q == nil {
		q = &writeQueue{ch: make(chan *commitRequest, maxCommitOrders)}
		w.queues[wk] = q
		w.wg.Add(1)
		go w.run(wk, q)
	}
	q.senders++
	w.mu.Unlock()

	p := &commitRequest{o: o, key: key, pass: pass, buckets: buckets, committed: committed, deadline: deadline,
		queued: time.Now(), done: make(chan error, 1)}
	select {
	case q.ch <- p:
	case <-ctx.Done():
		w.mu.Lock()
		q.senders--
		w.mu.Unlock()
		return notWritten(ctx.Err())
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		if p.state.CompareAndSwap(writeQueued, writeWithdrawn) {
			return notWritten(ctx.Err())
		}
		return <-p.done // taken: its transaction ends before the deadline
	}
}

// notWritten is the answer to an order withdrawn before any write began.
func notWritten(err error) error {
	return fmt.Errorf("order not written before the request's deadline: %w: %w", stock.ErrUnavailable, err)
}

func (w *orderWriter) run(wk writeKey, q *writeQueue) {
	defer w.wg.Done()
	idle := time.NewTimer(writerIdle)
	defer idle.Stop()
	for {
		select {
		case p := <-q.ch:
			q.settle(w.commit(wk, w.collect(q, p)))
			if w.guard != nil {
				w.guard.done(wk, len(q.ch) > 0)
			}
			idle.Reset(writerIdle)
		case <-idle.C:
			w.mu.Lock()
			if q.senders == 0 {
				delete(w.queues, wk)
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			idle.Reset(writerIdle)
		case <-w.stop:
			// No new senders now; finish every send already announced (a
			// sender may also withdraw its announcement: look again).
			for {
				w.mu.Lock()
				n := q.senders
				w.mu.Unlock()
				if n == 0 {
					if w.guard != nil {
						w.guard.done(wk, false)
					}
					return
				}
				select {
				case p := <-q.ch:
					q.settle(w.commit(wk, w.collect(q, p)))
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}
}

// collect takes p and whatever else is queued, up to maxCommitOrders, leaving out
// the orders their callers withdrew, and answering at once those whose
// deadline is too close to write them.
func (w *orderWriter) collect(q *writeQueue, p *commitRequest) []*commitRequest {
	received := 1
	batch := make([]*commitRequest, 0, 1)
	take := func(p *commitRequest) {
		if !p.state.CompareAndSwap(writeQueued, writeTaken) {
			return // withdrawn: its caller has its answer
		}
		if time.Until(p.deadline) < 2*answerMargin {
			p.done <- notWritten(context.DeadlineExceeded)
			return
		}
		if !q.downAt.IsZero() && p.queued.Before(q.downAt) {
			// It waited behind a batch the database (or the lock) refused
			// as unavailable: a fast 503 now, not a second wait of the
			// same length. Orders queued since get a new try.
			// Never in a transaction, so definitely not written: the
			// cause is named, not wrapped (a batch refused with
			// store.ErrMaybeCommitted must not make this one's caller
			// read back instead of handing its unit back).
			p.done <- fmt.Errorf("order not written: the batch before it found the backend unavailable (%v): %w", q.down, stock.ErrUnavailable)
			return
		}
		batch = append(batch, p)
	}
	take(p)
collect:
	for received < maxCommitOrders {
		select {
		case p := <-q.ch:
			received++
			take(p)
		default:
			break collect
		}
	}
	w.mu.Lock()
	q.senders -= received
	w.mu.Unlock()
	return batch
}

// settle records how a batch ended (commit's result): down, the error
// every order of it was refused with as unavailable; nil otherwise.
func (q *writeQueue) settle(down error) {
	if down == nil {
		q.downAt, q.down = time.Time{}, nil
		return
	}
	q.downAt, q.down = time.Now(), down
}

// commit writes a batch in one transaction, or one by one when the batch
// as a whole is refused, and answers every caller. It returns the error
// every order of the batch was refused with when each was refused as
// unavailable (a stale fence aside), nil otherwise. Orders refused for a
// stale fence are written again under a new fence (see maxFenceRaises).
// The lock wait and the transaction end answerMargin before the batch's
// earliest deadline, and the database work takes at most the budget.
func (w *orderWriter) commit(wk writeKey, batch []*commitRequest) (down error) {
	if len(batch) == 0 {
		return nil
	}
	itemID := wk.item
	earliest := time.Now().Add(w.maxWait)
	for _, p := range batch {
		if !p.deadline.IsZero() && p.deadline.Before(earliest) {
			earliest = p.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), earliest.Add(-answerMargin))
	defer cancel()
	results := make([]error, len(batch))
	answer := func() {
		// Settle every committed order (concurrently: each is a Redis call)
		// before anyone of the batch hears an answer.
		var wg sync.WaitGroup
		for i, p := range batch {
			if results[i] == nil && p.committed != nil {
				wg.Add(1)
				go func() { defer wg.Done(); p.committed(p.o) }()
			}
		}
		wg.Wait()
		for i, p := range batch {
			p.done <- results[i]
		}
		// A stale fence is not an outage: the next batch raises the fence
		// and writes (see maxFenceRaises).
		down = results[0]
		for _, err := range results {
			if !errors.Is(err, stock.ErrUnavailable) || errors.Is(err, store.ErrFenceStale) {
				down = nil
			}
		}
	}
	defer answer()

	var fence int64
	if w.guard != nil {
		f, err := w.guard.hold(ctx, wk)
		if err != nil {
			for i := range results {
				results[i] = err
			}
			return
		}
		fence = f
	}
	pending := allIndexes(len(batch))
	for raises := 0; ; raises++ {
		w.writeBatch(ctx, itemID, batch, pending, results, fence)
		pending = staleIndexes(pending, results)
		if len(pending) == 0 || w.guard == nil || raises == maxFenceRaises {
			return // still stale: a plain 503, nothing of theirs was written
		}
		// Refused for the fence alone, so nothing of these was written:
		// take the lock again with a fence above the database's and write
		// them again.
		f, err := w.guard.raiseFence(ctx, wk)
		if err != nil {
			for _, i := range pending {
				results[i] = err
			}
			return
		}
		fence = f
	}
}

// maxFenceRaises bounds how often one batch raises the lock's fence counter
// and takes the lock again after its writes were refused as stale. Once
// is enough after a lagging counter; a second refusal means another holder
// wrote in between (a lapsed lease), so it is tried once more, then given
// up as a 503.
const maxFenceRaises = 2

// writeBatch writes the orders of batch at idx in one transaction, or
// settles them when they cannot be written whole, and sets their results.
// The database work takes at most the budget per step.
func (w *orderWriter) writeBatch(ctx context.Context, itemID int64, batch []*commitRequest, idx []int, results []error, fence int64) {
	// The budget starts once the lock is held, so a lock obtained late
	// still leaves the write its time (within the callers' deadlines).
	ctx, watch, stopWatch := watchStalls(ctx, w.budget)
	defer stopWatch()
	sub := make([]*commitRequest, len(idx))
	for j, i := range idx {
		sub[j] = batch[i]
	}
	subResults := make([]error, len(sub))
	defer func() {
		for j, i := range idx {
			results[i] = subResults[j]
		}
	}()
	now := store.Now()
	err := store.ErrBatchRefused
	if len(sub) > 1 {
		err = w.store.InsertBatch(ctx, writes(sub), now, fence, watch.progress)
	}
	switch {
	case err == nil:
		for _, p := range sub {
			w.store.Created(p.o, now)
		}
	case !errors.Is(err, store.ErrBatchRefused):
		for j := range subResults {
			subResults[j] = err
		}
	default:
		w.settleRefused(ctx, watch, itemID, sub, subResults, fence, now)
	}
}

// staleIndexes returns those of idx whose write was refused for a stale
// fence.
func staleIndexes(idx []int, results []error) []int {
	var stale []int
	for _, i := range idx {
		if errors.Is(results[i], store.ErrFenceStale) {
			stale = append(stale, i)
		}
	}
	return stale
}

// stallWatch ends a transaction whose database makes no progress: it
// cancels the context when one step (a statement, a commit, a one-order
// transaction) takes longer than the budget. A large batch on a busy but
// working database takes as many budgets as it has steps; a stalled one
// is given up on in one budget.
type stallWatch struct {
	t      *time.Timer
	budget time.Duration
}

func watchStalls(ctx context.Context, budget time.Duration) (context.Context, *stallWatch, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	w := &stallWatch{t: time.AfterFunc(budget, cancel), budget: budget}
	return ctx, w, func() { w.t.Stop(); cancel() }
}

// progress starts the budget again after a step finished.
func (w *stallWatch) progress() { w.t.Reset(w.budget) }

// close refuses new writes, lets the writers finish what is queued, and
// waits for them.
func (w *orderWriter) close() {
	w.mu.Lock()
	if !w.closing {
		w.closing = true
		close(w.stop)
	}
	w.mu.Unlock()
	w.wg.Wait()
}
