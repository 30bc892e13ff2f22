package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lock is one acquisition of a lock. Its methods are safe for concurrent use
// and on a nil *Lock (which holds nothing).
type Lock struct {
	client *Client
	key    string
	keys   keys
	token  string
	id     string
	fence  int64
	ttl    time.Duration
	owner  *Owner
	sentAt time.Time // when the acquire was sent (carries the monotonic clock)

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	leaseTime *time.Timer // cancels ctx when the lease may lapse
	leaseOver bool        // ctx cancelled, for whatever reason
	releasing bool        // Release has started: refresh failures are expected
	final     error       // set once Release got a definitive answer (nil error -> ErrReleased)
	finished  bool
	stopWatch chan struct{}
	stopOnce  sync.Once
}

var cancelledCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotHeld)
	return ctx
}()

func newLock(a *attempt, fence int64, sentAt time.Time) *Lock {
	l := &Lock{
		client: a.c, key: a.key, keys: a.keys, token: a.token, id: a.id,
		fence: fence, ttl: a.ttl, owner: a.s.Owner, sentAt: sentAt,
	}
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(a.ctx))
	l.extendLease(sentAt, a.ttl)
	if l.owner != nil {
		l.owner.add(l)
	}
	if a.s.Watchdog != nil {
		l.stopWatch = make(chan struct{})
		go l.watch(a.s.watchdog)
	}
	return l
}

// Key returns the key passed to Obtain. In Redis the lock lives under the key
// with a hash tag added when it had none: "{key}".
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns the random 128-bit owner token (hex) stored in Redis. Locks
// obtained for an Owner share the owner's token.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Fence returns this acquisition's fencing token: strictly greater than the
// fence of every earlier acquisition of the same key, by anyone. Pass it to
// the guarded resource and have it refuse writes carrying an older fence.
func (l *Lock) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// Context returns the lease context. It is cancelled before the lock can
// expire in Redis: at sentAt + TTL - drift, where sentAt is when the acquire
// (or the last successful refresh) was sent, measured on the monotonic clock,
// and drift is TTL/100 + 1ms for clock-rate differences. It is also cancelled
// when the lock is released, found lost, or the watchdog fails.
// context.Cause tells which: ErrLeaseExpired, ErrReleased, or an ErrNotHeld
// error. For a nil Lock it returns an already cancelled context.
func (l *Lock) Context() context.Context {
	if l == nil {
		return cancelledCtx
	}
	return l.ctx
}

// Release releases this acquisition. It returns nil when released (also when
// an earlier call whose reply was lost already released it), ErrExpired when
// the lock had expired, ErrHeldByOther when someone else holds it now, and
// ErrReleased when this Lock was already released. All match ErrNotHeld.
// On other errors (e.g. network) the state is unknown; calling Release again
// is safe and reports correctly. Release stops the watchdog either way.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return ErrNotHeld
	}
	l.mu.Lock()
	if l.finished {
		err := l.final
		l.mu.Unlock()
		if err == nil {
			err = ErrReleased
		}
		return err
	}
	l.releasing = true
	l.mu.Unlock()
	l.stopWatchdog()

	k := l.keys
	res, err := releaseScript.Run(ctx, l.client.rdb,
		[]string{k.lock, k.fence, k.released, k.queue, k.deadline},
		l.token, l.id, l.fence, k.channel).Int64()
	if err == nil {
		switch res {
		case 1, 2:
		case -1:
			err = ErrExpired
		case -2:
			err = ErrHeldByOther
		default:
			err = fmt.Errorf("lock: unexpected release reply %d", res)
		}
		l.mu.Lock()
		l.finished, l.final = true, err
		l.mu.Unlock()
		if l.owner != nil {
			l.owner.remove(l)
		}
		cause := err
		if cause == nil {
			cause = ErrReleased
		}
		l.endLease(cause, false)
	} else {
		l.mu.Lock()
		l.releasing = false // unknown outcome: refresh failures count again
		l.mu.Unlock()
	}
	l.client.obs.Released(ReleaseEvent{Key: l.key, Held: time.Since(l.sentAt), Err: err})
	return err
}

