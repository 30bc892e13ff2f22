package lock

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// watch refreshes the lock every o.Interval until Release, loss, a
// non-transient error or o.MaxHold. Transient errors are retried sooner; if
// they last until the lease deadline, the lease context ends the watch.
func (l *Lock) watch(o WatchdogOptions) {
	next := time.NewTimer(o.Interval)
	defer next.Stop()
	limit := time.NewTimer(time.Until(l.sentAt.Add(o.MaxHold)))
	defer limit.Stop()
	report := func(err error) {
		if o.OnLost != nil {
			o.OnLost(err)
		}
	}
	for {
		select {
		case <-l.stopWatch:
			return
		case <-l.ctx.Done():
			if cause := context.Cause(l.ctx); !errors.Is(cause, ErrReleased) {
				report(cause)
			}
			return
		case <-limit.C:
			report(ErrHoldLimit)
			return
		case <-next.C:
		}
		// Bounded by the lease context: a slow reply is still useful until the
		// lease deadline, and useless after it.
		err := l.refresh(l.ctx, l.ttl, true)
		switch {
		case err == nil:
			next.Reset(o.Interval)
		case errors.Is(err, ErrNotHeld):
			next.Reset(o.Interval) // the lease context is cancelled; the next select reports it
		case transient(err):
			next.Reset(max(o.Interval/4, time.Millisecond))
		default:
			l.endLease(err, true)
			next.Reset(o.Interval)
		}
	}
}

func (l *Lock) stopWatchdog() {
	if l.stopWatch != nil {
		l.stopOnce.Do(func() { close(l.stopWatch) })
	}
}

// transient reports whether a refresh error is worth retrying: network
// trouble, timeouts and Redis replies that mean "try again soon".
func transient(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var replyErr redis.Error
	if errors.As(err, &replyErr) {
		for _, prefix := range []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "MOVED", "ASK"} {
			if strings.HasPrefix(replyErr.Error(), prefix) {
				return true
			}
		}
		return false
	}
	return true // e.g. io.EOF, pool errors: the command may not have reached Redis
}
