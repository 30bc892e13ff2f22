package shop

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// TestItemViewBoundAcrossInstances: B serves its cached public view while
// A sells and cancels; B's view is at most ViewMaxAge behind (its clock is
// moved here), then shows exactly what the gate has left.
func TestItemViewBoundAcrossInstances(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, name := range stock.Strategies {
			t.Run(string(name), func(t *testing.T) {
				ctx := context.Background()
				a := newTestService(t, b, Config{Queue: queue.Config{Writers: 1}}, nil)
				bs := newTestService(t, b, Config{Queue: queue.Config{Writers: 1}}, nil)
				var now atomic.Int64
				now.Store(time.Now().UnixNano())
				bs.views.clock = func() time.Time { return time.Unix(0, now.Load()) }
				advance := func(d time.Duration) { now.Add(int64(d)) }
				it, err := a.CreateItem(ctx, stock.NewItem{Name: "view", Stock: 3, Strategy: name})
				if err != nil {
					t.Fatal(err)
				}
				remaining := func() int64 {
					t.Helper()
					v, err := bs.ItemView(ctx, it.ID)
					if err != nil {
						t.Fatal(err)
					}
					return v.Remaining
				}
				if got := remaining(); got != 3 {
					t.Fatalf("B before the sale: remaining %d, want 3", got)
				}
				o, _, err := a.PlaceOrder(ctx, stock.OrderRequest{ItemID: it.ID, UserID: "alice"})
				if err != nil {
					t.Fatal(err)
				}
				if name == stock.StrategyLuaAsync {
					awaitWritten(t, a, []string{o.ID}, 30*time.Second)
				}
				advance(ViewMaxAge - time.Millisecond)
				if got := remaining(); got != 3 {
					t.Errorf("B within ViewMaxAge of its read: remaining %d, want the cached 3", got)
				}
				advance(time.Millisecond)
				if got := remaining(); got != 2 {
					t.Errorf("B ViewMaxAge after its read, A sold one: remaining %d, want 2", got)
				}
				if _, err := a.CancelOrder(ctx, o.ID, "alice"); err != nil {
					t.Fatal(err)
				}
				if got := remaining(); got != 2 {
					t.Errorf("B right after A's cancel: remaining %d, want the cached 2", got)
				}
				advance(ViewMaxAge)
				if got := remaining(); got != 3 {
					t.Errorf("B ViewMaxAge later: remaining %d, want 3 (the unit is back)", got)
				}
			})
		}
	})
}
