package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"sync"
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
	return StartRedisServer(t, args...).URL()
}

// RedisServer is a private redis-server process that a test may kill and
// start again on the same port, e.g. to lose its data mid-test.
type RedisServer struct {
	t    testing.TB
	bin  string
	args []string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd
	out *SyncBuffer // exec copies into it while Start may read it
}

// StartRedisServer is PrivateRedis returning the server, for tests that
// kill and restart it. It is killed when the test ends.
func StartRedisServer(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if InCI() {
			t.Fatalf("CI=true but redis-server is not installed: %v", err)
		}
		t.Skipf("redis-server not installed: %v", err)
	}
	port := FreePort(t)
	if slices.Contains(args, "--cluster-enabled") && !slices.Contains(args, "--cluster-port") {
		// The bus port is otherwise port+10000, inside the kernel's
		// ephemeral range, where some connection may hold it (CI saw
		// "Failed listening on port 38272 (cluster)").
		args = append(args, "--cluster-port", strconv.Itoa(FreePort(t)))
	}
	s := &RedisServer{t: t, bin: bin, port: port,
		args: append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--dir", t.TempDir(), "--daemonize", "no"}, args...)}
	t.Cleanup(s.Kill)
	s.Start()
	return s
}

// URL is the server's redis:// URL; it stays the same across restarts.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() + "/0" }

// Start starts the server (again) on its port and waits until it answers.
// Without persistence it comes back empty.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		s.t.Fatal("redis-server already running")
	}
	out := &SyncBuffer{}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = out, out
	DieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd, s.out = cmd, out
	s.mu.Unlock()

	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("private redis-server on port %d did not answer: %s", s.port, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the server at once (SIGKILL, as a crash) and waits for it to
// exit. Without persistence its data is gone. It does nothing when the
// server is not running.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
