package faulttest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// proc is one process of the binary under test. Its stdout and stderr are
// kept and shown in the test log when the test fails; it is killed when
// the test ends.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *outputBuffer
	done chan struct{} // closed once the process has exited and been reaped

	mu      sync.Mutex
	state   *os.ProcessState
	killed  bool // this test sent SIGKILL
	mayExit bool // exiting on its own is what the test wants
}

// startProc starts the binary with args and env (added to this process's
// environment without its SECKILL_ variables, so nothing of the caller's
// configuration leaks in).
func startProc(t *testing.T, name string, args []string, env map[string]string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, out: &outputBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(seckillBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	testenv.DieWithTest(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.mu.Lock()
		p.state = p.cmd.ProcessState
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		p.mu.Lock()
		unexpected := !p.killed && !p.mayExit
		state := p.state
		p.mu.Unlock()
		if unexpected {
			t.Errorf("%s exited on its own: %v", name, state)
		}
		if p.out.contains("WARNING: DATA RACE") {
			t.Errorf("%s reported a data race (see its output below)", name)
		}
		if p.out.contains("panic: ") {
			t.Errorf("%s panicked (see its output below)", name)
		}
		if t.Failed() || os.Getenv("FAULTTEST_LOGS") != "" {
			t.Logf("---- output of %s (pid %d) ----\n%s", name, p.cmd.Process.Pid, p.out.tail(96<<10))
		}
	})
	return p
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL (unless the process is gone) and waits until it is reaped.
func (p *proc) kill() {
	p.mu.Lock()
	if !p.exited() {
		p.killed = true
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	p.mu.Unlock()
	<-p.done
}

// waitExit waits for the process to exit by itself and returns how it
// ended; the test fails if it is still running after d.
func (p *proc) waitExit(d time.Duration) *os.ProcessState {
	p.t.Helper()
	p.mu.Lock()
	p.mayExit = true
	p.mu.Unlock()
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("%s still running after %v", p.name, d)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// killedBySIGKILL reports whether state is the end of a process killed by SIGKILL.
func killedBySIGKILL(state *os.ProcessState) bool {
	ws, ok := state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// outputBuffer keeps a process's output, up to a bound.
type outputBuffer struct {
	mu        sync.Mutex
	b         bytes.Buffer
	truncated bool
}

const maxOutput = 16 << 20

func (o *outputBuffer) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.b.Len()+len(p) > maxOutput {
		o.truncated = true
		return len(p), nil
	}
	return o.b.Write(p)
}

func (o *outputBuffer) contains(s string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Contains(o.b.Bytes(), []byte(s))
}

// count counts the lines containing s.
func (o *outputBuffer) count(s string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(o.b.Bytes()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(s)) {
			n++
		}
	}
	return n
}

// tail is the last n bytes of the output.
func (o *outputBuffer) tail(n int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.b.Bytes()
	s := ""
	if len(b) > n {
		s = fmt.Sprintf("[... %d bytes before ...]\n", len(b)-n)
		b = b[len(b)-n:]
	}
	s += string(b)
	if o.truncated {
		s += "\n[... output past 16 MiB dropped ...]"
	}
	return s
}

// freeAddr is a loopback address with a port that was free a moment ago,
// below the kernel's ephemeral range (testenv.FreePort: a port from
// Listen(":0") went to some connection before the service bound it).
func freeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
}

// backends is what the processes of one test share.
type backends struct {
	redisURL  string
	dsn       string
	prefix    string
	claimIdle string // SECKILL_CLAIM_IDLE; "" = 5s
}

func realBackends(b testenv.Backend) backends {
	return backends{redisURL: b.RedisURL, dsn: b.MySQLDSN, prefix: b.KeyPrefix}
}

// env is the configuration every process of a test gets: the shared
// backends, the test admin token, a short claim idle time (the floor, 5s,
// unless the test sets one), no per-user rate limit (the load reuses users on purpose) and no
// limit of room joins per address (every client is on loopback), plus
// extra.
func (be backends) env(extra map[string]string) map[string]string {
	env := map[string]string{
		"SECKILL_REDIS_URL":        be.redisURL,
		"SECKILL_MYSQL_DSN":        be.dsn,
		"SECKILL_KEY_PREFIX":       be.prefix,
		"SECKILL_ADMIN_TOKEN":      apptest.Token,
		"SECKILL_CLAIM_IDLE":       "5s",
		"SECKILL_RATE_USER":        "0",
		"SECKILL_ROOM_RATE_IP":     "0", // every load client is on loopback
		"SECKILL_LOG_FORMAT":       "json",
		"SECKILL_LOG_LEVEL":        "info",
		"SECKILL_SHUTDOWN_TIMEOUT": "2s",
	}
	if be.claimIdle != "" {
		env["SECKILL_CLAIM_IDLE"] = be.claimIdle
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// service is a `seckill serve` process.
type service struct {
	*proc
	addr string
	c    *apptest.Client
}

// startService starts `seckill serve` on addr ("" = a free port) and waits
// until it answers.
func startService(t *testing.T, name, addr string, be backends, extra map[string]string) *service {
	t.Helper()
	if addr == "" {
		addr = freeAddr(t)
	}
	env := be.env(extra)
	env["SECKILL_ADDR"] = addr
	s := &service{proc: startProc(t, name, []string{"serve"}, env), addr: addr}
	s.c = apptest.NewClient("http://"+addr, apptest.Token)
	s.awaitHealthy("http://" + addr + "/healthz")
	return s
}

// worker is a `seckill worker` process with /metrics on its admin address.
type worker struct {
	*proc
	admin string
}

// startWorker starts `seckill worker`; with wait it waits until the worker
// answers on its admin address.
func startWorker(t *testing.T, name string, be backends, extra map[string]string, wait bool) *worker {
	t.Helper()
	env := be.env(extra)
	env["SECKILL_ADMIN_ADDR"] = freeAddr(t)
	w := &worker{proc: startProc(t, name, []string{"worker"}, env), admin: env["SECKILL_ADMIN_ADDR"]}
	if wait {
		w.awaitHealthy("http://" + w.admin + "/healthz")
	}
	return w
}

// awaitHealthy polls url until it answers 200; the test fails if the
// process exits or 30 s pass first (a -race binary migrating on a busy
// 2-core machine takes a few seconds).
func (p *proc) awaitHealthy(url string) {
	p.t.Helper()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if p.exited() {
			p.t.Fatalf("%s exited before answering on %s: %v", p.name, url, p.cmd.ProcessState)
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s not answering on %s after 30s", p.name, url)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric reads one sample of a Prometheus text exposition at url, e.g.
// `seckill_async_orders_persisted_total{outcome="already"}`; absent is 0.
func metric(t *testing.T, url, sample string) float64 {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: got %d, want 200", url, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %q: %v", sample, v, err)
			}
			return f
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return 0
}

// privateRedis starts a redis-server of this test's own, without
// persistence, on a free port; it is killed when the test ends. A test may
// flush it. Without the binary the test fails under CI=true and skips
// elsewhere.
func privateRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("CI=true but redis-server is not installed: %v", err)
		}
		t.Skipf("redis-server not installed (set CI=true to make this fail): %v", err)
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	p := &proc{t: t, name: "redis-server", out: &outputBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir())
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	testenv.DieWithTest(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("---- output of redis-server ----\n%s", p.out.tail(16<<10))
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return "redis://" + addr + "/0"
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("private redis-server on %s did not start: %v\n%s", addr, err, p.out.tail(4<<10))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
