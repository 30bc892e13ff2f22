package stock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// maxBatch caps the orders written in one transaction (8 placeholders each,
// well under MySQL's 65,535).
const maxBatch = 500

// batchIdle is how long an item's writer waits for work before it exits.
const batchIdle = 30 * time.Second

// batchTimeout bounds one batch's transaction.
const batchTimeout = 5 * time.Second

// errBatchRefused means a batch could not be written whole (a duplicate, or
// less stock left than orders); its orders are then written one by one.
var errBatchRefused = errors.New("batch refused")

// orderWriter is group commit for one hot row: each item has a writer that
// takes every order queued while its previous transaction committed and
// writes them in one transaction. Each order's caller still waits for the
// commit, so an answer is never given before the order is durable.
type orderWriter struct {
	store *Store
	guard writeGuard // nil: no lock around the writes

	mu      sync.Mutex
	queues  map[int64]*writeQueue
	closing bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

type writeQueue struct {
	ch      chan *pendingWrite
	senders int // guarded by orderWriter.mu: sends announced, not yet received
}

type pendingWrite struct {
	o         *Order
	key       string
	committed func(*Order) // may be nil
	done      chan error
}

// writeGuard wraps an item's writes in a lock: hold returns the fencing
// token to write with, taking the lock if needed; done says whether more
// writes are queued, so the lock can be kept or released. Both are called
// only from the item's writer goroutine.
type writeGuard interface {
	hold(ctx context.Context, itemID int64) (fence int64, err error)
	done(itemID int64, more bool)
}

func newOrderWriter(store *Store, guard writeGuard) *orderWriter {
	return &orderWriter{store: store, guard: guard, queues: map[int64]*writeQueue{}, stop: make(chan struct{})}
}

// write queues o and waits for its transaction. The caller's context is not
// used to abandon the wait: once queued, the answer must say what happened.
// committed runs once o is committed, before any answer of its batch is
// delivered, so nobody can see the item sold out before it ran.
func (w *orderWriter) write(o *Order, key string, committed func(*Order)) error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return fmt.Errorf("shutting down: %w", ErrUnavailable)
	}
	q := w.queues[o.ItemID]
	if q == nil {
		q = &writeQueue{ch: make(chan *pendingWrite, maxBatch)}
		w.queues[o.ItemID] = q
		w.wg.Add(1)
		go w.run(o.ItemID, q)
	}
	q.senders++
	w.mu.Unlock()

	p := &pendingWrite{o: o, key: key, committed: committed, done: make(chan error, 1)}
	q.ch <- p
	return <-p.done
}

func (w *orderWriter) run(itemID int64, q *writeQueue) {
	defer w.wg.Done()
	idle := time.NewTimer(batchIdle)
	defer idle.Stop()
	for {
		select {
		case p := <-q.ch:
			w.commit(itemID, w.collect(q, p))
			if w.guard != nil {
				w.guard.done(itemID, len(q.ch) > 0)
			}
			idle.Reset(batchIdle)
		case <-idle.C:
			w.mu.Lock()
			if q.senders == 0 {
				delete(w.queues, itemID)
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			idle.Reset(batchIdle)
		case <-w.stop:
			// No new senders now; finish every send already announced.
			for {
				w.mu.Lock()
				n := q.senders
				w.mu.Unlock()
				if n == 0 {
					if w.guard != nil {
						w.guard.done(itemID, false)
					}
					return
				}
				w.commit(itemID, w.collect(q, <-q.ch))
			}
		}
	}
}

// collect takes p and whatever else is queued, up to maxBatch.
func (w *orderWriter) collect(q *writeQueue, p *pendingWrite) []*pendingWrite {
	batch := []*pendingWrite{p}
	for len(batch) < maxBatch {
		select {
		case p := <-q.ch:
			batch = append(batch, p)
		default:
			w.mu.Lock()
			q.senders -= len(batch)
			w.mu.Unlock()
			return batch
		}
	}
	w.mu.Lock()
	q.senders -= len(batch)
	w.mu.Unlock()
	return batch
}

// commit writes a batch in one transaction, or one by one when the batch
// as a whole is refused, and answers every caller.
func (w *orderWriter) commit(itemID int64, batch []*pendingWrite) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
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
	}
	defer answer()

	var fence int64
	if w.guard != nil {
		f, err := w.guard.hold(ctx, itemID)
		if err != nil {
			for i := range results {
				results[i] = err
			}
			return
		}
		fence = f
	}
	now := dbNow()
	err := errBatchRefused
	if len(batch) > 1 {
		err = w.store.insertBatch(ctx, batch, now, fence)
	}
	switch {
	case err == nil:
		for _, p := range batch {
			w.store.created(p.o, now)
		}
	case !errors.Is(err, errBatchRefused):
		for i := range results {
			results[i] = err
		}
	default:
		w.settleRefused(ctx, itemID, batch, results, fence, now)
	}
}

