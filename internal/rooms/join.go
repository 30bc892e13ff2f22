package rooms

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
)

// A join writes the shared line, so it is a Redis script; at the opening
// of a sale thousands arrive within a second. Sending each alone costs the
// service a round trip (a write, a read, a reply to parse, two goroutine
// wake-ups) and Redis a script run per join. So the joins of one item that
// arrive together share one call: while a call is in flight, arrivals
// queue, and the next call takes all of them (up to maxJoinBatch) in one
// script run (room.JoinMany). A join that finds nothing in flight goes at
// once, alone: nothing waits to be batched. The order gate's pipeline
// (internal/stock/gate/pipeline.go) does the same for reservations, with
// several independent scripts in one pipeline; a join batch is one script.
//
// Every rule of a join stays the script's: one place per user (the same
// user twice in a batch, or in two instances' batches, gets one ticket),
// noroom and sold_out for every join of the batch, an invalid id refused
// alone. A caller waits for its answer at most the Service's RedisTimeout
// (or until its context ends): it gives up alone, the batch goes on for
// the others, a join still queued is not sent, and one already sent may
// still run (joining again then finds that place). A batch is bounded by
// RedisTimeout too, so a stalled Redis fails every waiter within that
// bound, each with a 503.

// maxJoinBatch is the most joins one script call carries: enough for a
// stampede's arrivals during one call, small enough that one script run
// (about 5 µs a join) does not hold Redis for long.
const maxJoinBatch = 128

// joinBatcher sends one room's joins in batches.
type joinBatcher struct {
	room    *room.Room
	spawn   *goroutines
	base    context.Context // the service's: its end stops every batch
	timeout time.Duration
	now     func() time.Time

	mu      sync.Mutex
	queue   []*joinCall
	sending bool // a goroutine is sending batches until the queue is empty
}

type joinCall struct {
	ctx  context.Context
	user string
	max  int64       // the room's bound on tickets as this join saw it (0: none)
	gone atomic.Bool // its caller stopped waiting
	done chan struct{}
	// Set before done closes.
	st  room.Status
	at  time.Time // the batch's clock
	err error
}

// errShuttingDown: the service is closing and sends no more joins.
var errShuttingDown = fmt.Errorf("waiting room: shutting down: %w", stock.ErrUnavailable)

// join puts user in the room through the next batch and waits for the
// answer, for ctx, or for the batcher's timeout (a timer, not a context:
// cheaper, and a join needs no more).
func (j *joinBatcher) join(ctx context.Context, user string, maxTickets int64) (room.Status, time.Time, error) {
	c := &joinCall{ctx: ctx, user: user, max: maxTickets, done: make(chan struct{})}
	j.mu.Lock()
	j.queue = append(j.queue, c)
	start := !j.sending
	if start {
		if !j.spawn.Go(j.run) {
			j.queue = j.queue[:len(j.queue)-1]
			j.mu.Unlock()
			return room.Status{}, time.Time{}, errShuttingDown
		}
		j.sending = true
	}
	j.mu.Unlock()
	timer := time.NewTimer(j.timeout)
	defer timer.Stop()
	var err error
	select {
	case <-c.done:
		return c.st, c.at, c.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("waiting room: %w: no answer from redis within %v: %w", stock.ErrUnavailable, j.timeout, context.DeadlineExceeded)
	}
	c.gone.Store(true) // not sent if still queued
	return room.Status{}, time.Time{}, err
}

// run sends batches until the queue is empty.
func (j *joinBatcher) run() {
	batch := make([]*joinCall, 0, maxJoinBatch)
	users := make([]string, 0, maxJoinBatch)
	for {
		// A short queue gets one yield first: the joins of requests already
		// running on this process's other goroutines come into the batch
		// (at 64 connections a call carried about five; with the yield
		// Redis spends a fifth less CPU a join), and an idle process goes
		// on at once.
		j.mu.Lock()
		if len(j.queue) < maxJoinBatch/4 {
			j.mu.Unlock()
			runtime.Gosched()
			j.mu.Lock()
		}
		n := min(len(j.queue), maxJoinBatch)
		if n == 0 {
			j.sending = false
			if cap(j.queue) > 4*maxJoinBatch {
				j.queue = nil // let a stampede's long queue go
			}
			j.mu.Unlock()
			return
		}
		batch = append(batch[:0], j.queue[:n]...)
		rest := copy(j.queue, j.queue[n:])
		clear(j.queue[rest:])
		j.queue = j.queue[:rest]
		j.mu.Unlock()
		j.send(batch, users[:0])
	}
}

// send runs one batch: the joins whose callers still wait, in one call.
func (j *joinBatcher) send(batch []*joinCall, users []string) {
	live := batch[:0]
	var bound int64 // the batch's: the largest its joins saw (their views differ by moments)
	unbounded := false
	for _, c := range batch {
		if c.gone.Load() || c.ctx.Err() != nil {
			continue // its caller has gone: nothing to send
		}
		live = append(live, c)
		users = append(users, c.user)
		bound = max(bound, c.max)
		unbounded = unbounded || c.max <= 0
	}
	if unbounded {
		bound = 0
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(j.base, j.timeout)
	defer cancel()
	now := j.now()
	res, err := j.room.JoinManyCapped(ctx, users, now, bound)
	for i, c := range live {
		c.at = now
		if err != nil {
			c.err = err
		} else {
			c.st, c.err = res[i].Status, res[i].Err
		}
		close(c.done)
	}
}

// goroutines runs goroutines that Close waits for; once Close has begun,
// Go refuses (so Add never races Wait).
type goroutines struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f in a goroutine, or reports false after Close.
func (g *goroutines) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(f)
	return true
}

// Close refuses new goroutines and waits for the running ones.
func (g *goroutines) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// joinErr is a join's error as the API's: a caller that stopped waiting
// (its deadline, or its request gone) is Redis not answering in time.
func joinErr(err error) error {
	if errors.Is(err, context.Canceled) && !errors.Is(err, room.ErrUnavailable) {
		return fmt.Errorf("waiting room: %w: %w", stock.ErrUnavailable, err)
	}
	return roomErr(err)
}
