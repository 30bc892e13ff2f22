package lock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

// The waiter's poll interval is at least 10s, so obtaining well under that
// proves the release's PUBLISH woke it.
func TestWaiterWokenByRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)

	holder, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		if err := holder.Release(ctx); err != nil {
			t.Errorf("Release: %v", err)
		}
	}()
	start := time.Now()
	opt := &lock.Options{Wait: 30 * time.Second, PollInterval: 20 * time.Second}
	l, err := newClient(t, rdb, nil).Obtain(ctx, key, time.Minute, opt) // a second Client: wake-up crosses connections
	if err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("waiter took %v; a wake-up should beat the 10s backoff", waited)
	}
	if l.Fence() != holder.Fence()+1 {
		t.Errorf("fence %d after %d", l.Fence(), holder.Fence())
	}
	if err := l.Release(ctx); err != nil {
		t.Error(err)
	}
}

func TestCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)

	holder, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)

	for _, fair := range []bool{false, true} {
		waitCtx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		opt := &lock.Options{Wait: time.Minute, PollInterval: 20 * time.Second, Fair: fair, FairWaiterTimeout: time.Minute}
		l, err := c.Obtain(waitCtx, key, time.Minute, opt)
		if l != nil || !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Errorf("fair=%v: Obtain = %v, %v; want ErrNotObtained and context.Canceled", fair, l, err)
		}
		if waited := time.Since(start); waited > 5*time.Second {
			t.Errorf("fair=%v: cancel took %v to end a wait with a 10s+ poll", fair, waited)
		}
		if fair && rdb.LLen(ctx, "{"+key+"}:queue").Val() != 0 {
			t.Error("cancelled fair waiter left its queue entry")
		}
	}

	deadlineCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = c.Obtain(deadlineCtx, key, time.Minute, &lock.Options{Wait: time.Minute})
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctx deadline: %v; want ErrNotObtained and DeadlineExceeded", err)
	}
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	_, err = c.Obtain(cancelled, key+"-free", time.Minute, nil)
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Errorf("already cancelled ctx: %v", err)
	}
}

// A waiter also notices a lock that expires without a release (no PUBLISH):
// its sleep never exceeds the holder's remaining TTL.
func TestWaiterObtainsAfterExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)

	holder, err := c.Obtain(ctx, key, 300*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	opt := &lock.Options{Wait: 30 * time.Second, PollInterval: 20 * time.Second}
	l, err := c.Obtain(ctx, key, time.Minute, opt)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("took %v to notice a 300ms lock expire", waited)
	}
	if err := holder.Release(ctx); !errors.Is(err, lock.ErrHeldByOther) {
		t.Errorf("expired holder's Release = %v, want ErrHeldByOther", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Error(err)
	}
}

// Waiters with wake-ups off still get the lock, by backoff alone.
func TestBackoffOnlyWaiters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)

	var wg sync.WaitGroup
	var got atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				l, err := c.Obtain(ctx, key, 10*time.Second, &lock.Options{Wait: 30 * time.Second, NoWakeup: true})
				if err != nil {
					t.Errorf("Obtain: %v", err)
					return
				}
				got.Add(1)
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if got.Load() != 40 {
		t.Errorf("obtained %d times, want 40", got.Load())
	}
}

