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

// maxBatch caps the orders written in one transaction (7 placeholders each,
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
	o    *Order
	key  string
	done chan error
}

func newOrderWriter(store *Store) *orderWriter {
	return &orderWriter{store: store, queues: map[int64]*writeQueue{}, stop: make(chan struct{})}
}

// write queues o and waits for its transaction. The caller's context is not
// used to abandon the wait: once queued, the answer must say what happened.
func (w *orderWriter) write(o *Order, key string) error {
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

	p := &pendingWrite{o: o, key: key, done: make(chan error, 1)}
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
			w.commit(w.collect(q, p))
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
					return
				}
				w.commit(w.collect(q, <-q.ch))
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
// as a whole is refused.
func (w *orderWriter) commit(batch []*pendingWrite) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	now := dbNow()
	err := errBatchRefused
	if len(batch) > 1 {
		err = w.store.insertBatch(ctx, batch, now)
	}
	if err == nil {
		for _, p := range batch {
			p.o.Status, p.o.CreatedAt, p.o.UpdatedAt = StatusCreated, now, now
			p.done <- nil
		}
		return
	}
	if !errors.Is(err, errBatchRefused) {
		for _, p := range batch {
			p.done <- err
		}
		return
	}
	for _, p := range batch {
		p.done <- w.store.InsertOrder(ctx, p.o, p.key, 0)
	}
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

// insertBatch writes every order of a batch and takes len(batch) units in
// one transaction: the same guard as one order, sold + k <= stock, with rows
// affected checked. Any refusal rolls the whole batch back.
func (s *Store) insertBatch(ctx context.Context, batch []*pendingWrite, now time.Time) (err error) {
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
	sb.WriteString("INSERT INTO orders (id, item_id, user_id, status, idempotency_key, created_at, updated_at) VALUES ")
	args := make([]any, 0, 7*len(batch))
	for i, p := range batch {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?, ?)")
		var key *string
		if p.key != "" {
			key = &p.key
		}
		args = append(args, p.o.ID, p.o.ItemID, p.o.UserID, StatusCreated, key, now, now)
	}
	if _, err = tx.ExecContext(ctx, sb.String(), args...); err != nil {
		if e := insertError(err); errors.Is(e, ErrAlreadyPurchased) || errors.Is(e, ErrIdempotencyConflict) {
			return errBatchRefused
		}
		return insertError(err)
	}
	k := len(batch)
	var res sql.Result
	res, err = tx.ExecContext(ctx, "UPDATE items SET sold = sold + ?, updated_at = ? WHERE id = ? AND sold + ? <= stock",
		k, now, batch[0].o.ItemID, k)
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
