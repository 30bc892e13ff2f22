package lock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClient is the part of go-redis the library uses: scripts and pub/sub.
// *redis.Client, *redis.ClusterClient and *redis.Ring satisfy it.
type RedisClient interface {
	redis.Scripter
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

var (
	_ RedisClient = (*redis.Client)(nil)
	_ RedisClient = (*redis.ClusterClient)(nil)
	_ RedisClient = (*redis.Ring)(nil)
)

// ClientOptions configure a Client. A nil *ClientOptions means defaults.
type ClientOptions struct {
	// Observer receives latency, attempt, wait, hold, refresh-failure and
	// lost-lease events. Default: none.
	Observer Observer
	// CallTimeout bounds each acquire call of Obtain: past it the call
	// counts as unanswered (undone in the background) and Obtain fails,
	// even while go-redis would still retry it, so a stalled Redis costs
	// a caller about this long, not the client's timeout times its
	// retries. Default 0: the client's own timeouts and retries only.
	CallTimeout time.Duration
}

// Client obtains locks. It is safe for concurrent use. Waiters of one Client
// share a single pub/sub connection, opened on the first wait; Close it.
type Client struct {
	rdb RedisClient
	obs Observer
	hub *wakeHub
	// callTimeout is ClientOptions.CallTimeout.
	callTimeout time.Duration
	// undoing counts the undos of unanswered acquire calls still running.
	undoing sync.WaitGroup
}

// New returns a Client using rdb. opts may be nil.
func New(rdb RedisClient, opts *ClientOptions) *Client {
	c := &Client{rdb: rdb, obs: NopObserver{}, hub: newWakeHub(rdb)}
	if opts != nil && opts.Observer != nil {
		c.obs = opts.Observer
	}
	if opts != nil && opts.CallTimeout > 0 {
		c.callTimeout = opts.CallTimeout
	}
	return c
}

// Close closes the Client's pub/sub connection (not rdb), once the undos of
// unanswered acquire calls have run (a second at most each). Locks stay
// valid; Obtain calls made after Close wait with backoff only.
func (c *Client) Close() error {
	err := c.hub.close()
	c.undoing.Wait()
	return err
}

// Obtain tries to obtain the lock key for ttl (at least 1ms; Redis stores it
// in whole milliseconds, rounded up). With opt.Wait > 0 it keeps trying until
// it succeeds, Wait has passed or ctx ends; waiters sleep and are woken by the
// holder's release. It returns ErrNotObtained if the lock is held elsewhere;
// when ctx ended the wait the error matches ctx.Err() too.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration, opt *Options) (*Lock, error) {
	start := time.Now()
	ev := ObtainEvent{Key: key}
	l, err := c.obtain(ctx, key, ttl, opt, &ev)
	ev.Latency = time.Since(start)
	ev.Err = err
	c.obs.Obtained(ev)
	return l, err
}

// attempt is one Obtain call's identity: the same token and id are sent on
// every try, so a retried script recognises an acquisition that already ran.
type attempt struct {
	c          *Client
	ctx        context.Context
	key        string
	keys       keys
	token, id  string
	ttl        time.Duration
	s          settings
	queueForMs int64
}

