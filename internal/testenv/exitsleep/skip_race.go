//go:build race && unix

package exitsleep

import (
	"os"
	"syscall"
)

// Skip starts the test binary again without the race detector's exit
// sleep, unless GORACE is set. Call it first in TestMain: nothing done
// before it is kept.
func Skip() {
	if _, set := os.LookupEnv("GORACE"); set {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	// Returns only if the execve failed: the binary goes on, with the sleep.
	_ = syscall.Exec(exe, os.Args, append(os.Environ(), "GORACE=atexit_sleep_ms=0"))
}
