package testenv

import (
	"flag"
	"fmt"
	"os"
	"strconv"
)

// Parallel makes n the default of -test.parallel (how many of the
// package's t.Parallel tests run at once; Go's default is GOMAXPROCS, 2 on
// the project's machine) unless the command line sets it. A package whose
// tests mostly wait (on processes, restarts, fault windows, drains) calls
// it first in its TestMain, so their waits overlap. Tests that bound a
// latency stay serial, and CPU-heavy sections take a slot of their own
// (see apptest.Proof), so more parallel tests do not starve them.
func Parallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if set {
		return
	}
	if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: set -test.parallel %d: %v\n", n, err)
		os.Exit(2)
	}
}