func (c *Client) obtain(ctx context.Context, key string, ttl time.Duration, opt *Options, ev *ObtainEvent) (*Lock, error) {
	if key == "" {
		return nil, ErrInvalidKey
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	s, err := resolve(opt, ttl)
	if err != nil {
		return nil, err
	}
	ev.Fair = s.Fair
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(ErrNotObtained, err)
	}
	a := &attempt{c: c, ctx: ctx, key: key, keys: keysFor(key), id: randomHex(8), ttl: ttl, s: s}
	if s.Owner != nil {
		a.token = s.Owner.token
	} else {
		a.token = randomHex(16)
	}
	if s.Fair && s.Wait > 0 {
		a.queueForMs = pxMillis(s.FairWaiterTimeout)
	}

	l, pttl, err := a.try(ev)
	if err != nil || l != nil {
		return l, err
	}
	if s.Wait == 0 {
		return nil, ErrNotObtained
	}

	waitCtx, cancel := context.WithTimeout(ctx, s.Wait)
	defer cancel()

	var wake chan struct{} // nil (never ready) when wake-ups are off
	registered, retryNow := false, false
	if !s.NoWakeup {
		w := &waiter{id: a.id, channel: a.keys.channel, wake: make(chan struct{}, 1)}
		if joined, err := c.hub.register(waitCtx, w, s.PollInterval); err == nil {
			registered, wake = true, w.wake
			// After a new SUBSCRIBE, try again at once: a release may have
			// happened between the first try and the subscription. Joining
			// waiters already subscribed, such a release woke one of them.
			retryNow = !joined
			defer func() { c.hub.unregister(w, l != nil) }()
		}
	}

	for n := 0; ; n++ {
		if n > 0 || !retryNow {
			waited := time.Now()
			timer := time.NewTimer(a.backoff(n, pttl, registered))
			select {
			case <-wake:
			case <-timer.C:
			case <-waitCtx.Done():
			}
			timer.Stop()
			ev.Waited += time.Since(waited)
			if waitCtx.Err() != nil {
				break
			}
		}
		l, pttl, err = a.try(ev)
		if err != nil || l != nil {
			return l, err
		}
	}

	if s.Fair {
		a.leave()
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(ErrNotObtained, err)
	}
	return nil, ErrNotObtained
}

// RaiseFence raises the fence counter of key to at least floor and returns
// the counter after the call; it never lowers it, so callers raising at once,
// each from its own read of the guarded resource, are safe, and fences stay
// strictly increasing. The next acquisition of key gets a fence above floor.
//
// Use it when the guarded resource refused a holder's fence as stale
// although no newer holder should exist: the counter exists but lags the
// resource (a Redis replica promoted before the last INCRs reached it),
// which Options.FenceFloor cannot see because it seeds only a missing
// counter. Release the stale lock, raise the counter to the highest fence
// the resource has seen, and Obtain again. A holder whose fence is below
// floor stays refused by the resource; raising never revives it.
func (c *Client) RaiseFence(ctx context.Context, key string, floor int64) (int64, error) {
	if key == "" {
		return 0, ErrInvalidKey
	}
	if floor < 0 {
		return 0, fmt.Errorf("%w: negative fence floor %d", ErrInvalidOptions, floor)
	}
	n, err := seedScript.Run(ctx, c.rdb, []string{keysFor(key).fence}, floor).Int64()
	if err != nil {
		return 0, fmt.Errorf("lock: raise fence counter of %q: %w", key, err)
	}
	return n, nil
}

// maxSeeds bounds how often one try re-seeds a fence counter that keeps
// vanishing (Redis losing its data again and again).
const maxSeeds = 3

// try runs the acquire script once, seeding the fence counter first when it
// is missing and Options.FenceFloor is set.
func (a *attempt) try(ev *ObtainEvent) (*Lock, int64, error) {
	k := a.keys
	for seeds := 0; ; seeds++ {
		ev.Attempts++
		sent := time.Now()
		ctx, cancel := a.ctx, context.CancelFunc(func() {})
		if a.c.callTimeout > 0 {
			ctx, cancel = context.WithTimeout(a.ctx, a.c.callTimeout)
		}
		res, err := obtainScript.Run(ctx, a.c.rdb,
			[]string{k.lock, k.fence, k.queue, k.deadline},
			a.token, a.id, pxMillis(a.ttl), flag(a.s.Reentrant), flag(a.s.Fair), a.queueForMs,
			flag(a.s.FenceFloor != nil),
		).Int64Slice()
		cancel()
		if err != nil {
			return nil, 0, a.abandon(err)
		}
		if len(res) != 2 {
			return nil, 0, errors.Join(ErrNotObtained, errors.New("lock: unexpected acquire reply"))
		}
		switch res[0] {
		case 1:
			return newLock(a, res[1], sent), 0, nil
		case 2:
			if seeds == maxSeeds {
				return nil, 0, errors.Join(ErrNotObtained, fmt.Errorf("lock: fence counter of %q lost %d times in a row", a.key, seeds+1))
			}
			if err := a.seed(); err != nil {
				return nil, 0, errors.Join(ErrNotObtained, err)
			}
			ev.Seeded++
		default:
			return nil, res[1], nil
		}
	}
}

