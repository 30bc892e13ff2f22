package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// One master of a Redis Cluster stops answering (CLIENT PAUSE: it takes
// commands and answers none for 3 s, as a master that hangs or is cut
// off). Calls for keys on the two other masters, sent through the same
// Pipeline at the same time, are answered as if nothing happened: the
// Pipeline batches by node, so none of them waits in a pipeline with the
// silent master. The silent master's own calls fail with
// stock.ErrUnavailable once Options.Wait has passed, not after the pause,
// and once it is known silent, at once.
func TestPipelineSilentMasterHoldsOnlyItsOwnCalls(t *testing.T) {
	const pause, wait = 3 * time.Second, 300 * time.Millisecond
	cluster := testenv.StartCluster(t, 3, 0)
	rdb := testenv.Backend{RedisURL: cluster.URL(), RedisMode: testenv.ModeCluster}.Universal(t)
	cc := rdb.(*redis.ClusterClient)
	ctx := context.Background()

	// One key per master, found by asking the client where keys live.
	byMaster := map[string]string{}
	for i := 0; len(byMaster) < 3 && i < 1000; i++ {
		key := fmt.Sprintf("pipe-test:{k%d}", i)
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("master of %s: %v", key, err)
		}
		if _, ok := byMaster[m.Options().Addr]; !ok {
			byMaster[m.Options().Addr] = key
		}
	}
	if len(byMaster) != 3 {
		t.Fatalf("found keys on %d masters, want 3", len(byMaster))
	}
	var silentAddr, silentKey string
	for addr, key := range byMaster {
		silentAddr, silentKey = addr, key
		break
	}

	p := NewPipeline(rdb, &PipelineOptions{Wait: wait})
	defer p.Close()
	set := func(key string) (time.Duration, error) {
		start := time.Now()
		var cmd *redis.StatusCmd
		err := p.Do(ctx, func(ctx context.Context, pl redis.Pipeliner) { cmd = pl.Set(ctx, key, "v", time.Minute) }, nil)
		if err == nil {
			err = cmd.Err()
		}
		return time.Since(start), err
	}
	// Every lane's loops have a connection before the pause.
	for _, key := range byMaster {
		if _, err := set(key); err != nil {
			t.Fatalf("set %s before the pause: %v", key, err)
		}
	}

	silent := redis.NewClient(&redis.Options{Addr: silentAddr})
	defer silent.Close()
	if err := silent.Do(ctx, "client", "pause", pause.Milliseconds(), "all").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE on %s: %v", silentAddr, err)
	}
	pausedAt := time.Now()

	type result struct {
		key  string
		took time.Duration
		err  error
	}
	results := make(chan result, 200)
	var wg sync.WaitGroup
	// The silent master's calls first, enough to hold every loop of a
	// shared pipeline; then the others'.
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			took, err := set(silentKey)
			results <- result{silentKey, took, err}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	for range 20 {
		for addr, key := range byMaster {
			if addr == silentAddr {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				took, err := set(key)
				results <- result{key, took, err}
			}()
		}
	}
	wg.Wait()
	close(results)
	healthy, failed := 0, 0
	for r := range results {
		switch {
		case r.key != silentKey:
			healthy++
			if r.err != nil {
				t.Errorf("set %s on a healthy master: %v, want success", r.key, r.err)
			}
			// Generous: an answer from a loopback Redis takes
			// milliseconds; the silent master holds its calls for 3 s.
			if r.took > time.Second {
				t.Errorf("set %s on a healthy master took %v: it waited for the silent master", r.key, r.took)
			}
		default:
			failed++
			if !errors.Is(r.err, stock.ErrUnavailable) {
				t.Errorf("set %s on the silent master: %v, want stock.ErrUnavailable", r.key, r.err)
			}
			if r.took > wait+time.Second {
				t.Errorf("set %s on the silent master failed after %v, want about the wait %v", r.key, r.took, wait)
			}
		}
	}
	t.Logf("%d calls on healthy masters answered, %d on the silent one refused", healthy, failed)
	// The master is still silent, and known to be: its next call fails at
	// once, not after another wait.
	if took, err := set(silentKey); !errors.Is(err, stock.ErrUnavailable) || took >= wait {
		t.Errorf("set %s on the silent master, known silent: %v after %v, want stock.ErrUnavailable at once (under the wait %v)",
			silentKey, err, took, wait)
	}
	elapsed := time.Since(pausedAt)
	if elapsed >= pause && !t.Failed() {
		t.Fatalf("the calls took %v, longer than the pause: the test proves nothing", elapsed)
	}
}

