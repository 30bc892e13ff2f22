package app_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/testenv/exitsleep"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// App a test starts must stop its servers, writers, sweeper, subscriptions
// and pools when it is closed. Most tests here wait (on restarts, fault
// windows, drains, peers): two run at once (see testenv.Parallel). Four
// starved the shared Redis Cluster for seconds on this 2-core machine, and
// the concurrency proofs, which allow no 503, failed beside the others;
// three did too (a proof over three instances saw 503s in CI), and again
// once the proofs' clients were cut to 64 connections (2026-11-28: the
// cluster's three-instance proof met a node silent for 3 s in a full run).
// go-redis redials a server that refused it in the background, a second
// between tries, and a closed pool's redialer ends only at its next wake,
// which a run whose last test cut a proxy (-run TestRedisOutage) may not see.
func TestMain(m *testing.M) {
	exitsleep.Skip() // first: it starts the binary again
	testenv.Parallel(2)
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
