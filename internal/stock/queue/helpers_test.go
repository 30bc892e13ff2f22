package queue

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/seckill/seckill/internal/testenv"
)

// TestMain runs up to four parallel tests at once (they mostly wait: on a
// cut acknowledgement, a killed master, a restarted cluster), and fails the
// package's tests if any goroutine outlives them (the writers, the claimer,
// the heartbeat, the fsync watch).
func TestMain(m *testing.M) {
	testenv.Parallel(4)
	goleak.VerifyTestMain(m)
}
