package app_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/seckill/seckill/internal/testenv"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// App a test starts must stop its servers, writers, sweeper, subscriptions
// and pools when it is closed. Most tests here wait (on restarts, fault
// windows, drains, peers): four run at once (see testenv.Parallel).
func TestMain(m *testing.M) {
	testenv.Parallel(4)
	goleak.VerifyTestMain(m)
}
