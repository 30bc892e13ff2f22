package queue_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/shop"
	"github.com/seckill/seckill/internal/stock/store"
	"github.com/seckill/seckill/internal/testenv"
)

// claimIdle is the backstop the tests here set: long enough that an entry
// left to it is seen to wait, far longer than the few seconds they allow.
const claimIdle = 30 * time.Second

// promptly is how soon a healthy item's order must be written.
const promptly = 5 * time.Second

// On a Redis Cluster every item's stream is read by an XREADGROUP of its
// own, all in one pipeline (issue 20): one item's read failing (here
// NOGROUP: its consumer group gone, as when its master restarts empty)
// must not cost the entries the same pipeline delivered from the other
// items' streams. They are written at once, not after the claim backstop.
func TestClusterOneStreamsErrorSparesTheOthers(t *testing.T) {
	t.Parallel() // its own service, database and key prefix
	b := testenv.Cluster(t)
	rdb := b.Universal(t)
	trap := &readTrap{}
	rdb.AddHook(trap)
	s := newService(t, b, rdb, queue.Config{Writers: 1, ClaimIdle: claimIdle})
	ctx := context.Background()
	lost, healthy := asyncItem(t, s, "lost"), asyncItem(t, s, "healthy")
	// Both streams are read and their groups exist.
	awaitWritten(t, s, []string{place(t, s, lost.ID, "warm-a"), place(t, s, healthy.ID, "warm-b")}, promptly)

	keys, err := gate.NewKeys(b.KeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	fired := trap.arm(func() {
		// The writer is about to read both streams: the lost item's
		// group goes, and the healthy item's buyers are admitted.
		if err := rdb.XGroupDestroy(ctx, keys.Stream(lost.ID), queue.Group).Err(); err != nil {
			t.Errorf("XGROUP DESTROY: %v", err)
		}
		for i := range 5 {
			ids = append(ids, place(t, s, healthy.ID, fmt.Sprintf("buyer-%d", i)))
		}
	})
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not read the streams within 10s")
	}
	awaitWritten(t, s, ids, promptly)
	// The lost item's group is made again, and its new orders written.
	awaitWritten(t, s, []string{place(t, s, lost.ID, "after")}, promptly)
}

// readTrap runs fire once, in the writer, just before the next pipeline of
// XREADGROUPs (the per-stream reads of a cluster) is sent.
type readTrap struct {
	mu   sync.Mutex
	fire func()
	done chan struct{}
}

func (h *readTrap) arm(fire func()) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fire, h.done = fire, make(chan struct{})
	return h.done
}

func (h *readTrap) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *readTrap) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *readTrap) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		reads := 0
		for _, c := range cmds {
			if c.Name() == "xreadgroup" {
				reads++
			}
		}
		h.mu.Lock()
		fire, done := h.fire, h.done
		if reads < 2 || fire == nil {
			h.mu.Unlock()
			return next(ctx, cmds)
		}
		h.fire = nil
		h.mu.Unlock()
		fire()
		err := next(ctx, cmds)
		close(done)
		return err
	}
}

