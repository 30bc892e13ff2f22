package shop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/testenv"
)

// rebuildCase is an item kind whose gate a test loses and rebuilds.
type rebuildCase struct {
	name     string
	strategy stock.StrategyName
	buckets  int
}

var rebuildCases = []rebuildCase{
	{"lua", stock.StrategyLua, 1},
	{"lua-3-buckets", stock.StrategyLua, 3},
	{"lua-async", stock.StrategyLuaAsync, 1},
	{"lua-async-3-buckets", stock.StrategyLuaAsync, 3},
	{"lock", stock.StrategyLock, 1},
}

// settle waits until every order of a lua-async item is written (its
// queue drained), so that a reconcile sees nothing in flight.
func settle(t *testing.T, s *Service, it *stock.Item, ids []string) {
	t.Helper()
	if it.Strategy == stock.StrategyLuaAsync {
		awaitWritten(t, s, ids, 20*time.Second)
	}
}

// Redis loses an item's gate after most of the item was sold (its keys
// deleted; or, on a private redis-server, a restart without persistence),
// then the earlier buyers and one new buyer order at once. The rebuilt gate
// must hold the earlier buyers: each hears already_purchased, and the new
// buyer gets the last unit, never a false sold_out while the database has
// it. Before the rebuild restored the buyers, a lua item's earlier buyers
// passed the gate, held the last unit until the database refused them, and
// the new buyer heard sold_out (issue 24). The reconcile dry run after
// shows no drift.
func TestRebuildKeepsBuyers(t *testing.T) {
	run := func(t *testing.T, s *Service, lose func()) {
		for _, c := range rebuildCases {
			t.Run(c.name, func(t *testing.T) {
				for trial := 0; trial < 3; trial++ {
					rebuildTrial(t, s, c, trial, lose)
				}
			})
		}
	}
	t.Run("keys deleted", func(t *testing.T) {
		testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
			s := asyncService(t, b, newTestStore(t, b, nil), 1, 0, 0)
			rdb := b.Redis(t)
			run(t, s, func() { testenv.DeleteKeys(t, rdb, b.KeyPrefix+":*") })
		})
	})
	t.Run("restart without persistence", func(t *testing.T) {
		b := testenv.Real(t)
		srv := testenv.StartRedisServer(t)
		b.RedisURL = srv.URL()
		s := asyncService(t, b, newTestStore(t, b, nil), 1, 0, 0)
		run(t, s, func() { srv.Kill(); srv.Start() })
	})
}

func rebuildTrial(t *testing.T, s *Service, c rebuildCase, trial int, lose func()) {
	t.Helper()
	ctx := context.Background()
	const stockUnits, earlier = 9, 8
	it, err := s.CreateItem(ctx, stock.NewItem{Name: c.name, Stock: stockUnits, Strategy: c.strategy, Buckets: c.buckets})
	if err != nil {
		t.Fatal(err)
	}
	pre := users(fmt.Sprintf("t%d-pre", trial), earlier)
	var ids []string
	for _, u := range pre {
		o, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: u})
		if err != nil {
			t.Fatalf("order by %s: %v", u, err)
		}
		ids = append(ids, o.ID)
	}
	settle(t, s, it, ids)
	lose()

	buyers := append(pre, fmt.Sprintf("t%d-new", trial))
	errs := make([]error, len(buyers))
	orders := make([]*stock.Order, len(buyers))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, u := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			orders[i], _, errs[i] = s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: u})
		}()
	}
	close(start)
	wg.Wait()
	for i, u := range pre {
		if !errors.Is(errs[i], stock.ErrAlreadyPurchased) {
			t.Errorf("trial %d: earlier buyer %s: got %v, want already_purchased", trial, u, errs[i])
		}
	}
	if err := errs[earlier]; err != nil {
		t.Fatalf("trial %d: new buyer, with 1 of %d units left in the database: got %v, want the unit", trial, stockUnits, err)
	}
	settle(t, s, it, []string{orders[earlier].ID})
	r := reconcileOK(t, s, it.ID)
	if r.Sold != stockUnits {
		t.Errorf("trial %d: sold %d, want %d", trial, r.Sold, stockUnits)
	}
}

