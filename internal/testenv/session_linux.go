package testenv

import (
	"os/exec"
	"syscall"
)

// OwnSession makes cmd, a backend a test starts (a private redis-server, a
// seckill process), lead a session of its own, so Linux's autogroup
// scheduling shares the CPU between it and the test processes as it does
// for the shared backends, instead of counting it as one more thread of
// the busy test run (scripts/prioritize-services.sh says why that starves
// a Redis). It is killed when the test process dies, as it would have
// been with the terminal's signals.
func OwnSession(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
