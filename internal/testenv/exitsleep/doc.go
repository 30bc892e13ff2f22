// Package exitsleep drops the race detector's sleep at a test binary's
// exit.
//
// A binary built with -race sleeps atexit_sleep_ms (1000 by default) in
// its last step, after its tests have passed, so that a goroutine still
// running may report a race first. The README's test command runs 22 test
// binaries, two at a time: 22 s asleep, about 11 s of the command's wall
// time (docs/DEVELOPING.md, "Test time"). Nothing here needs the sleep:
// the testing package fails the test during which a race is reported,
// every package with goroutines of its own checks with goleak that none
// outlives its tests, and a race reported after the tests still makes the
// binary exit with status 66 (the race runtime's exit check runs with
// atexit_sleep_ms=0 too; only its sleep is skipped).
//
// The race runtime reads GORACE once, before any Go code runs, so Skip
// starts the binary again, in the same process (execve), with
// GORACE=atexit_sleep_ms=0. It does nothing when GORACE is already set
// (a developer's own options, or the binary started again by Skip), in a
// binary built without -race, and on systems without execve; if the
// execve fails the binary goes on as it is, with the sleep. To run a test
// binary exactly as built (under a debugger that does not follow execve,
// say), set GORACE, to anything: GORACE=atexit_sleep_ms=1000 keeps the
// runtime's default.
package exitsleep