// newService starts a Service on b through rdb with lua-async writers per
// cfg; it closes at cleanup.
func newService(t *testing.T, b testenv.Backend, rdb redis.UniversalClient, cfg queue.Config) *shop.Service {
	t.Helper()
	st, err := store.New(b.DB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := shop.NewService(st, rdb, shop.Config{KeyPrefix: b.KeyPrefix, SweepInterval: -1, Queue: cfg,
		Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// testLog sends the service's warnings to the test log.
type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func asyncItem(t *testing.T, s *shop.Service, name string) *stock.Item {
	t.Helper()
	it, err := s.CreateItem(context.Background(), stock.NewItem{Name: name, Stock: 100, Strategy: stock.StrategyLuaAsync})
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// place queues user's order of item and returns its id.
func place(t *testing.T, s *shop.Service, item int64, user string) string {
	t.Helper()
	o, _, err := s.PlaceOrder(context.Background(), stock.OrderRequest{ItemID: item, UserID: user})
	if err != nil {
		t.Fatalf("order of %s on item %d: %v", user, item, err)
	}
	return o.ID
}

// awaitWritten waits until every id is a created order, or fails the test
// after wait.
func awaitWritten(t *testing.T, s *shop.Service, ids []string, wait time.Duration) {
	t.Helper()
	start := time.Now()
	for _, id := range ids {
		for {
			o, err := s.Order(context.Background(), id)
			if err == nil && o.Status == stock.StatusCreated {
				break
			}
			if time.Since(start) > wait {
				t.Fatalf("order %s not written within %v (claim backstop %v): %+v %v", id, wait, claimIdle, o, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A writer that persisted a batch and cannot acknowledge it (the item's
// master died right after the commit) leaves it pending after a moment
// and goes on (issue 20): the items on the other masters are written
// while that master is down, not after it returns. The batch is not lost
// and not written twice: it is in the database; a promoted replica still
// has its entry, pending to the writer, which reads it again at once and
// finds it written; a master restarted empty lost it, and the gate is
// rebuilt from the database.
func TestClusterAckOnADeadMasterSparesTheOthers(t *testing.T) {
	t.Parallel() // each case has its own private cluster, database and prefix
	t.Run("no-replica", func(t *testing.T) { t.Parallel(); ackOnDeadMaster(t, 0) })
	t.Run("replica", func(t *testing.T) { t.Parallel(); ackOnDeadMaster(t, 1) })
}

func ackOnDeadMaster(t *testing.T, replicas int) {
	// Without full coverage the other masters serve while one is down.
	cluster := testenv.StartCluster(t, 3, replicas, "--cluster-require-full-coverage", "no")
	real := testenv.Real(t)
	b := testenv.Backend{Name: "private cluster", RedisURL: cluster.URL(), RedisMode: testenv.ModeCluster,
		MySQLDSN: real.MySQLDSN, KeyPrefix: real.KeyPrefix}
	rdb := b.Universal(t)
	var victim, replica atomic.Pointer[testenv.RedisServer]
	var replicated atomic.Value // error
	s := newService(t, b, rdb, queue.Config{Writers: 1, ClaimIdle: claimIdle, AfterCommit: func() {
		// The master dies between the commit and the acknowledgement,
		// once its replica has the entry and its delivery to the writer.
		if v := victim.Load(); v != nil {
			if r := replica.Load(); r != nil {
				replicated.Store(fmt.Sprint(awaitReplicated(v, r)))
			}
			v.Kill()
			victim.Store(nil)
		}
	}})
	doomed, healthy := itemsOnTwoMasters(t, s, b, rdb, cluster)
	awaitWritten(t, s, []string{place(t, s, doomed.item.ID, "warm-a"), place(t, s, healthy.item.ID, "warm-b")}, promptly)
	keys, err := gate.NewKeys(b.KeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	promoted := cluster.ReplicaOf(doomed.master.Addr())
	if replicas > 0 && promoted == nil {
		t.Fatalf("master %s has no replica", doomed.master.Addr())
	}
	replica.Store(promoted)
	victim.Store(doomed.master)
	unacked := place(t, s, doomed.item.ID, "unacked")
	for start := time.Now(); doomed.master.Running(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the doomed item's order was not committed within 10s")
		}
	}
	var ids []string
	for i := range 5 {
		ids = append(ids, place(t, s, healthy.item.ID, fmt.Sprintf("buyer-%d", i)))
	}
	awaitWritten(t, s, ids, promptly)
	// Committed before the kill; read through the cluster client, which
	// must first learn the new slot map (a second was too short beside
	// other tests on two busy cores). Still far below the 30 s backstop.
	awaitWritten(t, s, []string{unacked}, promptly)

	if promoted != nil {
		if err := replicated.Load(); err != "<nil>" {
			t.Fatalf("replica before the kill: %v", err)
		}
		// The promoted replica has the entry, pending to the writer,
		// which reads it again and finds it written.
		cluster.AwaitOK(30 * time.Second)
		awaitDrained(t, rdb, keys.Stream(doomed.item.ID), promptly)
	} else {
		// The master comes back empty: the doomed item's gate is
		// rebuilt from the database.
		doomed.master.Start()
		cluster.AwaitOK(30 * time.Second)
	}
	awaitWritten(t, s, []string{place(t, s, doomed.item.ID, "after")}, promptly)
	it, err := s.Item(context.Background(), doomed.item.ID)
	if err != nil {
		t.Fatal(err)
	}
	if it.Sold != 3 {
		t.Errorf("doomed item sold %d, want 3 (warm-a, unacked, after)", it.Sold)
	}
}

// awaitReplicated waits until replica has every write of master (their
// replication offsets meet), for at most 10s.
func awaitReplicated(master, replica *testenv.RedisServer) error {
	offset := func(s *testenv.RedisServer) (string, error) {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		defer c.Close()
		info, err := c.Info(context.Background(), "replication").Result()
		if err != nil {
			return "", err
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_repl_offset:"); ok {
				return v, nil
			}
		}
		return "", fmt.Errorf("INFO of %s has no master_repl_offset", s.Addr())
	}
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		m, err := offset(master)
		if err != nil {
			return err
		}
		r, err := offset(replica)
		if err != nil {
			return err
		}
		if m == r {
			return nil
		}
		if time.Since(start) > 10*time.Second {
			return fmt.Errorf("replica %s at offset %s, master %s at %s after 10s", replica.Addr(), r, master.Addr(), m)
		}
	}
}

// awaitDrained waits until stream has no entry and nothing pending, or
// fails the test after wait.
func awaitDrained(t *testing.T, rdb redis.UniversalClient, stream string, wait time.Duration) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	for {
		n, err := rdb.XLen(ctx, stream).Result()
		p, perr := rdb.XPending(ctx, stream, queue.Group).Result()
		if err == nil && perr == nil && n == 0 && p.Count == 0 {
			return
		}
		if time.Since(start) > wait {
			t.Fatalf("stream %s not drained within %v (claim backstop %v): %d entries, %+v pending (%v, %v)", stream, wait, claimIdle, n, p, err, perr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// onMaster is an item and the node that is its master.
type onMaster struct {
	item   *stock.Item
	master *testenv.RedisServer
}

// itemsOnTwoMasters creates lua-async items until two of them have
// different masters.
func itemsOnTwoMasters(t *testing.T, s *shop.Service, b testenv.Backend, rdb redis.UniversalClient, c *testenv.RedisCluster) (onMaster, onMaster) {
	t.Helper()
	keys, err := gate.NewKeys(b.KeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var first onMaster
	for i := range 20 {
		it := asyncItem(t, s, fmt.Sprintf("item-%d", i))
		m := masterOf(t, rdb, c, keys.Stream(it.ID))
		switch {
		case first.item == nil:
			first = onMaster{it, m}
		case m != first.master:
			return first, onMaster{it, m}
		}
	}
	t.Fatal("20 items, all on one master")
	return onMaster{}, onMaster{}
}

// masterOf is the node that is the master of key.
func masterOf(t *testing.T, rdb redis.UniversalClient, c *testenv.RedisCluster, key string) *testenv.RedisServer {
	t.Helper()
	m, err := rdb.(*redis.ClusterClient).MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatalf("master of %s: %v", key, err)
	}
	for _, n := range c.Nodes {
		if n.Addr() == m.Options().Addr {
			return n
		}
	}
	t.Fatalf("master %s of %s is none of the cluster's nodes", m.Options().Addr, key)
	return nil
}

// On a Redis Cluster the order's index is set after the enqueue script,
// in another slot, maybe on another master (issue 20): a master that does
// not answer must not hold the 202 past the request's deadline. The order
// was admitted, so the answer is the order all the same, and it is
// written: the index only lets GET find it while it is queued.
func TestClusterIndexHonoursTheRequestDeadline(t *testing.T) {
	b := testenv.Cluster(t)
	rdb := b.Universal(t)
	stall := &indexStall{d: 5 * time.Second}
	rdb.AddHook(stall)
	s := newService(t, b, rdb, queue.Config{Writers: 1, ClaimIdle: claimIdle})
	it := asyncItem(t, s, "stalled index")
	stall.on.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	o, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "patient"})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("order whose index stalls: %v; want it admitted", err)
	}
	if took > 2*time.Second {
		t.Errorf("order answered after %v with a 300ms deadline: the index write held it", took.Round(time.Millisecond))
	}
	if stall.seen.Load() == 0 {
		t.Fatal("no index write was stalled: is the hook seeing it?")
	}
	stall.on.Store(false)
	awaitWritten(t, s, []string{o.ID}, promptly)
}

// indexStall holds every pipeline that sets an order's index for d while on.
type indexStall struct {
	d    time.Duration
	on   atomic.Bool
	seen atomic.Int64
}

func (h *indexStall) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *indexStall) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *indexStall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if key, _ := c.Args()[min(1, len(c.Args())-1)].(string); h.on.Load() && c.Name() == "set" && strings.Contains(key, ":order:") {
				h.seen.Add(1)
				time.Sleep(h.d)
				break
			}
		}
		return next(ctx, cmds)
	}
}
