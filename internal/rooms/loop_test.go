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

// Redteam #3: the loop read the stock before it opened the room, so a
// database outage at starts_at kept the pre-queue open and later joins
// were drawn with the early ones. The opening needs no stock figure: it
// happens at starts_at from the item's opening the loop already knows.
func TestOpeningDoesNotWaitForTheDatabase(t *testing.T) {
	b := testenv.Real(t)
	opens := time.Now().Add(time.Second)
	g := newLoopRig(t, b, true, 10, 5, &opens, Config{})
	g.join(t, "early")
	if err := g.tick(t); err != nil {
		t.Fatalf("tick before the opening: %v", err)
	}
	g.shop.set(func(_ *stock.ItemView, down *bool) { *down = true })
	g.advance(2 * time.Second)
	_ = g.tick(t) // the stock read fails; the opening must not
	st, err := g.e.room.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != "open" || st.PreQueue != 1 {
		t.Fatalf("after starts_at with the database down: phase %q, pre-queue %d; want open with 1 ticket", st.Phase, st.PreQueue)
	}
	late := g.join(t, "late")
	if late.Number <= st.PreQueue {
		t.Errorf("a join after starts_at is ticket %d, in the pre-queue of %d: it must queue after it", late.Number, st.PreQueue)
	}
}

// Redteam #6: after ends_at waiters read "waiting, eta 1 s" for ever and
// an admitted ticket kept a pass that can only get sale_ended. Now every
// ticket reads a final ended, the public phase says so, and the loop slows
// to its idle pace.
func TestAfterTheEndEveryTicketReadsEnded(t *testing.T) {
	b := testenv.Real(t)
	g := newLoopRig(t, b, false, 1, 5, nil, Config{})
	ends := g.now().Add(5 * time.Second)
	g.shop.set(func(v *stock.ItemView, _ *bool) { v.EndsAt = &ends })
	first, second := g.join(t, "first"), g.join(t, "second")
	if err := g.tick(t); err != nil {
		t.Fatal(err)
	}
	if st := g.status(t, first); st.State != room.StateAdmitted {
		t.Fatalf("before the end the first ticket reads %s, want admitted", st.State)
	}
	g.advance(6 * time.Second)
	if err := g.tick(t); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*Ticket{first, second} {
		st := g.status(t, tk)
		if st.State != room.StateEnded || st.PollAfterMS != 0 || st.Pass != "" || st.ETASeconds != -1 {
			t.Errorf("ticket %d after the end: state %s, poll_after_ms %d, pass %q, eta %d; want ended, 0, none, -1",
				tk.Number, st.State, st.PollAfterMS, st.Pass, st.ETASeconds)
		}
	}
	if p := g.s.Public(g.e.id, nil); p == nil || p.Phase != "ended" {
		t.Errorf("public phase after the end: %+v, want ended", p)
	}
	if d := g.s.pace(g.e); d <= g.s.cfg.Tick {
		t.Errorf("an ended room's loop ticks every %v, want slower than %v", d, g.s.cfg.Tick)
	}
}
