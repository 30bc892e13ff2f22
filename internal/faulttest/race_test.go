//go:build race

package faulttest

// raceEnabled: the tests run with -race, so the binary is built with it too.
const raceEnabled = true
