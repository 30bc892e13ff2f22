package shop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// Every command the service sends to a Redis Cluster, on every strategy
// and every path (orders with odd idempotency keys, replays, sold out,
// cancel and pay, a stock change, the gate lost and rebuilt, reconcile,
// the lua-async writers of two items, stats and dead letters), touches
// keys of one slot: testenv.SlotCheck sees each script's declared keys,
// each multi-key command and each MULTI/EXEC before go-redis routes it,
// and names the keys of any that spans slots; Redis refuses those too
// (CROSSSLOT), which fails the path. (On a single Redis the writers read
// every stream in one XREADGROUP, by design: nothing there has slots.)
func TestEveryCommandTouchesOneSlot(t *testing.T) {
	t.Parallel()
	b := testenv.Cluster(t)
	check := &testenv.SlotCheck{}
	rdb := b.Universal(t)
	rdb.AddHook(check)
	s := newTestService(t, b, Config{Queue: queue.Config{Writers: 1}}, rdb)
	// lua-async twice: the writers then read two items' streams.
	for _, strategy := range append(stock.Strategies, stock.StrategyLuaAsync) {
		t.Run(string(strategy), func(t *testing.T) { everyPath(t, b, s, strategy, 1) })
	}
	// A lua item over 3 gate buckets: each bucket has a slot of its own,
	// and each command still touches one.
	t.Run("lua/buckets=3", func(t *testing.T) { everyPath(t, b, s, stock.StrategyLua, 3) })
	if v := check.Violations(); len(v) > 0 {
		t.Errorf("%d commands whose keys span slots (CROSSSLOT on a Redis Cluster):\n%s", len(v), strings.Join(dedupe(v), "\n"))
	}
	if n := check.Scripts(); n < 30 {
		t.Errorf("checked %d script calls, want at least 30: is the hook seeing them?", n)
	}
}

// everyPath drives one item of strategy over buckets gate buckets through
// the service's paths.
func everyPath(t *testing.T, b testenv.Backend, s *Service, strategy stock.StrategyName, buckets int) {
	ctx := context.Background()
	it, err := s.CreateItem(ctx, stock.NewItem{Name: "slots", Stock: 3, Strategy: strategy, Buckets: buckets})
	if err != nil {
		t.Fatal(err)
	}
	var placed []string // since the last awaitWritten
	order := func(user, key string, want ...error) *stock.Order {
		t.Helper()
		o, _, err := s.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: user, IdempotencyKey: key})
		for _, w := range want {
			if errors.Is(err, w) {
				return nil
			}
		}
		if err != nil {
			t.Fatalf("order by %s with key %q: %v", user, key, err)
		}
		placed = append(placed, o.ID)
		return o
	}
	first := order("u1", "k{1}")
	order("u1", "k{1}") // a replay
	order("u2", "}{")
	third := order("u3", "")
	order("u4", "{item:1}", stock.ErrSoldOut)
	awaitWritten(t, s, placed, 15*time.Second)
	placed = nil
	if _, err := s.PayOrder(ctx, first.ID, "u1"); err != nil {
		t.Fatalf("pay: %v", err)
	}
	if _, err := s.CancelOrder(ctx, third.ID, "u3"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, _, err := s.SetStock(ctx, it.ID, 5); err != nil {
		t.Fatalf("set stock: %v", err)
	}

	// Redis loses the item's keys (not through the checked client: the
	// loss is the test's, not the service's): the next order rebuilds.
	testenv.DeleteKeys(t, b.Universal(t), fmt.Sprintf("%s:{item:%d}*", b.KeyPrefix, it.ID))
	for _, bk := range gate.AllBuckets(it.ID, buckets) {
		testenv.DeleteKeys(t, b.Universal(t), strings.TrimSuffix(s.keys.Bucket(bk).Meta, ":meta")+":*")
	}
	order("u5", "k5")
	order("u2", "}{") // a replay after the loss
	order("u6", "")
	awaitWritten(t, s, placed, 15*time.Second)

	if _, err := s.Reconcile(ctx, it.ID, true); err != nil {
		t.Errorf("reconcile: %v", err)
	}
	if _, err := s.ItemView(ctx, it.ID); err != nil {
		t.Errorf("item view: %v", err)
	}
	if strategy == stock.StrategyLuaAsync {
		if _, err := s.AsyncStats(ctx, it.ID); err != nil {
			t.Errorf("async stats: %v", err)
		}
		if _, err := s.DeadLetters(ctx, it.ID, 10); err != nil {
			t.Errorf("dead letters: %v", err)
		}
		if _, err := s.RequeueDeadLetters(ctx, it.ID); err != nil {
			t.Errorf("requeue dead letters: %v", err)
		}
		if _, err := s.Backlog(ctx); err != nil {
			t.Errorf("backlog: %v", err)
		}
	}
	if err := s.Ready(ctx); err != nil {
		t.Errorf("ready: %v", err)
	}
}

// dedupe drops repeated lines, keeping the first of each.
func dedupe(lines []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}
