package gate

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/seckill/seckill/internal/testenv/exitsleep"
)

// TestMain fails the package's tests if any goroutine outlives them (the
// pipeline's senders, the events subscription).
func TestMain(m *testing.M) {
	exitsleep.Skip() // first: it starts the binary again
	goleak.VerifyTestMain(m)
}
