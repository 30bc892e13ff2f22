package testenv

import (
	"sync"
	"testing"
)

// RunTogether runs fn on every case as subtests of t, all at once, and
// returns when every one has ended. The subtests are not parallel tests:
// they start from goroutines (t.Run may be called from several at once), so
// they take no -test.parallel slot and wait for none. It is for a serial
// test whose cases each wait on their own private backends (an outage's
// window, a proxy's stall, a room's opening) and share nothing: inside a
// Solo turn, where the package's parallel tests do not run yet, the cases'
// waits then overlap instead of adding up.
func RunTogether[C any](t *testing.T, cases []C, name func(C) string, fn func(t *testing.T, c C)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(name(c), func(t *testing.T) { fn(t, c) })
		}()
	}
	wg.Wait()
}

// ForEachTogether is ForEach with the backends' subtests at once (see
// RunTogether): "embedded" and "mariadb".
func ForEachTogether(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	RunTogether(t, ForEachNames, func(n string) string { return n }, func(t *testing.T, n string) { fn(t, Open(t, n)) })
}

// ForEachNames are ForEach's backends, for tests that make cases of them.
var ForEachNames = []string{"embedded", "mariadb"}

// Open is the backend ForEach names n: Embedded for "embedded", else Real.
func Open(t *testing.T, n string) Backend {
	t.Helper()
	if n == "embedded" {
		return Embedded(t)
	}
	return Real(t)
}
