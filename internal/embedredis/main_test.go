package embedredis_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/seckill/seckill/internal/testenv/exitsleep"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// closed embedded Redis must stop its clock and its server.
func TestMain(m *testing.M) {
	exitsleep.Skip() // first: it starts the binary again
	goleak.VerifyTestMain(m)
}
