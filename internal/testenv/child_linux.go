package testenv

import (
	"os/exec"
	"syscall"
)

// DieWithTest makes cmd, a backend a test starts (a private redis-server,
// a seckill process), get SIGKILL when the test process dies, so a test
// binary killed by its timeout or by hand leaves no process behind.
func DieWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
