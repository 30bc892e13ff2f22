package lock

import (
	"context"
	"fmt"
	"time"
)

// Defaults for Options fields left at zero.
const (
	DefaultMinBackoff        = time.Millisecond
	DefaultMaxBackoff        = 100 * time.Millisecond
	DefaultPollInterval      = time.Second
	DefaultFairWaiterTimeout = 3 * time.Second
)

// Options tune one Obtain call. A nil *Options means all defaults: try once,
// not reentrant, not fair, no watchdog.
type Options struct {
	// Wait is how long Obtain keeps trying while the lock is held by someone
	// else. 0 (default) tries once; > 0 waits up to Wait or until ctx ends.
	Wait time.Duration

	// MinBackoff and MaxBackoff bound the sleep between attempts of a waiter
	// without wake-ups (NoWakeup, or if subscribing failed); defaults
	// DefaultMinBackoff and DefaultMaxBackoff. The n-th sleep is drawn
	// uniformly from [MinBackoff, min(MaxBackoff, MinBackoff*2^n)] (full
	// jitter above a floor, so waiters never spin).
	MinBackoff, MaxBackoff time.Duration

	// PollInterval: with wake-ups on (the default), a release wakes a waiter
	// at once and timed retries are only a safety net against a lost message
	// (e.g. a pub/sub reconnect). Such a waiter sleeps [PollInterval/2,
	// PollInterval] between unprompted tries. Default DefaultPollInterval.
	//
	// Any sleep is also cut to the holder's remaining TTL (so an expired,
	// never-released lock is noticed promptly) and, in fair mode, to a third
	// of FairWaiterTimeout.
	PollInterval time.Duration

	// NoWakeup disables pub/sub wake-ups: waiters rely on backoff alone.
	// Default false (wake-ups on). Mainly for comparison benchmarks.
	NoWakeup bool

	// Watchdog, when non-nil, keeps the lock alive while it is held.
	// Default nil: the lock lives exactly its TTL unless refreshed.
	Watchdog *WatchdogOptions

	// Owner, when non-nil, obtains the lock on behalf of that owner: the lock's
	// token is the owner's token and the owner tracks it until released (see
	// Owner.ReleaseAll). Default nil: a fresh random token per lock.
	Owner *Owner

	// Reentrant lets Owner obtain a lock it already holds; every acquisition
	// gets a new fence and must be released on its own. A re-entry extends
	// the key's TTL to its own TTL when that is longer, and never shortens
	// it: the other acquisitions keep at least the lease they were given.
	// Requires Owner. Default false: an owner asking again is refused like
	// anybody else (it waits, or gets ErrNotObtained).
	Reentrant bool

	// Fair hands the lock to waiters in arrival order (FIFO) instead of to
	// whoever retries first. Use it for every Obtain on a key or for none:
	// non-fair callers do not look at the queue. Default false.
	Fair bool

	// FenceFloor, when non-nil, keeps fences monotonic across Redis losing
	// its data. The fence counter is an ordinary key: a restart without
	// persistence, FLUSHALL or eviction loses it, and without FenceFloor
	// fences start again at 1, below fences the guarded resource has already
	// seen, so it refuses every holder as stale until the counter climbs
	// back. With FenceFloor, no lock is granted while the counter is missing:
	// Obtain calls FenceFloor for the highest fence the resource has seen
	// (e.g. SELECT lock_fence FROM items WHERE id = ?), raises the counter to
	// it in one script that only ever raises it (so instances seeding at once
	// are safe), and tries again; the next fence is above every fence the
	// resource has stored. An error from FenceFloor fails the Obtain with
	// ErrNotObtained and that error. Default nil: fences restart after a loss.
	// A counter that exists but lags the resource is not seeded here (only
	// the resource can tell it lags): see Client.RaiseFence.
	//
	// Limit: a holder that got its fence before the loss but had not written
	// with it yet may hold a fence equal to or above the first new ones (the
	// resource never saw it), so until its lease ends (at most its TTL) it
	// is not refused; the resource's own checks must stay safe with that, as
	// the stock database's conditional UPDATE is.
	FenceFloor func(ctx context.Context) (int64, error)

	// FairWaiterTimeout is how long a fair waiter stays in the queue without
	// polling before it is dropped, so a dead waiter blocks the queue at most
	// this long. Live waiters poll at least every FairWaiterTimeout/3.
	// Default DefaultFairWaiterTimeout.
	FairWaiterTimeout time.Duration
}

