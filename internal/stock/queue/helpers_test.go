package queue

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs up to four parallel tests at once (they mostly wait: on a
// cut acknowledgement, a killed master, a restarted cluster), and fails the
// package's tests if any goroutine outlives them (the writers, the claimer,
// the heartbeat, the fsync watch). One goroutine of go-redis is let be:
// after a failed dial (a killed master) its pool redials in the
// background, a second between tries, and a closed pool's redialer ends
// only at its next wake, which a test that closed it last may not see.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
