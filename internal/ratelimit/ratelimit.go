// Package ratelimit is a distributed rate limit in Redis (GCRA, via
// github.com/go-redis/redis_rate), so every instance shares one budget. It
// fails open: when Redis does not answer, keys are admitted (see Limiter).
package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Limit is a rate with its burst. The zero Limit is "off".
type Limit struct {
	Rate   int
	Period time.Duration
	Burst  int
}

// Off reports whether the limit admits everything.
func (l Limit) Off() bool { return l.Rate == 0 }

func (l Limit) String() string {
	if l.Off() {
		return "0"
	}
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[l.Period]
	if l.Burst == l.Rate {
		return fmt.Sprintf("%d/%s", l.Rate, unit)
	}
	return fmt.Sprintf("%d/%s:%d", l.Rate, unit, l.Burst)
}

// Parse reads "0" (off), "N/s", "N/m" or "N/h", optionally followed by
// ":B" for a burst B (default N): "10/s", "600/m:20".
func Parse(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	if s == "0" || s == "" {
		return Limit{}, nil
	}
	rate, rest, ok := strings.Cut(s, "/")
	if !ok {
		return Limit{}, fmt.Errorf("%q: want N/s, N/m or N/h (optionally :burst), or 0 for off", s)
	}
	unit, burstStr, hasBurst := strings.Cut(rest, ":")
	n, err := strconv.Atoi(rate)
	if err != nil || n <= 0 {
		return Limit{}, fmt.Errorf("%q: the rate must be a positive integer", s)
	}
	l := Limit{Rate: n, Burst: n}
	switch unit {
	case "s":
		l.Period = time.Second
	case "m":
		l.Period = time.Minute
	case "h":
		l.Period = time.Hour
	default:
		return Limit{}, fmt.Errorf("%q: the period must be s, m or h", s)
	}
	if hasBurst {
		if l.Burst, err = strconv.Atoi(burstStr); err != nil || l.Burst <= 0 {
			return Limit{}, fmt.Errorf("%q: the burst must be a positive integer", s)
		}
	}
	return l, nil
}

// Defaults of Options.
const (
	// DefaultTimeout bounds one Allow's Redis call.
	DefaultTimeout = time.Second
	// DefaultCooldown is how long a Redis node that failed a call is not
	// asked again.
	DefaultCooldown = time.Second
)

// Options tune a Limiter. A nil *Options means every default; so does a
// zero field.
type Options struct {
	// Timeout bounds each Allow's Redis call. Past it, or on any Redis
	// failure, the limit admits: it fails open. Default DefaultTimeout
	// (1 s). Not much shorter than the Redis client's own timeouts: a
	// Redis that is slow under a stampede, not down, would let the
	// limit leak when it matters most. A node that is down refuses
	// connections, which fails at once whatever the bound.
	Timeout time.Duration
	// Cooldown is how long, after a failed call, the keys that live on the
	// same Redis node (the same master of a Redis Cluster) are admitted
	// without asking it. Default DefaultCooldown (1 s).
	Cooldown time.Duration
	// FailedOpen, when set, is called for each key admitted because Redis
	// did not answer (a metric). It must be fast and safe for concurrent
	// use.
	FailedOpen func()
}

// Limiter admits keys at a Limit. A nil *Limiter admits everything.
//
// It fails open: a key whose budget Redis cannot tell within Timeout is
// admitted (and counted by FailedOpen). The limit is abuse protection, not
// a promise: one order per user and the stock are held by the gate and
// the database, which an order reaches only through Redis anyway. Failing
// closed would turn the loss of the one Redis Cluster master that holds a
// user's limit key into 503s for that user's orders of every item, on
// every master: a failover of one shard would refuse orders on all.
type Limiter struct {
	rl      *redis_rate.Limiter
	cluster *redis.ClusterClient // nil: one Redis
	prefix  string
	limit   redis_rate.Limit
	opts    Options
	// down maps a node's address ("" for one Redis) to the time, in Unix
	// nanoseconds, until which it is not asked (*atomic.Int64).
	down sync.Map
}

// New returns a Limiter on rdb whose Redis keys start with prefix, or nil
// when limit is off.
func New(rdb redis.UniversalClient, prefix string, limit Limit, opts *Options) *Limiter {
	if limit.Off() {
		return nil
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Cooldown <= 0 {
		o.Cooldown = DefaultCooldown
	}
	l := &Limiter{rl: redis_rate.NewLimiter(rdb), prefix: prefix, opts: o,
		limit: redis_rate.Limit{Rate: limit.Rate, Period: limit.Period, Burst: limit.Burst}}
	l.cluster, _ = rdb.(*redis.ClusterClient)
	return l
}

// redisPrefix is what redis_rate puts before every key it is given.
const redisPrefix = "rate:"

// Allow takes one unit of key's budget. It returns 0 when admitted, else how
// long until the next unit. A Redis failure admits (see Limiter); err is
// only ctx's, when it ended first.
func (l *Limiter) Allow(ctx context.Context, key string) (retryAfter time.Duration, err error) {
	if l == nil {
		return 0, nil
	}
	key = l.prefix + key
	node := l.node(ctx, key)
	if l.resting(node) {
		return l.failOpen(ctx)
	}
	type answer struct {
		res *redis_rate.Result
		err error
	}
	cctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	// The call runs on its own goroutine, so a node that takes the command
	// and never answers (reads are bounded by the client's read timeout,
	// not by ctx) costs the request Timeout, not the read timeout.
	ch := make(chan answer, 1)
	go func() {
		res, err := l.rl.Allow(cctx, key, l.limit)
		ch <- answer{res, err}
	}()
	var a answer
	select {
	case a = <-ch:
	case <-cctx.Done():
		a.err = cctx.Err()
	}
	if a.err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		l.rest(node)
		return l.failOpen(ctx)
	}
	if a.res.Allowed > 0 {
		return 0, nil
	}
	return max(a.res.RetryAfter, time.Millisecond), nil
}

// failOpen admits a key whose budget Redis could not tell.
func (l *Limiter) failOpen(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if l.opts.FailedOpen != nil {
		l.opts.FailedOpen()
	}
	return 0, nil
}

// node is the address of the master that holds key on a Redis Cluster, ""
// on one Redis (or when the cluster client cannot place it yet).
func (l *Limiter) node(ctx context.Context, key string) string {
	if l.cluster == nil {
		return ""
	}
	m, err := l.cluster.MasterForKey(ctx, redisPrefix+key)
	if err != nil {
		return ""
	}
	return m.Options().Addr
}

// rest stops asking node for Cooldown.
func (l *Limiter) rest(node string) {
	v, _ := l.down.LoadOrStore(node, new(atomic.Int64))
	v.(*atomic.Int64).Store(time.Now().Add(l.opts.Cooldown).UnixNano())
}

// resting reports whether node failed a call less than Cooldown ago.
func (l *Limiter) resting(node string) bool {
	v, ok := l.down.Load(node)
	return ok && time.Now().UnixNano() < v.(*atomic.Int64).Load()
}
