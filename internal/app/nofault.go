//go:build !faultinject

package app

// FaultInjection reports whether this binary was built with the
// faultinject tag; the production build is not.
const FaultInjection = false

// crashAfterCommit is the fault-injection hook of internal/faulttest's
// builds (see fault.go); a production build has none and reads nothing.
func crashAfterCommit(func(string) string) func() { return nil }
