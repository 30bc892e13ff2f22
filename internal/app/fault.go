package app

import (
	"os"
	"sync/atomic"
	"syscall"
)

// crashAfterCommit returns the AfterCommit hook of SECKILL_TEST_CRASH_AFTER_COMMIT:
// on the n-th committed lua-async batch the process kills itself with
// SIGKILL, so no deferred call, no acknowledgement and no graceful shutdown
// runs, as if the host died between COMMIT and XACK. nil when n <= 0.
func crashAfterCommit(n int) func() {
	if n <= 0 {
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