// replyDropper is a TCP proxy to Redis that, when armed, lets the next
// command through but swallows its reply and cuts the connection: the
// command ran, the client never learns it did.
type replyDropper struct {
	ln      net.Listener
	target  string
	armed   atomic.Bool
	dropped atomic.Int32
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

func newReplyDropper(tb testing.TB, target string) *replyDropper {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &replyDropper{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

func (p *replyDropper) addr() string { return p.ln.Addr().String() }

func (p *replyDropper) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(server, client)
			_ = server.Close()
		}()
		go func() {
			defer p.wg.Done()
			defer client.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 {
					if p.armed.CompareAndSwap(true, false) {
						p.dropped.Add(1)
						_ = server.Close()
						return
					}
					if _, werr := client.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func (p *replyDropper) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func proxiedRedis(tb testing.TB, p *replyDropper, maxRetries int) *redis.Client {
	return dial(tb, &redis.Options{Addr: p.addr(), MaxRetries: maxRetries, PoolSize: 1,
		MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 2 * time.Millisecond})
}

// go-redis retries a command whose reply was lost; the scripts recognise the
// retry: the acquire returns the same fence (one INCR), the release reports
// released rather than expired.
func TestLostReplyRetriedByClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := newRedis(t)
	key := testKey(t, direct)
	p := newReplyDropper(t, direct.Options().Addr)
	rdb := proxiedRedis(t, p, 3)
	c := newClient(t, rdb, nil)

	p.armed.Store(true)
	l, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatalf("Obtain with a lost reply: %v", err)
	}
	if p.dropped.Load() != 1 {
		t.Fatalf("proxy dropped %d replies, want 1", p.dropped.Load())
	}
	if n, _ := direct.Get(ctx, "{"+key+"}:fence").Int64(); n != l.Fence() || l.Fence() != 1 {
		t.Errorf("fence counter %d, lock fence %d: the retried acquire must not INCR again", n, l.Fence())
	}
	if owner := direct.HGet(ctx, "{"+key+"}", "owner").Val(); owner != l.Token() {
		t.Errorf("owner %q, want %q", owner, l.Token())
	}

	p.armed.Store(true)
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release with a lost reply = %v, want nil", err)
	}
	if p.dropped.Load() != 2 {
		t.Fatalf("proxy dropped %d replies, want 2", p.dropped.Load())
	}
	if exists(t, direct, "{"+key+"}") {
		t.Error("lock still in Redis")
	}
}

// Without client retries the caller sees the error; the state is still right:
// a failed Obtain leaves no orphan lock, and Release can be called again.
func TestLostReplyNoClientRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := newRedis(t)
	key := testKey(t, direct)
	p := newReplyDropper(t, direct.Options().Addr)
	rdb := proxiedRedis(t, p, -1)
	c := newClient(t, rdb, nil)

	p.armed.Store(true)
	l, err := c.Obtain(ctx, key, time.Minute, nil)
	if err == nil || !errors.Is(err, lock.ErrNotObtained) || l != nil {
		t.Fatalf("Obtain with a lost reply = %v, %v; want ErrNotObtained with the cause", l, err)
	}
	if p.dropped.Load() != 1 {
		t.Fatalf("proxy dropped %d replies, want 1", p.dropped.Load())
	}
	if exists(t, direct, "{"+key+"}") {
		t.Error("failed Obtain left the lock held")
	}
	if n, _ := direct.Get(ctx, "{"+key+"}:fence").Int64(); n != 1 {
		t.Errorf("fence counter = %d, want 1 (the script did run)", n)
	}

	l, err = c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.armed.Store(true)
	err = l.Release(ctx)
	if err == nil || errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release with a lost reply = %v, want a connection error", err)
	}
	if exists(t, direct, "{"+key+"}") {
		t.Error("the release did not run")
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release retried after it succeeded = %v, want nil", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrReleased) {
		t.Errorf("third Release = %v, want ErrReleased", err)
	}
}

// A process killed while holding the lock: the lock expires within its TTL
// and a waiter then gets it.
func TestKilledHolderExpires(t *testing.T) {
	t.Parallel()
	if key := os.Getenv("LOCK_TEST_HOLDER_KEY"); key != "" {
		holdAndHang(key)
		return
	}
	ctx := context.Background()
	rdb := newRedis(t)
	c := newClient(t, rdb, nil)
	key := testKey(t, rdb)
	const ttl = 500 * time.Millisecond

	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledHolderExpires$")
	cmd.Env = append(os.Environ(), "LOCK_TEST_HOLDER_KEY="+key, "SECKILL_TEST_REDIS_URL="+redisURL())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "held ") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper: %q, %v", line, err)
	}
	fence, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "held ")), 10, 64)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = cmd.Wait()

	if d := pttl(t, rdb, "{"+key+"}"); d <= 0 || d > ttl {
		t.Fatalf("killed holder's lock PTTL = %v, want (0, %v]", d, ttl)
	}
	for exists(t, rdb, "{"+key+"}") {
		if time.Since(killed) > ttl+time.Second {
			t.Fatalf("lock outlived its %v TTL by more than 1s", ttl)
		}
		time.Sleep(10 * time.Millisecond)
	}
	l, err := c.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatalf("Obtain after the holder died: %v", err)
	}
	if l.Fence() != fence+1 {
		t.Errorf("fence %d after the dead holder's %d", l.Fence(), fence)
	}
	if err := l.Release(ctx); err != nil {
		t.Error(err)
	}
}

func holdAndHang(key string) {
	opt, err := redis.ParseURL(redisURL())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	l, err := lock.New(redis.NewClient(opt), nil).Obtain(context.Background(), key, 500*time.Millisecond, nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("held %d\n", l.Fence())
	select {} // until killed
}

// The shared pub/sub connection is killed while a waiter waits; go-redis
// reconnects and resubscribes, and the next release still wakes the waiter
// well before its 20s+ poll.
func TestWakeupSurvivesPubSubReconnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := privateRedis(t)
	c := newClient(t, rdb, nil)

	holder, err := c.Obtain(ctx, "reconnect", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	start := time.Now()
	go func() {
		l, err := c.Obtain(ctx, "reconnect", time.Minute, &lock.Options{Wait: time.Minute, PollInterval: 40 * time.Second})
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	for rdb.PubSubNumSub(ctx, "{reconnect}:wake").Val()["{reconnect}:wake"] != 1 {
		time.Sleep(5 * time.Millisecond)
	}
	if n, err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Result(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v", n, err)
	}
	for rdb.PubSubNumSub(ctx, "{reconnect}:wake").Val()["{reconnect}:wake"] != 1 {
		if time.Since(start) > 15*time.Second {
			t.Fatal("the wake channel was not resubscribed within 15s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("waiter not woken 15s after the release (poll interval 20s+)")
	}
}
