package main

import (
	"os"
	"testing"

	"github.com/seckill/seckill/internal/testenv/exitsleep"
)

// TestMain skips the race detector's exit sleep (see package exitsleep).
func TestMain(m *testing.M) {
	exitsleep.Skip() // first: it starts the binary again
	os.Exit(m.Run())
}
