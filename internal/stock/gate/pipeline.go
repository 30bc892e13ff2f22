package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
)

// Pipeline sends the Redis calls of concurrent requests in shared round
// trips. In a stampede, requests arrive faster than Redis answers; instead
// of one write and one read per request on both sides, each of a few loops
// takes every call that is waiting and sends them as one pipeline. A call
// that finds no company goes alone, at once, so nothing waits to be
// batched. Every call sent this way must be safe to send again (go-redis
// resends a pipeline after a network error): the gate scripts are, they
// find their own order id.
//
// On a Redis Cluster the calls are batched by node: each master has a lane
// of its own (its queue and its loops), picked by the call's first key. A
// pipeline across nodes is answered when its slowest node answers, so one
// shared pipeline would make every item wait for a master that died (head-
// of-line blocking); with a lane per master, the items of the healthy
// masters never wait for the dead one's. Options.Wait bounds how long a
// call waits for its lane, so the dead master's own items fail fast too.
type Pipeline struct {
	rdb     redis.UniversalClient
	cluster *redis.ClusterClient // nil: one Redis, one lane
	max     int
	senders int
	wait    time.Duration
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	// settling counts the abandoned calls' settle functions still running.
	settling sync.WaitGroup

	mu     sync.Mutex
	lanes  map[string]*lane // by master address ("" on one Redis)
	closed bool
}

// lane is the queue of one node's calls.
type lane struct {
	addr  string
	calls chan *call
	// downUntil (Unix nanoseconds) is set when a pipeline to the node
	// failed without an answer (go-redis's own retries included): until
	// then its calls fail at once instead of each paying those retries.
	downUntil atomic.Int64
	// sent holds, per loop, when its pipeline in flight was sent (Unix
	// nanoseconds; 0: none).
	sent []atomic.Int64
	// answered is when a pipeline of the lane last got its answer (Unix
	// nanoseconds), a script's error included; failed, when one last
	// failed without an answer (go-redis's own retries included).
	answered, failed atomic.Int64
}

type call struct {
	ctx  context.Context
	cmds []redis.Cmder
	// settle, when set, runs once the call has been answered if its caller
	// had stopped waiting (its context ended while the call was in flight):
	// it undoes or finishes what the call did, since nobody else will.
	settle func()
	state  atomic.Int32 // callWaiting, then callAnswered or callAbandoned
	sent   atomic.Int64 // when its pipeline was sent (Unix nanoseconds); 0: still queued
	done   chan struct{}
	err    error // set when the call was not sent
}

// A call's state: the first of its sender and its caller to move it on
// decides whether the caller reads the answer or settle runs.
const (
	callWaiting int32 = iota
	callAnswered
	callAbandoned
)

// Defaults of PipelineOptions.
const (
	// DefaultPipelineSenders is how many pipelines may be in flight at once
	// to each node.
	DefaultPipelineSenders = 4
	// DefaultPipelineMaxCalls is the most calls one pipeline carries.
	DefaultPipelineMaxCalls = 64
)

// PipelineOptions tunes a Pipeline. A nil *PipelineOptions means every
// default; so does a zero field.
type PipelineOptions struct {
	// Senders is how many pipelines may be in flight at once to each node.
	// Default DefaultPipelineSenders (4).
	Senders int
	// MaxCalls is the most calls one pipeline carries. Default
	// DefaultPipelineMaxCalls (64).
	MaxCalls int
	// Wait bounds how long a call waits for its answer once sent: past it
	// the call fails with stock.ErrUnavailable (settled as when its
	// context ends), so a node that stopped answering costs its callers
	// this long at most, whatever the client's retries. A call still
	// queued at Wait fails too when its node is silent (a pipeline of its
	// lane in flight longer than Wait, and no answer from the node within
	// Wait: a stall); behind a node that keeps answering, even slowly, it
	// keeps its place (a busy node is not a dead one; the caller's context
	// bounds it). Default 0: only the caller's context bounds a call.
	Wait time.Duration
}

