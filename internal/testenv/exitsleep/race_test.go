//go:build race

package exitsleep_test

const raceEnabled = true
