//go:build faultinject

package app

import (
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
)

// FaultInjection reports whether this binary was built with the
// faultinject tag (internal/faulttest builds it so).
const FaultInjection = true

// crashAfterCommit returns the lua-async writers' AfterCommit hook named by
// SECKILL_TEST_CRASH_AFTER_COMMIT=n: on the n-th committed batch the process
// kills itself with SIGKILL, so no deferred call, no acknowledgement and no
// graceful shutdown runs, as if the host died between COMMIT and XACK. nil
// when the variable is unset or not positive. Only a binary built with
// -tags faultinject has this; the production build has no such setting.
func crashAfterCommit(getenv func(string) string) func() {
	n, err := strconv.Atoi(getenv("SECKILL_TEST_CRASH_AFTER_COMMIT"))
	if err != nil || n <= 0 {
		return nil
	}
	var commits atomic.Int64
	return func() {
		if commits.Add(1) == int64(n) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way; never acknowledge
		}
	}
}