// NewPipeline returns a Pipeline on rdb; Close stops its senders.
func NewPipeline(rdb redis.UniversalClient, opts *PipelineOptions) *Pipeline {
	var o PipelineOptions
	if opts != nil {
		o = *opts
	}
	if o.Senders <= 0 {
		o.Senders = DefaultPipelineSenders
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = DefaultPipelineMaxCalls
	}
	b := &Pipeline{rdb: rdb, max: o.MaxCalls, senders: o.Senders, wait: max(o.Wait, 0),
		stop: make(chan struct{}), lanes: make(map[string]*lane)}
	b.cluster, _ = rdb.(*redis.ClusterClient)
	return b
}

// errNotSent marks a call that was never sent: there is nothing to settle.
var errNotSent = errors.New("redis: call abandoned before it was sent")

// Do adds the call's commands (build adds them to p) to a pipeline of the
// node their first key lives on, and waits until they have been answered;
// the caller reads its commands. An error means the commands were not
// sent, or that ctx ended (or Options.Wait passed) first: then they may
// still run, and settle (when not nil) runs once they have been answered,
// so a call whose effect needs its answer (a reservation) is settled
// whatever happened to its caller. A call that was never sent is not
// settled: it did nothing.
func (b *Pipeline) Do(ctx context.Context, build func(ctx context.Context, p redis.Pipeliner), settle func()) error {
	// The commands are made here, so their key picks the lane; each one's
	// answer is bounded by the client's timeouts and by Wait, not by ctx.
	p := b.rdb.Pipeline()
	build(context.Background(), p)
	c := &call{ctx: ctx, cmds: p.Cmds(), settle: settle, done: make(chan struct{})}
	if len(c.cmds) == 0 {
		return nil
	}
	ln, err := b.lane(ctx, firstKey(c.cmds[0]))
	if err != nil {
		return err
	}
	if b.down(ln) {
		b.cluster.ReloadState(ctx)
		return fmt.Errorf("redis node %s did not answer just now: %w", ln.addr, stock.ErrUnavailable)
	}
	select {
	case ln.calls <- c:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.stop:
		return errShuttingDown
	}
	var timer *time.Timer
	var expired <-chan time.Time
	if b.wait > 0 {
		timer = time.NewTimer(b.wait)
		defer timer.Stop()
		expired = timer.C
	}
wait:
	for {
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case <-expired:
			if left := b.left(ln, c); left > 0 {
				timer.Reset(left)
				continue
			}
			err = b.noAnswer(ln)
			break wait
		}
	}
	if c.state.CompareAndSwap(callWaiting, callAbandoned) {
		return err
	}
	<-c.done // answered meanwhile: the answer stands
	return c.err
}

var errShuttingDown = fmt.Errorf("redis: shutting down: %w", stock.ErrUnavailable)

