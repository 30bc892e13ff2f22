package gate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

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
type Pipeline struct {
	rdb   redis.UniversalClient
	calls chan *call
	max   int
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	// settling counts the abandoned calls' settle functions still running.
	settling sync.WaitGroup
}

type call struct {
	ctx   context.Context
	build func(ctx context.Context, p redis.Pipeliner)
	// settle, when set, runs once the call has been answered if its caller
	// had stopped waiting (its context ended while the call was in flight):
	// it undoes or finishes what the call did, since nobody else will.
	settle func()
	state  atomic.Int32 // callWaiting, then callAnswered or callAbandoned
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
	// DefaultPipelineSenders is how many pipelines may be in flight at once.
	DefaultPipelineSenders = 4
	// DefaultPipelineMaxCalls is the most calls one pipeline carries.
	DefaultPipelineMaxCalls = 64
)

// PipelineOptions tunes a Pipeline. A nil *PipelineOptions means every
// default; so does a zero field.
type PipelineOptions struct {
	// Senders is how many pipelines may be in flight at once. Default
	// DefaultPipelineSenders (4).
	Senders int
	// MaxCalls is the most calls one pipeline carries. Default
	// DefaultPipelineMaxCalls (64).
	MaxCalls int
}

// NewPipeline starts the senders; Close stops them.
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
	b := &Pipeline{rdb: rdb, calls: make(chan *call, 4*o.MaxCalls), max: o.MaxCalls, stop: make(chan struct{})}
	for i := 0; i < o.Senders; i++ {
		b.wg.Add(1)
		go b.loop()
	}
	return b
}

// Do queues build, which adds the call's commands to a pipeline, and waits
// until they have been answered; the caller reads its commands. An error
// means the commands were not sent, or that ctx ended first: then they may
// still run, and settle (when not nil) runs once they have been answered,
// so a call whose effect needs its answer (a reservation) is settled
// whatever happened to its caller. A call that was never sent is not
// settled: it did nothing.
func (b *Pipeline) Do(ctx context.Context, build func(ctx context.Context, p redis.Pipeliner), settle func()) error {
	c := &call{ctx: ctx, build: build, settle: settle, done: make(chan struct{})}
	select {
	case b.calls <- c:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.stop:
		return fmt.Errorf("redis: shutting down: %w", stock.ErrUnavailable)
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		if c.state.CompareAndSwap(callWaiting, callAbandoned) {
			return ctx.Err()
		}
		<-c.done // answered meanwhile: the answer stands
		return c.err
	}
}

func (b *Pipeline) loop() {
	defer b.wg.Done()
	batch := make([]*call, 0, b.max)
	for {
		select {
		case <-b.stop:
			return
		case c := <-b.calls:
			batch = append(batch[:0], c)
		collect:
			for len(batch) < b.max {
				select {
				case c := <-b.calls:
					batch = append(batch, c)
				default:
					break collect
				}
			}
			b.send(batch)
		}
	}
}

// send runs one pipeline of the calls whose requests still wait.
func (b *Pipeline) send(batch []*call) {
	pipe := b.rdb.Pipeline()
	ctx := context.Background() // each call's answer is bounded by the client's timeouts
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			continue
		}
		c.build(ctx, pipe)
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx) // each command carries its own result
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

// Close stops the senders, then waits for the settling of abandoned calls;
// calls not yet taken are refused.
func (b *Pipeline) Close() {
	b.once.Do(func() { close(b.stop) })
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
			// cmd may still be written by the sender: answer with another.
			failed := redis.NewCmd(ctx)
			failed.SetErr(err)
			return failed
		}
		if attempt > 0 || !redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			return cmd
		}
		// SCRIPT LOAD changes nothing but the cache: safe to abandon.
		if err := script.Load(ctx, b.rdb).Err(); err != nil {
			cmd = redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd
		}
	}
}