// A busy node is not a dead one: calls that wait in the queue behind
// slow pipelines longer than Options.Wait, each answered within Wait once
// sent, all succeed (an overloaded Redis answers late, not 503): the node
// answers every 60 ms, so it is never silent. The wait is a second, not
// less: only a test process starved that long could take an answer for
// silence.
func TestPipelineWaitCountsFromSending(t *testing.T) {
	const wait, busy, calls = time.Second, 60 * time.Millisecond, 24
	url := testenv.PrivateRedis(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	// One call at a time, each holding Redis for busy: the last waits
	// about calls*busy in the queue, well past wait.
	p := NewPipeline(rdb, &PipelineOptions{Senders: 1, MaxCalls: 1, Wait: wait})
	defer p.Close()
	spin := redis.NewScript(`local t = redis.call('TIME'); local start = t[1] * 1000000 + t[2]
while true do t = redis.call('TIME'); if t[1] * 1000000 + t[2] - start >= tonumber(ARGV[1]) then return 1 end end`)
	ctx := context.Background()
	if err := spin.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			errs <- p.RunScript(ctx, spin, nil, []string{fmt.Sprintf("busy-%d", i)}, busy.Microseconds()).Err()
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Errorf("a call queued behind busy pipelines: %v, want its answer", err)
		}
	}
	if took := time.Since(start); took < wait {
		t.Fatalf("the calls took %v in all, under the wait %v: the test proves nothing", took, wait)
	}
}

// One Redis stalls (a proxy holds every byte: connections open, nothing
// answered). The call in flight fails with stock.ErrUnavailable at Wait,
// and so does the call queued behind it, while the stall lasts: its node
// is silent, so it does not wait for a turn that only the stall's end
// would give it. Nothing races the clock: the client's read timeout is a
// minute and the stall lasts until both calls have returned, so only the
// silent-node rule can end the queued call.
func TestPipelineQueuedCallFailsBehindStalledRedis(t *testing.T) {
	const wait = 100 * time.Millisecond
	opt, err := redis.ParseURL(testenv.PrivateRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, opt.Addr)
	opt.Addr, opt.ReadTimeout, opt.MaxRetries = proxy.Addr(), time.Minute, -1
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	p := NewPipeline(rdb, &PipelineOptions{Senders: 1, MaxCalls: 1, Wait: wait})
	defer p.Close()
	ctx := context.Background()
	set := func(key string) error {
		return p.Do(ctx, func(ctx context.Context, pp redis.Pipeliner) { pp.Set(ctx, key, "v", 0) }, nil)
	}
	if err := set("stall-warm"); err != nil {
		t.Fatalf("before the stall: %v", err)
	}
	proxy.Stall()
	defer proxy.Heal() // after both calls returned (defers run last first)
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- set("stall-first") }()
	ln, err := p.lane(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for ln.sent[0].Load() == 0 { // the event: the first call is in flight
		time.Sleep(time.Millisecond)
	}
	go func() { second <- set("stall-second") }()
	for name, ch := range map[string]chan error{"the call in flight": first, "the call queued behind it": second} {
		select {
		case err := <-ch:
			if !errors.Is(err, stock.ErrUnavailable) {
				t.Errorf("%s, Redis stalled: %v, want stock.ErrUnavailable", name, err)
			}
		case <-time.After(30 * time.Second): // a safety net, not a bound: the stall lasts for ever
			t.Fatalf("%s, Redis stalled: still waiting after 30 s", name)
		}
	}
}