// Every path that rebuilds a lost gate (the first order, the admin's
// reconcile repair, a stock change, a cancellation's release) leaves a
// gate the reconcile dry run finds clean, so drift in a reconcile report
// always means a real problem. Before every strategy's rebuild restored the
// buyers, a lua item's report after any of them listed its buyers as
// missing from Redis.
func TestReconcileCleanAfterEveryRebuild(t *testing.T) {
	paths := []struct {
		name    string
		rebuild func(t *testing.T, s *Service, it *stock.Item, ids []string) []string // returns new order ids
	}{
		{"first order", func(t *testing.T, s *Service, it *stock.Item, _ []string) []string {
			o, _, err := s.PlaceOrder(context.Background(), stock.OrderRequest{ItemID: it.ID, UserID: "after-loss"})
			if err != nil {
				t.Fatalf("order after the loss: %v", err)
			}
			return []string{o.ID}
		}},
		{"admin repair", func(t *testing.T, s *Service, it *stock.Item, _ []string) []string {
			r, err := s.Reconcile(context.Background(), it.ID, true)
			if err != nil || !r.Repaired {
				t.Fatalf("reconcile repair: got %+v, %v; want the gate rebuilt", r, err)
			}
			return nil
		}},
		{"restock", func(t *testing.T, s *Service, it *stock.Item, _ []string) []string {
			if _, _, err := s.SetStock(context.Background(), it.ID, it.Stock+5); err != nil {
				t.Fatalf("restock: %v", err)
			}
			return nil
		}},
		{"cancel", func(t *testing.T, s *Service, it *stock.Item, ids []string) []string {
			if _, err := s.CancelOrder(context.Background(), ids[1], "u00001"); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			return nil
		}},
	}
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := asyncService(t, b, newTestStore(t, b, nil), 1, 0, 0)
		rdb := b.Redis(t)
		for _, c := range rebuildCases {
			if c.strategy == stock.StrategyLock {
				continue // keeps nothing in Redis to rebuild
			}
			for _, p := range paths {
				t.Run(c.name+"/"+p.name, func(t *testing.T) {
					it, err := s.CreateItem(ctx, stock.NewItem{Name: c.name, Stock: 10, Strategy: c.strategy, Buckets: c.buckets})
					if err != nil {
						t.Fatal(err)
					}
					var ids []string
					for _, u := range users("u", 6) {
						o, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: u})
						if err != nil {
							t.Fatal(err)
						}
						ids = append(ids, o.ID)
					}
					settle(t, s, it, ids)
					if _, err := s.CancelOrder(ctx, ids[0], "u00000"); err != nil {
						t.Fatal(err)
					}
					reconcileOK(t, s, it.ID)
					for _, bk := range gate.AllBuckets(it.ID, c.buckets) {
						testenv.DeleteKeys(t, rdb, strings.TrimSuffix(s.keys.Bucket(bk).Meta, ":meta")+"*")
					}
					if all, err := s.gate.ExistsAll(ctx, it.ID, c.buckets); err != nil || all {
						t.Fatalf("after the loss: gate present %v, %v; want it gone", all, err)
					}
					settle(t, s, it, p.rebuild(t, s, it, ids))
					if all, err := s.gate.ExistsAll(ctx, it.ID, c.buckets); err != nil || !all {
						t.Fatalf("after %s: gate present %v, %v; want it rebuilt", p.name, all, err)
					}
					r := reconcileOK(t, s, it.ID)
					if r.Buyers < 6 {
						t.Errorf("after %s: %d buyers in the gate, want every order's", p.name, r.Buyers)
					}
				})
			}
		}
	})
}

