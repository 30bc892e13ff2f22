package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// PrivateRedis starts a redis-server of the test's own on a free loopback
// port, with a temp dir and the extra config args (e.g. "--appendonly",
// "yes"), stops it when the test ends and returns its URL. A test may do
// anything to it, FLUSHALL included. Without the binary the test skips,
// or fails under CI=true.
func PrivateRedis(t testing.TB, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if InCI() {
			t.Fatalf("CI=true but redis-server is not installed: %v", err)
		}
		t.Skipf("redis-server not installed: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	full := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--dir", t.TempDir(), "--daemonize", "no"}, args...)
	var out bytes.Buffer
	cmd := exec.Command(bin, full...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	opt, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("private redis-server on port %d did not answer: %s", port, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return url
}