// seed raises the missing fence counter to the guarded resource's highest
// fence. The script only raises it, so concurrent seeders are safe, and
// obtain.lua grants nothing while it is missing, so a counter lost again
// after the seed is noticed and seeded again.
func (a *attempt) seed() error {
	floor, err := a.s.FenceFloor(a.ctx)
	if err != nil {
		return fmt.Errorf("lock: fence floor of %q: %w", a.key, err)
	}
	if floor < 0 {
		return fmt.Errorf("lock: fence floor of %q is negative: %d", a.key, floor)
	}
	if err := seedScript.Run(a.ctx, a.c.rdb, []string{a.keys.fence}, floor).Err(); err != nil {
		return fmt.Errorf("lock: seed fence counter of %q: %w", a.key, err)
	}
	return nil
}

// abandon handles a failed acquire call. If the script may have run (the
// error is not a reply from Redis, e.g. a cut connection or an ended ctx), it
// undoes the acquisition or queue entry best-effort, so nothing is left held
// under a token nobody will release. The undo is done before Obtain returns,
// unless the call timed out: then Redis is likely stalled, the undo would
// cost the caller another timeout, and it runs in the background instead
// (Close waits for it). It names this attempt's id, so it frees nothing a
// later attempt obtained.
func (a *attempt) abandon(err error) error {
	var replyErr redis.Error
	if !errors.As(err, &replyErr) {
		if !timedOut(err) {
			a.undo()
		} else {
			a.c.undoing.Add(1)
			go func() {
				defer a.c.undoing.Done()
				a.undo()
			}()
		}
	}
	return errors.Join(ErrNotObtained, err)
}

func (a *attempt) undo() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), time.Second)
	defer cancel()
	k := a.keys
	_ = releaseScript.Run(ctx, a.c.rdb,
		[]string{k.lock, k.fence, k.released, k.queue, k.deadline},
		a.token, a.id, 0, k.channel).Err()
	if a.s.Fair {
		a.leaveWith(ctx)
	}
}

// timedOut reports whether err is a call's time running out (the client's
// read timeout, or CallTimeout), not a failure Redis answered at once.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func (a *attempt) leave() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), time.Second)
	defer cancel()
	a.leaveWith(ctx)
}

func (a *attempt) leaveWith(ctx context.Context) {
	k := a.keys
	_ = leaveScript.Run(ctx, a.c.rdb, []string{k.lock, k.queue, k.deadline}, a.id, k.channel).Err()
}

// backoff returns the n-th sleep: with wake-ups, the safety-net poll in
// [PollInterval/2, PollInterval]; without, full jitter in [min, min(max,
// min*2^n)]. Never past the holder's remaining TTL (pttl ms, negative if
// unknown) and, in fair mode, short enough to keep the queue entry alive.
func (a *attempt) backoff(n int, pttl int64, wakeups bool) time.Duration {
	lo, ceiling := a.s.MinBackoff, a.s.MaxBackoff
	if wakeups {
		lo, ceiling = a.s.PollInterval/2, a.s.PollInterval
	} else if n < 30 && lo<<n < ceiling {
		ceiling = lo << n
	}
	d := lo
	if ceiling > lo {
		d += rand.N(ceiling - lo + 1)
	}
	if a.s.Fair {
		d = min(d, a.s.FairWaiterTimeout/3)
	}
	if pttl >= 0 {
		d = min(d, max(time.Duration(pttl)*time.Millisecond, a.s.MinBackoff))
	}
	return d
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}
