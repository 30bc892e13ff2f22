package lock

import (
	"errors"
	"fmt"
)

var (
	// ErrNotObtained is returned by Obtain when the lock is held by someone else
	// and could not be obtained before the wait ended. When the caller's context
	// ended the wait, the error also matches ctx.Err() through errors.Is.
	ErrNotObtained = errors.New("lock: not obtained")

	// ErrNotHeld means the caller does not hold the lock (any more). The more
	// specific ErrExpired, ErrHeldByOther and ErrReleased all match it.
	ErrNotHeld = errors.New("lock: not held")

	// ErrExpired: the lock's TTL ran out and nobody holds it now.
	ErrExpired = fmt.Errorf("%w: expired", ErrNotHeld)

	// ErrHeldByOther: the lock expired and another owner has obtained it since.
	ErrHeldByOther = fmt.Errorf("%w: held by another owner", ErrNotHeld)

	// ErrReleased: this Lock was already released (by this process).
	ErrReleased = fmt.Errorf("%w: already released", ErrNotHeld)

	// ErrLeaseExpired is the cause of a lease context cancelled because the
	// lease could lapse before a refresh confirmed it (see Lock.Context).
	ErrLeaseExpired = errors.New("lock: lease may have lapsed")

	// ErrHoldLimit is reported to WatchdogOptions.OnLost when the watchdog stops
	// refreshing because WatchdogOptions.MaxHold was reached.
	ErrHoldLimit = errors.New("lock: watchdog hold limit reached")

	// ErrInvalidKey: the key is empty.
	ErrInvalidKey = errors.New("lock: key must not be empty")

	// ErrInvalidTTL: the TTL is below one millisecond, the smallest PX Redis accepts.
	ErrInvalidTTL = errors.New("lock: ttl must be at least 1ms")

	// ErrInvalidOptions: an Options field is out of range or inconsistent.
	ErrInvalidOptions = errors.New("lock: invalid options")
)
