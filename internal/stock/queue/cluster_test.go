package queue_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