// WatchdogOptions configure automatic refreshing.
type WatchdogOptions struct {
	// Interval between refreshes; default TTL/3. Must be below the TTL.
	Interval time.Duration

	// MaxHold caps how long the watchdog keeps the lock alive, counted from
	// the acquire. After that it stops refreshing, calls OnLost with
	// ErrHoldLimit, and the lock lapses at its TTL. Default 1 minute.
	MaxHold time.Duration

	// OnLost, if set, is called once, from the watchdog goroutine, when the
	// watchdog stops for any reason other than Release: the lock was lost
	// (an ErrNotHeld error), the lease lapsed while Redis was unreachable
	// (ErrLeaseExpired), a non-transient error, or ErrHoldLimit.
	OnLost func(err error)
}

// DefaultWatchdogMaxHold is WatchdogOptions.MaxHold's default.
const DefaultWatchdogMaxHold = time.Minute

// settings is Options with defaults applied and checked.
type settings struct {
	Options
	watchdog WatchdogOptions
}

func resolve(opt *Options, ttl time.Duration) (settings, error) {
	var s settings
	if opt != nil {
		s.Options = *opt
	}
	if s.Wait < 0 {
		return s, fmt.Errorf("%w: negative Wait %v", ErrInvalidOptions, s.Wait)
	}
	if s.MinBackoff < 0 || s.MaxBackoff < 0 || s.PollInterval < 0 || s.FairWaiterTimeout < 0 {
		return s, fmt.Errorf("%w: negative backoff or waiter timeout", ErrInvalidOptions)
	}
	if s.MinBackoff == 0 {
		s.MinBackoff = DefaultMinBackoff
	}
	if s.MaxBackoff == 0 {
		s.MaxBackoff = max(DefaultMaxBackoff, s.MinBackoff)
	}
	if s.MinBackoff > s.MaxBackoff {
		return s, fmt.Errorf("%w: MinBackoff %v > MaxBackoff %v", ErrInvalidOptions, s.MinBackoff, s.MaxBackoff)
	}
	if s.PollInterval == 0 {
		s.PollInterval = DefaultPollInterval
	}
	if s.FairWaiterTimeout == 0 {
		s.FairWaiterTimeout = DefaultFairWaiterTimeout
	}
	if s.Fair && s.FairWaiterTimeout < 3*time.Millisecond {
		return s, fmt.Errorf("%w: FairWaiterTimeout %v below 3ms", ErrInvalidOptions, s.FairWaiterTimeout)
	}
	if s.Reentrant && s.Owner == nil {
		return s, fmt.Errorf("%w: Reentrant requires Owner", ErrInvalidOptions)
	}
	if s.Watchdog != nil {
		s.watchdog = *s.Watchdog
		if s.watchdog.Interval == 0 {
			s.watchdog.Interval = ttl / 3
		}
		if s.watchdog.Interval <= 0 || s.watchdog.Interval >= ttl {
			return s, fmt.Errorf("%w: watchdog interval %v must be in (0, ttl %v)", ErrInvalidOptions, s.watchdog.Interval, ttl)
		}
		if s.watchdog.MaxHold < 0 {
			return s, fmt.Errorf("%w: negative watchdog MaxHold", ErrInvalidOptions)
		}
		if s.watchdog.MaxHold == 0 {
			s.watchdog.MaxHold = DefaultWatchdogMaxHold
		}
	}
	return s, nil
}

// pxMillis converts a TTL to Redis PX milliseconds, rounding up so that a
// sub-millisecond remainder never truncates the TTL (e.g. 1.5ms -> 2).
func pxMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: got %v", ErrInvalidTTL, ttl)
	}
	return nil
}
