package rooms

import (
	"context"
	"errors"
	"fmt"
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
	for range 2 { // the second reads the rate the first set
		if err := g.tick(t); err != nil {
			t.Fatal(err)
		}
		g.advance(100 * time.Millisecond)
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

// Redteam #1: after Redis lost the room (or it was turned off and on), the
// cached status answered an old line's ticket string from the new line's
// counters: alice's string of ticket 1 read bob's place. The string is
// bound to the room's set-up (its epoch): an old line's string is never
// answered from the cache, and Redis, which gives its number to another
// user, makes it 404.
func TestOldLineTicketIsNotShownAnotherUsersPlace(t *testing.T) {
	b := testenv.Real(t)
	opens := time.Now().Add(time.Hour)
	g := newLoopRig(t, b, false, 10, 5, &opens, Config{})
	if err := g.tick(t); err != nil {
		t.Fatal(err)
	}
	alice := g.join(t, "alice")
	if st := g.status(t, alice); st.State != room.StateWaiting || st.Position != 1 {
		t.Fatalf("alice before the loss: %s position %d, want waiting 1", st.State, st.Position)
	}
	if err := g.e.room.Delete(context.Background()); err != nil { // Redis lost the room
		t.Fatal(err)
	}
	_ = g.tick(t) // finds no room
	if err := g.tick(t); err != nil {
		t.Fatalf("tick setting the room up again: %v", err)
	}
	bob := g.join(t, "bob")
	g.join(t, "carol")
	if bob.Number != alice.Number {
		t.Fatalf("bob has ticket %d, alice had %d: the test needs the new line to reuse her number", bob.Number, alice.Number)
	}
	if err := g.tick(t); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		got, err := g.s.Status(context.Background(), g.view(), alice.Ticket)
		if !errors.Is(err, stock.ErrNotFound) {
			t.Fatalf("alice's string of the lost line: %+v, %v; want not found (ticket %d is bob's now)", got, err, alice.Number)
		}
	}
	if st := g.status(t, bob); st.State != room.StateWaiting || st.Position != 1 {
		t.Errorf("bob: %s position %d, want waiting 1", st.State, st.Position)
	}
}

// Redteam #4: sold_out was told as final (poll_after_ms 0) while a unit
// could still come back (an unpaid order's cancel or expiry), and the room
// then resumed the same line for pages that had stopped polling. Now a
// waiter reads held, polling slowly, while an unpaid order of the item
// exists, and the final sold_out only once none does.
func TestSoldOutIsFinalOnlyWhenNoUnitCanComeBack(t *testing.T) {
	b := testenv.Real(t)
	g := newLoopRig(t, b, false, 10, 0, nil, Config{})
	db := b.DB(t)
	now := time.Now().UTC()
	order := map[string]any{"id": "00000000-0000-4000-8000-" + fmt.Sprintf("%012d", g.e.id), "item_id": g.e.id,
		"user_id": "payer", "status": stock.StatusCreated, "created_at": now, "updated_at": now}
	if err := db.Table("orders").Create(order).Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec("DELETE FROM orders WHERE item_id = ?", g.e.id) })
	w := g.join(t, "waiter")
	for range 2 {
		if err := g.tick(t); err != nil {
			t.Fatal(err)
		}
		g.advance(2 * time.Second)
	}
	st := g.status(t, w)
	if st.State != room.StateHeld || st.PollAfterMS <= 0 {
		t.Fatalf("sold out with an unpaid order: %s poll_after_ms %d, want held and polling", st.State, st.PollAfterMS)
	}
	if err := db.Exec("UPDATE orders SET status = ? WHERE item_id = ?", stock.StatusPaid, g.e.id).Error; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := g.tick(t); err != nil {
			t.Fatal(err)
		}
		g.advance(2 * time.Second)
	}
	if err := g.tick(t); err != nil {
		t.Fatal(err)
	}
	if st := g.status(t, w); st.State != room.StateSoldOut || st.PollAfterMS != 0 {
		t.Errorf("sold out, every order paid: %s poll_after_ms %d, want a final sold_out", st.State, st.PollAfterMS)
	}
	if d := g.s.pace(g.e); d <= g.s.cfg.Tick {
		t.Errorf("a room sold out for good ticks every %v, want slower than %v", d, g.s.cfg.Tick)
	}
}

