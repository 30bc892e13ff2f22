package shop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// What a cancellation's release leaves for later: the sweeper finishing a
// hand-back Redis missed, and a gate rebuilt from the database counting
// the cancelled orders. (The expiry racing payment is in lifecycle_test.go.)

// TestSweeperFinishesAFailedRelease: a cancellation commits, but Redis is cut
// before its unit reaches the gate. The cancel still succeeds, the order
// records that the return is pending, and the sweeper finishes it once Redis
// is back (also when the gate is gone by then): the unit sells once more,
// and only once.
func TestSweeperFinishesAFailedRelease(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		for _, lost := range []bool{false, true} {
			t.Run(fmt.Sprintf("gate lost %v", lost), func(t *testing.T) {
				ctx := context.Background()
				rdb, proxy, direct := proxied(t, b)
				obs := &countingObserver{}
				s := newTestService(t, b, Config{Lifecycle: obs}, rdb)
				it, err := s.CreateItem(ctx, stock.NewItem{Name: "cut", Stock: 2, Strategy: stock.StrategyLua})
				if err != nil {
					t.Fatal(err)
				}
				orders := placeAll(t, []*Service{s}, it.ID, []string{"u1", "u2"})

				proxy.Cut()
				got, err := s.CancelOrder(ctx, orders[0].ID, "u1")
				if err != nil || got.Status != stock.StatusCancelled {
					t.Fatalf("cancel with Redis cut: got %v %v, want the order cancelled", got, err)
				}
				l := readLedger(t, s, direct, it.ID)
				if l.sold != 1 || l.unreturned != 1 || l.taken != 2 {
					t.Fatalf("after the cut cancel: sold %d, unreturned %d, gate taken %d; want 1, 1 and 2", l.sold, l.unreturned, l.taken)
				}
				if n, err := s.ReturnStock(ctx, time.Now()); n != 0 || !errors.Is(err, stock.ErrUnavailable) {
					t.Errorf("sweep while Redis is cut: got %d, %v; want 0 and ErrUnavailable", n, err)
				}
				proxy.Restore()
				if lost {
					if err := direct.Del(ctx, s.keys.Meta(it.ID), s.keys.Released(it.ID)).Err(); err != nil {
						t.Fatal(err)
					}
				}
				if n, err := s.ReturnStock(ctx, time.Now()); n != 1 || err != nil {
					t.Fatalf("sweep after Redis is back: got %d, %v; want 1 return", n, err)
				}
				if n, err := s.ReturnStock(ctx, time.Now()); n != 0 || err != nil {
					t.Errorf("second sweep: got %d, %v; want nothing left to do", n, err)
				}
				l = readLedger(t, s, direct, it.ID)
				if l.unreturned != 0 || l.taken != 1 || l.released != 1 {
					t.Errorf("after the sweep: unreturned %d, gate taken %d, released %d; want 0, 1, 1", l.unreturned, l.taken, l.released)
				}
				if _, returned := obs.counts(); returned[true] != 1 || returned[false] != 0 {
					t.Errorf("stock returns observed: got %v, want one, by the sweeper", returned)
				}
				if got := sellOut(t, []*Service{s}, it.ID, []string{"u3", "u4", "u5"}); got != 1 {
					t.Errorf("buyers after the return: got %d sales, want 1", got)
				}
				if l := readLedger(t, s, direct, it.ID); l.sold != 2 || l.taken != 2 {
					t.Errorf("after the resale: sold %d, gate taken %d; want 2 and 2", l.sold, l.taken)
				}
			})
		}
	})
}

// TestGateSeedCountsCancelledOrders: a gate rebuilt from the database counts
// the orders cancelled before its snapshot as released, so releasing them
// again changes nothing, and one cancelled while the gate is missing is
// counted once.
func TestGateSeedCountsCancelledOrders(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		ctx := context.Background()
		s := newTestService(t, b, Config{}, nil)
		rdb := b.Redis(t)
		it, err := s.CreateItem(ctx, stock.NewItem{Name: "rebuilt", Stock: 3, Strategy: stock.StrategyLua})
		if err != nil {
			t.Fatal(err)
		}
		orders := placeAll(t, []*Service{s}, it.ID, []string{"u1", "u2", "u3"})
		if _, err := s.CancelOrder(ctx, orders[0].ID, "u1"); err != nil {
			t.Fatal(err)
		}
		lose := func() {
			if err := rdb.Del(ctx, s.keys.Meta(it.ID), s.keys.Released(it.ID)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		lose()
		// Cancelled while the gate is missing: the release seeds it.
		if _, err := s.CancelOrder(ctx, orders[1].ID, "u2"); err != nil {
			t.Fatal(err)
		}
		if l := readLedger(t, s, rdb, it.ID); l.sold != 1 || l.taken != 1 || l.released != 2 {
			t.Errorf("after a cancel that rebuilt the gate: sold %d, taken %d, released %d; want 1, 1, 2", l.sold, l.taken, l.released)
		}
		lose()
		if err := s.lua.buildGate(ctx, it.ID); err != nil {
			t.Fatal(err)
		}
		for _, o := range orders[:2] {
			if back, err := s.release(ctx, it.ID, o.ID, s.lua.buildGate); back || err != nil {
				t.Errorf("release of %s after a rebuild: got %v, %v; want a no-op", o.ID, back, err)
			}
		}
		if l := readLedger(t, s, rdb, it.ID); l.taken != 1 {
			t.Errorf("after releasing counted orders again: taken %d, want 1", l.taken)
		}
		if got := sellOut(t, []*Service{s}, it.ID, users("late", 4)); got != 2 {
			t.Errorf("buyers after the rebuild: got %d sales, want 2", got)
		}
		if l := readLedger(t, s, rdb, it.ID); l.sold != 3 || l.taken != 3 {
			t.Errorf("after the resale: sold %d, taken %d; want 3 and 3", l.sold, l.taken)
		}
	})
}
