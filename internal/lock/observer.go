package lock

import "time"

// Observer receives measurements from a Client, e.g. to feed metrics.
// Methods are called synchronously on the calling goroutine (or the watchdog
// goroutine), so they must be fast and safe for concurrent use. Events carry
// the key for logging; nothing forces a per-key metric label on anyone.
// Embed NopObserver to implement only some methods.
type Observer interface {
	// Obtained is called once per Obtain call, whatever the outcome.
	Obtained(ObtainEvent)
	// Released is called once per Release call on a non-nil Lock.
	Released(ReleaseEvent)
	// RefreshFailed is called when a refresh (by Refresh or the watchdog) fails.
	RefreshFailed(RefreshEvent)
	// LeaseLost is called once when a lock's lease context is cancelled for any
	// reason other than Release.
	LeaseLost(LeaseEvent)
}

// ObtainEvent describes one Obtain call.
type ObtainEvent struct {
	Key      string
	Attempts int           // acquire scripts run (0 when the input was invalid)
	Waited   time.Duration // time spent sleeping or waiting for a wake-up
	Latency  time.Duration // whole Obtain call
	Fair     bool
	Seeded   int   // fence counters found missing and seeded (Options.FenceFloor)
	Err      error // nil when obtained
}

// ReleaseEvent describes one Release call.
type ReleaseEvent struct {
	Key  string
	Held time.Duration // since the acquire was sent
	Err  error
}

// RefreshEvent describes one failed refresh.
type RefreshEvent struct {
	Key      string
	Watchdog bool
	Err      error
}

// LeaseEvent describes a lost lease.
type LeaseEvent struct {
	Key   string
	Held  time.Duration
	Cause error // ErrLeaseExpired, an ErrNotHeld error, or another refresh error
}

// NopObserver ignores every event.
type NopObserver struct{}

func (NopObserver) Obtained(ObtainEvent)       {}
func (NopObserver) Released(ReleaseEvent)      {}
func (NopObserver) RefreshFailed(RefreshEvent) {}
func (NopObserver) LeaseLost(LeaseEvent)       {}
