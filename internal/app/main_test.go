package app_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// App a test starts must stop its servers, writers, sweeper, subscriptions
// and pools when it is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
