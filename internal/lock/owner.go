package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Owner is a session that obtains locks under one token and tracks them, so
// they can be released together (the seed's unlockAll) and, with
// Options.Reentrant, re-entered. Safe for concurrent use.
type Owner struct {
	token string

	mu    sync.Mutex
	locks []*Lock // in acquisition order
}

// NewOwner returns an Owner with a random 128-bit token.
func NewOwner() *Owner {
	return &Owner{token: randomHex(16)}
}

// Token returns the owner's token, shared by all its locks.
func (o *Owner) Token() string { return o.token }

// Locks returns the locks the owner currently tracks (obtained and not yet
// released), oldest first.
func (o *Owner) Locks() []*Lock {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*Lock(nil), o.locks...)
}

// ReleaseAll releases every tracked lock, newest first, and returns the
// joined errors of those that could not be released (ErrExpired or
// ErrHeldByOther for lost locks). Locks lost or released stop being tracked.
func (o *Owner) ReleaseAll(ctx context.Context) error {
	locks := o.Locks()
	var errs []error
	for i := len(locks) - 1; i >= 0; i-- {
		l := locks[i]
		if err := l.Release(ctx); err != nil && !errors.Is(err, ErrReleased) {
			errs = append(errs, fmt.Errorf("%s (fence %d): %w", l.key, l.fence, err))
		}
	}
	return errors.Join(errs...)
}

func (o *Owner) add(l *Lock) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.locks = append(o.locks, l)
}

func (o *Owner) remove(l *Lock) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, other := range o.locks {
		if other == l {
			o.locks = append(o.locks[:i], o.locks[i+1:]...)
			return
		}
	}
}
