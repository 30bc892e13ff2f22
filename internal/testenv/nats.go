package testenv

import (
	"net"
	"os"
	"testing"
	"time"
)

// NATSAddr is the machine's NATS (JetStream) server, host:port; under
// CI=true a missing server fails the test, elsewhere it skips. Tests name
// their own stream and subject prefix (Suffix) so they never collide.
func NATSAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("SECKILL_TEST_NATS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:4222"
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		if InCI() {
			t.Fatalf("NATS at %s unavailable: %v", addr, err)
		}
		t.Skipf("NATS at %s unavailable (set CI=true to make this fail): %v", addr, err)
	}
	_ = c.Close()
	return addr
}