// lane returns the lane of the master that holds key, made on first use.
// On one Redis, and for a key the cluster client cannot place yet, it is
// the lane "". Lanes are kept for the Pipeline's life: one per master
// address ever seen, a handful of idle loops each.
func (b *Pipeline) lane(ctx context.Context, key string) (*lane, error) {
	addr := ""
	if b.cluster != nil && key != "" {
		if m, err := b.cluster.MasterForKey(ctx, key); err == nil {
			addr = m.Options().Addr
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errShuttingDown
	}
	ln := b.lanes[addr]
	if ln == nil {
		ln = &lane{addr: addr, calls: make(chan *call, 4*b.max), sent: make([]atomic.Int64, b.senders)}
		b.lanes[addr] = ln
		for i := 0; i < b.senders; i++ {
			b.wg.Add(1)
			go b.loop(ln, &ln.sent[i])
		}
	}
	return ln, nil
}

// firstKey is the key a command is routed by ("" if it has none): the
// first key of EVAL and EVALSHA, the first argument of the others the
// Pipeline carries (SET, GET, EXISTS, HEXISTS...).
func firstKey(cmd redis.Cmder) string {
	args := cmd.Args()
	pos := 1
	switch cmd.Name() {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		if len(args) < 4 {
			return ""
		}
		if n, ok := args[2].(int); !ok || n == 0 {
			return ""
		}
		pos = 3
	}
	if len(args) > pos {
		if s, ok := args[pos].(string); ok {
			return s
		}
	}
	return ""
}

func (b *Pipeline) loop(ln *lane, sent *atomic.Int64) {
	defer b.wg.Done()
	batch := make([]*call, 0, b.max)
	for {
		select {
		case <-b.stop:
			return
		case c := <-ln.calls:
			batch = append(batch[:0], c)
		collect:
			for len(batch) < b.max {
				select {
				case c := <-ln.calls:
					batch = append(batch, c)
				default:
					break collect
				}
			}
			b.send(ln, sent, batch)
		}
	}
}

// send runs one pipeline of the calls whose requests still wait.
func (b *Pipeline) send(ln *lane, sent *atomic.Int64, batch []*call) {
	pipe := b.rdb.Pipeline()
	ctx := context.Background() // each call's answer is bounded by the client's timeouts
	now := time.Now().UnixNano()
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			continue
		}
		if c.state.Load() == callAbandoned {
			c.err = errNotSent
			continue
		}
		c.sent.Store(now)
		_ = pipe.BatchProcess(ctx, c.cmds...)
	}
	if pipe.Len() > 0 {
		// Each command carries its own result. A node that did not answer
		// may have failed over: the cluster client re-reads the slot map
		// (at most every 200 ms), so a promoted replica serves within
		// moments instead of at the next periodic reload.
		sent.Store(now)
		_, err := pipe.Exec(ctx)
		if err == nil || isRedisError(err) {
			ln.answered.Store(time.Now().UnixNano()) // before sent is cleared: never silent in between
		} else {
			ln.failed.Store(time.Now().UnixNano())
		}
		sent.Store(0)
		if err != nil && !isRedisError(err) && b.cluster != nil {
			ln.downUntil.Store(time.Now().Add(laneRest).UnixNano())
			b.cluster.ReloadState(ctx)
		}
	}
	for _, c := range batch {
		if !c.state.CompareAndSwap(callWaiting, callAnswered) && c.err == nil && c.settle != nil {
			b.settling.Add(1)
			go func() {
				defer b.settling.Done()
				c.settle()
			}()
		}
		close(c.done)
	}
}

// isRedisError reports whether err is an answer of Redis (redis.Nil, a
// script's error), not a failure to get one.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// Close stops the senders, then waits for the settling of abandoned calls;
// calls not yet taken are refused.
func (b *Pipeline) Close() {
	b.once.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		close(b.stop)
	})
	b.wg.Wait()
	b.settling.Wait()
}

// RunScript runs script through the pipeline: EVALSHA in a shared pipeline,
// and, if Redis lost its script cache (NOSCRIPT means it did not run), loads
// it and sends it once more. settle is as for Do: it runs when the caller's
// context ended while the script was in flight.
func (b *Pipeline) RunScript(ctx context.Context, script *redis.Script, settle func(), keys []string, args ...any) *redis.Cmd {
	for attempt := 0; ; attempt++ {
		var cmd *redis.Cmd
		err := b.Do(ctx, func(ctx context.Context, p redis.Pipeliner) {
			cmd = p.EvalSha(ctx, script.Hash(), keys, args...)
		}, settle)
		if err != nil {
			failed := redis.NewCmd(ctx)
			failed.SetErr(err)
			return failed
		}
		if attempt > 0 || !redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			return cmd
		}
		// SCRIPT LOAD changes nothing but the cache: safe to abandon.
		if err := script.Load(ctx, b.loader(ctx, keys)).Err(); err != nil {
			cmd = redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd
		}
	}
}

// loader is where a script run on keys is loaded: on a Redis Cluster the
// master of the keys alone (a replica promoted in a failover starts with
// an empty script cache), since the cluster client's SCRIPT LOAD goes to
// every node and fails while any one of them is down.
func (b *Pipeline) loader(ctx context.Context, keys []string) redis.Scripter {
	if b.cluster != nil && len(keys) > 0 {
		if m, err := b.cluster.MasterForKey(ctx, keys[0]); err == nil {
			return m
		}
	}
	return b.rdb
}