// ETA ignored the pass cap: a waiter behind the live passes of the last
// units was told "about 1 s" although nobody is admitted before a pass
// ahead is spent or expires. Past the free slots, the ETA is not known.
func TestETAKnowsThePassCap(t *testing.T) {
	b := testenv.Real(t)
	g := newLoopRig(t, b, false, 100, 1, nil, Config{})
	first, second := g.join(t, "first"), g.join(t, "second")
	for range 2 { // the second reads the rate the first set
		if err := g.tick(t); err != nil {
			t.Fatal(err)
		}
		g.advance(100 * time.Millisecond)
	}
	if st := g.status(t, first); st.State != room.StateAdmitted {
		t.Fatalf("first: %s, want admitted", st.State)
	}
	st := g.status(t, second)
	if st.State != room.StateWaiting || st.Position != 1 || st.ETASeconds != -1 {
		t.Errorf("second, behind the only unit's live pass: %s position %d eta %d; want waiting 1 with eta -1 (not known)",
			st.State, st.Position, st.ETASeconds)
	}
}

// Redteam #7: after Redis lost an open room, the rebuilt room's count of
// live passes was empty while the passes issued before the loss still
// verified: it issued a second set for the same units. A rebuilt room of a
// line that has opened admits nobody until the old passes have expired.
func TestRebuiltRoomWaitsForTheOldPasses(t *testing.T) {
	b := testenv.Real(t)
	g := newLoopRig(t, b, false, 100, 1, nil, Config{})
	if err := g.tick(t); err != nil { // set up while the row is new
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).UTC() // and later, the row has aged
	if err := b.DB(t).Model(&row{}).Where("item_id = ?", g.e.id).Update("created_at", old).Error; err != nil {
		t.Fatal(err)
	}
	if err := g.s.reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := g.join(t, "first")
	if err := g.tick(t); err != nil {
		t.Fatal(err)
	}
	if st := g.status(t, first); st.State != room.StateAdmitted {
		t.Fatalf("first: %s, want admitted", st.State)
	}
	if err := g.e.room.Delete(context.Background()); err != nil { // Redis lost the room
		t.Fatal(err)
	}
	_ = g.tick(t)
	second := g.join(t, "second") // sets the room up again
	passTTL := time.Duration(g.e.set.Load().PassTTLSeconds) * time.Second
	for range 3 {
		g.advance(passTTL / 4)
		if err := g.tick(t); err != nil {
			t.Fatal(err)
		}
		if st := g.status(t, second); st.State != room.StateWaiting {
			t.Fatalf("second, within a pass TTL of the rebuild (first's pass still verifies): %s, want waiting", st.State)
		}
	}
	g.advance(passTTL/4 + time.Second)
	if err := g.tick(t); err != nil {
		t.Fatal(err)
	}
	if st := g.status(t, second); st.State != room.StateAdmitted {
		t.Errorf("second, once the old passes expired: %s, want admitted", st.State)
	}
}

// Redteam #4, the dead tickets: a returned unit was offered to every ticket
// ahead in turn, one pass TTL each, though their pages had stopped polling
// long ago. 50 dead tickets ahead of one live one: the first admission
// round after the unit comes back admits the live one.
func TestReturnedUnitReachesALiveWaiterFirst(t *testing.T) {
	b := testenv.Real(t)
	g := newLoopRig(t, b, false, 1000, 1, nil, Config{})
	buyer := g.join(t, "buyer")
	if err := g.tick(t); err != nil {
		t.Fatal(err)
	}
	if st := g.status(t, buyer); st.State != room.StateAdmitted {
		t.Fatalf("buyer: %s, want admitted (the only unit's pass)", st.State)
	}
	for i := range 50 {
		g.join(t, fmt.Sprintf("dead-%02d", i)) // joined, then never polled again
	}
	if err := g.tick(t); err != nil {
		t.Fatal(err)
	}
	// Long after: the buyer's pass expired unused (its unit is free again),
	// and a live buyer joins and polls.
	g.advance(3 * room.SeenWindow)
	live := g.join(t, "live")
	g.status(t, live)
	if err := g.tick(t); err != nil { // the first admission round since
		t.Fatal(err)
	}
	if st := g.status(t, live); st.State != room.StateAdmitted {
		t.Fatalf("the live waiter after the first round: %s, want admitted (50 dead tickets ahead)", st.State)
	}
	dead, err := g.s.Status(context.Background(), g.view(), g.join(t, "dead-00").Ticket)
	if err != nil || dead.State != room.StateExpired || dead.PollAfterMS != 0 {
		t.Errorf("a passed-over dead ticket: %+v, %v; want a final expired", dead, err)
	}
}
