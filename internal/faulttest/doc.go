// Package faulttest holds fault tests that run the real seckill binary as
// separate processes against a real MariaDB and Redis, and break things the
// way production does: a writer killed with SIGKILL between its database
// COMMIT and its XACK, a writer killed while its batch waits on a stalled
// database (a survivor must not steal it before, and must write it within
// seconds after), the whole service killed mid-sale and restarted, the
// database unreachable for seconds under load, and Redis losing every key.
// After each fault the tests drain the lua-async queue and check the
// promises against the database: every acknowledged order is written once,
// nothing is oversold, no user holds two orders, and the Redis gate agrees
// with the database again.
//
// The package has no code of its own; everything is in its _test.go files.
// TestMain builds ./cmd/seckill once with -tags faultinject, which adds the
// SECKILL_TEST_CRASH_AFTER_COMMIT fault point (absent from the production
// build), and with -race when the tests run with -race. Each test uses its own database and key prefix (testenv.Real),
// and never flushes the shared Redis: the flush test starts a private
// redis-server. Run it with
//
//	CI=true go test -race -count=1 ./internal/faulttest/
//
// A process's output is shown in the test log when its test fails, or
// always with FAULTTEST_LOGS=1.
package faulttest