// handBackHook hands a reservation back, once, just before the first
// command that writes the buyers hash of its bucket (a DEL, a RENAME, a
// script), the moment a rebuild that read the hash and the void markers
// earlier could undo it (issue 20).
type handBackHook struct {
	armed  atomic.Bool
	fired  atomic.Bool
	buyers string
	run    func()
}

func (h *handBackHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *handBackHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.Load() && h.writes(cmd) && h.fired.CompareAndSwap(false, true) {
			h.run()
		}
		return next(ctx, cmd)
	}
}

func (h *handBackHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if h.armed.Load() && h.writes(cmd) && h.fired.CompareAndSwap(false, true) {
				h.run()
			}
		}
		return next(ctx, cmds)
	}
}

func (h *handBackHook) writes(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "del", "rename", "hset", "evalsha", "eval":
	default:
		return false
	}
	for _, a := range cmd.Args()[1:] {
		if s, ok := a.(string); ok && s == h.buyers {
			return true
		}
	}
	return false
}

// A rebuild of an item with several buckets keeps the reservations the
// surviving buckets hold for orders in flight; a hand-back of one that
// lands while the rebuild runs (the gate has no meta then, so the hand-back
// gives nothing back itself) must not be undone: the unit is free after the
// rebuild, and the user holds nothing. Before the rebuild's read and
// rewrite of a bucket were one script, a hand-back between them was undone,
// and unit and user stayed held until the orphan window or a reconcile.
func TestRebuildSeesHandBackDuringRebuild(t *testing.T) {
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		rdb := b.Redis(t)
		hook := &handBackHook{}
		rdb.AddHook(hook)
		s := newTestService(t, b, Config{}, rdb)
		plain := b.Redis(t)
		const k, units = 3, 6
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "handback", Stock: units, Strategy: stock.StrategyLua, Buckets: k})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "sold"}); err != nil {
			t.Fatal(err)
		}
		// A reservation whose write is in flight: no order in the database.
		user, order := "inflight", uuid.Must(uuid.NewV7()).String()
		home := gate.HomeBucket(it.ID, k, user)
		if _, err := s.gate.Reserve(ctx, home, user, order, time.Now(), nil); err != nil {
			t.Fatal(err)
		}
		// Its write failed; the hand-back reaches Redis mid-rebuild.
		other := gate.New(plain, s.keys, nil, nil)
		var handBackErr error
		hook.buyers = s.keys.Bucket(home).Buyers
		hook.run = func() { _, handBackErr = other.HandBack(ctx, home, user, order, "") }
		// Another bucket is lost: the whole item is rebuilt.
		lost := gate.Bucket{Item: it.ID, B: (home.B + 1) % k, K: k}
		if err := plain.Del(ctx, s.keys.Bucket(lost).Meta).Err(); err != nil {
			t.Fatal(err)
		}
		hook.armed.Store(true)
		if err := s.lua.buildGate(ctx, it.ID); err != nil {
			t.Fatal(err)
		}
		hook.armed.Store(false)
		if !hook.fired.Load() || handBackErr != nil {
			t.Fatalf("the hand-back did not run during the rebuild (fired %v, err %v)", hook.fired.Load(), handBackErr)
		}
		if got, err := plain.HGet(ctx, s.keys.Bucket(home).Buyers, user).Result(); !errors.Is(err, redis.Nil) {
			t.Errorf("after the rebuild the handed-back user holds %q (%v), want nothing", got, err)
		}
		v, err := s.gate.ReadBuckets(ctx, it.ID, k, false)
		if err != nil {
			t.Fatal(err)
		}
		if v.Taken != 1 || v.Free != units-1 {
			t.Errorf("after the rebuild: taken %d, free %d; want 1 and %d (the handed-back unit free)", v.Taken, v.Free, units-1)
		}
		reconcileOK(t, s, it.ID)
	})
}
