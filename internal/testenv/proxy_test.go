package testenv

import (
	"io"
	"net"
	"testing"
	"time"
)

// Latency delays the target's replies, not the requests: a request reaches
// the target at once while its answer is held (a slow link back, or a
// server whose answer is late), and a cut then drops the held answer. It
// delayed the requests before, so a COMMIT under latency never reached
// the server.
func TestProxyLatencyHoldsRepliesNotRequests(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	arrived := make(chan []byte, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4)
		n, _ := io.ReadFull(c, buf)
		arrived <- buf[:n]
		_, _ = c.Write([]byte("pong"))
		_, _ = io.Copy(io.Discard, c) // until the proxy closes it
	}()
	p := NewProxy(t, l.Addr().String())
	p.Latency(time.Hour)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if got := <-arrived; string(got) != "ping" {
		t.Fatalf("the target got %q, want the request at once", got)
	}
	p.Cut()
	got, err := io.ReadAll(c)
	if len(got) != 0 {
		t.Fatalf("the client got %q under an hour's latency before the cut, want nothing", got)
	}
	t.Logf("the client's read after the cut: %v", err)
}