// settleRefused answers a batch that could not be written whole, in a few
// round trips however large it is. Buyers who already hold an order get
// ErrAlreadyPurchased; a user's second order in the batch gets what the
// first one got; the rest are written in arrival order, as many at a time
// as there are units left, until they are all written or nothing is left.
// A chunk refused whole (a clash inside it) is written order by order.
func (w *orderWriter) settleRefused(ctx context.Context, itemID int64, batch []*pendingWrite, results []error, fence int64, now time.Time) {
	fail := func(idx []int, err error) {
		for _, i := range idx {
			results[i] = err
		}
	}
	users := make([]string, len(batch))
	for i, p := range batch {
		users[i] = p.o.UserID
	}
	bought, err := w.store.buyersAmong(ctx, itemID, users)
	if err != nil {
		fail(allIndexes(len(batch)), err)
		return
	}
	first := map[string]int{} // user -> index of their first order in the batch
	var queue, repeats []int
	for i, p := range batch {
		u := p.o.UserID
		switch _, seen := first[u]; {
		case bought[u]:
			results[i] = ErrAlreadyPurchased
		case seen:
			repeats = append(repeats, i)
		default:
			first[u] = i
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		left, err := w.store.remaining(ctx, itemID)
		if err != nil {
			fail(queue, err)
			break
		}
		if left <= 0 {
			fail(queue, ErrSoldOut)
			break
		}
		take := queue[:min(int(left), len(queue))]
		queue = queue[len(take):]
		w.writeChunk(ctx, batch, take, results, fence, now)
	}
	for _, i := range repeats {
		if f := results[first[batch[i].o.UserID]]; f == nil {
			results[i] = ErrAlreadyPurchased
		} else {
			results[i] = f
		}
	}
}

// writeChunk writes the orders at idx as one batch, or one by one if the
// batch is refused.
func (w *orderWriter) writeChunk(ctx context.Context, batch []*pendingWrite, idx []int, results []error, fence int64, now time.Time) {
	sub := make([]*pendingWrite, len(idx))
	for j, i := range idx {
		sub[j] = batch[i]
	}
	err := errBatchRefused
	if len(sub) > 1 {
		err = w.store.insertBatch(ctx, sub, now, fence)
	}
	for _, i := range idx {
		switch {
		case err == nil:
			w.store.created(batch[i].o, now)
			results[i] = nil
		case errors.Is(err, errBatchRefused):
			results[i] = w.store.InsertOrder(ctx, batch[i].o, batch[i].key, fence)
		default:
			results[i] = err
		}
	}
}

func allIndexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

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

// buyersAmong returns which of users already hold an order for the item.
func (s *Store) buyersAmong(ctx context.Context, itemID int64, users []string) (map[string]bool, error) {
	args := make([]any, 0, len(users)+1)
	args = append(args, itemID)
	for _, u := range users {
		args = append(args, u)
	}
	q := "SELECT user_id FROM orders WHERE item_id = ? AND user_id IN (?" + strings.Repeat(", ?", len(users)-1) + ")"
	rows, err := s.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, dbError("find buyers", err)
	}
	defer rows.Close()
	bought := map[string]bool{}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, dbError("find buyers", err)
		}
		bought[u] = true
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("find buyers", err)
	}
	return bought, nil
}

// remaining reads stock - sold.
func (s *Store) remaining(ctx context.Context, itemID int64) (int64, error) {
	var left int64
	err := s.sql.QueryRowContext(ctx, "SELECT stock - sold FROM items WHERE id = ?", itemID).Scan(&left)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("item %d: %w", itemID, ErrNotFound)
	}
	if err != nil {
		return 0, dbError("read remaining", err)
	}
	return left, nil
}

// insertBatch writes every order of a batch and takes len(batch) units in
// one transaction: the same guard as one order, sold + k <= stock, with rows
// affected checked. Any refusal rolls the whole batch back.
func (s *Store) insertBatch(ctx context.Context, batch []*pendingWrite, now time.Time, fence int64) (err error) {
	tx, err := s.sql.BeginTx(ctx, nil)
	if err != nil {
		return dbError("begin", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var sb strings.Builder
	sb.WriteString("INSERT INTO orders (id, item_id, user_id, status, idempotency_key, expires_at, created_at, updated_at) VALUES ")
	args := make([]any, 0, 8*len(batch))
	deadline := s.deadline(now)
	for i, p := range batch {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		var key *string
		if p.key != "" {
			key = &p.key
		}
		args = append(args, p.o.ID, p.o.ItemID, p.o.UserID, StatusCreated, key, deadline, now, now)
	}
	if _, err = tx.ExecContext(ctx, sb.String(), args...); err != nil {
		if e := insertError(err); errors.Is(e, ErrAlreadyPurchased) || errors.Is(e, ErrIdempotencyConflict) {
			return errBatchRefused
		}
		return insertError(err)
	}
	k := len(batch)
	var res sql.Result
	if fence > 0 {
		res, err = tx.ExecContext(ctx, "UPDATE items SET sold = sold + ?, lock_fence = ?, updated_at = ? WHERE id = ? AND sold + ? <= stock AND lock_fence <= ?",
			k, fence, now, batch[0].o.ItemID, k, fence)
	} else {
		res, err = tx.ExecContext(ctx, "UPDATE items SET sold = sold + ?, updated_at = ? WHERE id = ? AND sold + ? <= stock",
			k, now, batch[0].o.ItemID, k)
	}
	if err != nil {
		return dbError("take units", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return dbError("take units", err)
	}
	if n != 1 {
		err = errBatchRefused
		return err
	}
	if err = tx.Commit(); err != nil {
		return dbError("commit", err)
	}
	return nil
}
