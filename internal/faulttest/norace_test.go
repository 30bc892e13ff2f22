//go:build !race

package faulttest

const raceEnabled = false
