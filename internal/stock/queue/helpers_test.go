package queue

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them (the
// writers, the claimer, the heartbeat, the fsync watch).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
