package app_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// App a test starts must stop its servers, writers, sweeper, subscriptions
// and pools when it is closed. go-redis redials a server that refused it in the background, a second
// between tries, and a closed pool's redialer ends only at its next wake,
// which a run whose last test cut a proxy (-run TestRedisOutage) may not see.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
