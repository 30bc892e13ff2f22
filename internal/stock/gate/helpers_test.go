package gate

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them (the
// pipeline's senders, the events subscription).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
