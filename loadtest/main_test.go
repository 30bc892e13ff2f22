package main

import (
	"os"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/testenv/exitsleep"
)

// TestMain runs four of the package's parallel tests at once: the room
// fakes and the command tests mostly wait (on an opening, on buyers'
// one-second polls, on a pass's slot held after it bought), and the proofs
// take Heavy turns, so they meet no latency-bound test of another package.
func TestMain(m *testing.M) {
	exitsleep.Skip() // first: it starts the binary again
	testenv.Parallel(4)
	os.Exit(m.Run())
}