// Refresh makes the lock live at least ttl more if the caller still holds
// it: it extends the key's TTL to ttl when that is longer than what is left,
// and never shortens it, because another acquisition of the same owner
// (Options.Reentrant) may hold a longer lease. The lease context then runs
// until the later of the two. Refresh never brings back an expired lock: it
// returns ErrExpired or ErrHeldByOther instead (and cancels the lease
// context).
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	return l.refresh(ctx, ttl, false)
}

func (l *Lock) refresh(ctx context.Context, ttl time.Duration, watchdog bool) error {
	if l == nil {
		return ErrNotHeld
	}
	if err := checkTTL(ttl); err != nil {
		return err
	}
	sent := time.Now()
	res, err := l.run(ctx, pxMillis(ttl))
	if err == nil && res >= 0 {
		// The key may hold more than ttl (refresh.lua never shortens it):
		// the lease runs until the later of the two.
		l.extendLease(sent, max(ttl, time.Duration(res)*time.Millisecond))
		return nil
	}
	if err == nil {
		err = codeError(res)
	}
	l.mu.Lock()
	releasing := l.releasing
	l.mu.Unlock()
	if !releasing {
		l.client.obs.RefreshFailed(RefreshEvent{Key: l.key, Watchdog: watchdog, Err: err})
		if errors.Is(err, ErrNotHeld) {
			l.endLease(err, true)
		}
	}
	return err
}

// TTL returns the remaining TTL, or 0 if the caller no longer holds the lock
// (then the lease context is cancelled too).
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, nil
	}
	res, err := l.status(ctx)
	if err != nil || res < 0 {
		return 0, err
	}
	return time.Duration(res) * time.Millisecond, nil
}

// Held reports whether the caller still holds the lock (the seed's
// isLocking). When it does not, the lease context is cancelled too.
func (l *Lock) Held(ctx context.Context) (bool, error) {
	if l == nil {
		return false, nil
	}
	res, err := l.status(ctx)
	return err == nil && res >= 0, err
}

// status returns the remaining TTL in ms, or a negative code when not held,
// in which case it ends the lease.
func (l *Lock) status(ctx context.Context) (int64, error) {
	res, err := l.run(ctx, 0)
	if errors.Is(err, ErrNotHeld) {
		return -4, nil // released or found lost before
	}
	if err != nil {
		return 0, err
	}
	if res < 0 {
		l.mu.Lock()
		releasing := l.releasing
		l.mu.Unlock()
		if !releasing {
			l.endLease(codeError(res), true)
		}
	}
	return res, nil
}

// run executes the refresh script; px 0 only reads the TTL.
func (l *Lock) run(ctx context.Context, px int64) (int64, error) {
	l.mu.Lock()
	finished, final := l.finished, l.final
	l.mu.Unlock()
	if finished {
		if final == nil {
			final = ErrReleased
		}
		return -4, final
	}
	return refreshScript.Run(ctx, l.client.rdb, []string{l.keys.lock}, l.token, l.id, px).Int64()
}

func codeError(res int64) error {
	switch res {
	case -1:
		return ErrExpired
	case -2:
		return ErrHeldByOther
	case -3:
		return ErrReleased
	}
	return fmt.Errorf("lock: unexpected reply %d", res)
}

// extendLease moves the lease deadline to sent+ttl-drift, unless the lease
// context is already cancelled (a cancelled lease stays cancelled).
func (l *Lock) extendLease(sent time.Time, ttl time.Duration) {
	deadline := sent.Add(ttl - ttl/100 - time.Millisecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leaseOver {
		return
	}
	if l.leaseTime == nil {
		l.leaseTime = time.AfterFunc(time.Until(deadline), func() { l.endLease(ErrLeaseExpired, true) })
		return
	}
	if l.leaseTime.Stop() { // false: it fired already and is ending the lease
		l.leaseTime.Reset(time.Until(deadline))
	}
}

// endLease cancels the lease context once, with cause.
func (l *Lock) endLease(cause error, lost bool) {
	l.mu.Lock()
	if l.leaseOver {
		l.mu.Unlock()
		return
	}
	l.leaseOver = true
	if l.leaseTime != nil {
		l.leaseTime.Stop()
	}
	l.mu.Unlock()
	l.cancel(cause)
	if lost {
		l.client.obs.LeaseLost(LeaseEvent{Key: l.key, Held: time.Since(l.sentAt), Cause: cause})
	}
}
