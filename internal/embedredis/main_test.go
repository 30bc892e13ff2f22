package embedredis_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// closed embedded Redis must stop its clock and its server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
