package rooms

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// viewShop serves one item's view, as the shop would, and can fail the
// fresh read (a database outage).
type viewShop struct {
	noShop
	mu   sync.Mutex
	v    stock.ItemView
	down bool
}

func (f *viewShop) set(fn func(v *stock.ItemView, down *bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.v, &f.down)
}

func (f *viewShop) ItemView(context.Context, int64) (*stock.ItemView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.v
	return &v, nil
}

func (f *viewShop) FreshItemView(ctx context.Context, id int64) (*stock.ItemView, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return nil, stock.ErrUnavailable
	}
	return f.ItemView(ctx, id)
}

// loopRig is one instance's room of one item whose loop the test turns by
// hand (tick), on a clock the test moves.
type loopRig struct {
	s     *Service
	e     *entry
	shop  *viewShop
	clock atomic.Int64
}

func (g *loopRig) now() time.Time          { return time.Unix(0, g.clock.Load()) }
func (g *loopRig) advance(d time.Duration) { g.clock.Add(int64(d)) }

func (g *loopRig) tick(t *testing.T) error {
	t.Helper()
	return g.s.tick(context.Background(), g.e)
}

// newLoopRig stores a room (lottery as given, admit rate per second) for
// a new item with stock remaining, opening at opens (nil: open).
func newLoopRig(t *testing.T, b testenv.Backend, lottery bool, rate int, remaining int64, opens *time.Time, cfg Config) *loopRig {
	t.Helper()
	db := b.DB(t)
	id := storeRoom(t, db)
	if err := db.Model(&row{}).Where("item_id = ?", id).Updates(map[string]any{"lottery": lottery, "admit_per_second": rate}).Error; err != nil {
		t.Fatal(err)
	}
	g := &loopRig{shop: &viewShop{v: stock.ItemView{ID: id, Remaining: remaining, StartsAt: opens}}}
	g.clock.Store(time.Now().UnixNano())
	cfg.Key, cfg.KeyPrefix, cfg.Reload, cfg.Now = make([]byte, 32), b.KeyPrefix, time.Hour, g.now
	s, err := New(context.Background(), db, b.Universal(t), g.shop, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	g.s, g.e = s, s.entry(id)
	if g.e == nil {
		t.Fatalf("room %d not loaded", id)
	}
	t.Cleanup(func() { _ = g.e.room.Delete(context.Background()) })
	return g
}

func (g *loopRig) join(t *testing.T, user string) *Ticket {
	t.Helper()
	tk, err := g.s.Join(context.Background(), g.view(), user)
	if err != nil {
		t.Fatalf("join %s: %v", user, err)
	}
	return tk
}

func (g *loopRig) view() *stock.ItemView {
	v, _ := g.shop.ItemView(context.Background(), 0)
	return v
}

func (g *loopRig) status(t *testing.T, tk *Ticket) *Ticket {
	t.Helper()
	got, err := g.s.Status(context.Background(), g.view(), tk.Ticket)
	if err != nil {
		t.Fatalf("status of ticket %d: %v", tk.Number, err)
	}
	return got
}

// Redteam #5: with a pass factor below 1, floor(factor × remaining) is 0
// once remaining < 1/factor, and the last units were never offered. Every
// accepted factor must admit someone while a unit remains.
func TestPassFactorBelowOneSellsTheLastUnit(t *testing.T) {
	for _, f := range []float64{0.1, 0.5, 0.99} {
		b := testenv.Real(t)
		g := newLoopRig(t, b, false, 100, 1, nil, Config{PassFactor: f})
		w := g.join(t, "last-buyer")
		for range 3 {
			if err := g.tick(t); err != nil {
				t.Fatalf("factor %v: tick: %v", f, err)
			}
			g.advance(time.Second)
		}
		if st := g.status(t, w); st.State != room.StateAdmitted {
			t.Errorf("factor %v, 1 unit left: the only waiter reads %s, want admitted", f, st.State)
		}
	}
}
