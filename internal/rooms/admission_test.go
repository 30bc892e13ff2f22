package rooms

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// The order path's one door, Admit then Confirm, Refused or Done, on an
// item whose room was made through another instance (not known here
// yet), and then known: what passes, what is refused, and that a refusal
// for want of a pass teaches this instance the room.
func TestAdmissionThroughTheDoor(t *testing.T) {
	b := testenv.Real(t)
	db := b.DB(t)
	ctx := context.Background()
	s := startRooms(t, b, Config{})
	id := storeRoom(t, db) // after s loaded the rooms, as through another instance
	buyer := stock.OrderRequest{ItemID: id, UserID: "ann"}
	keyed := stock.OrderRequest{ItemID: id, UserID: "ann", IdempotencyKey: "k-1"}

	// Not known here: no pass needed by this instance (the sale checks).
	a, err := s.Admit(buyer, "")
	if err != nil || a.Passed() || a.Replay() {
		t.Fatalf("unknown room, no pass: %+v %v; want let through to the sale, not passed", a, err)
	}
	// A forged pass for an unknown room is not an answer: the sale decides.
	if a, err = s.Admit(buyer, "forged"); err != nil || a.Passed() {
		t.Fatalf("unknown room, forged pass: %+v %v; want let through, not passed", a, err)
	}
	if got := a.Refused(ctx, stock.ErrSoldOut); !errors.Is(got, stock.ErrSoldOut) {
		t.Errorf("another refusal: %v, want it as it is", got)
	}
	if s.Roomed(id) {
		t.Fatal("a refusal that is not for want of a pass taught the room")
	}
	// The sale refused for want of a pass: the carried pass's own refusal
	// is the answer, and the room is known here from now on.
	if got := a.Refused(ctx, stock.ErrPassRequired); !errors.Is(got, room.ErrPassForged) {
		t.Errorf("refused for want of a pass, carrying a forged one: %v, want the pass's refusal", got)
	}
	if !s.Roomed(id) {
		t.Fatal("a refusal for want of a pass did not teach this instance the room")
	}

	// Known: no pass, a forged one, another user's are refused here.
	if _, err := s.Admit(buyer, ""); !errors.Is(err, room.ErrPassMissing) {
		t.Errorf("known room, no pass: %v, want pass missing", err)
	}
	if _, err := s.Admit(buyer, "forged"); err == nil {
		t.Error("known room, forged pass: admitted")
	}
	line, err := room.LineOf(s.entry(id).set.Load().Commitment)
	if err != nil {
		t.Fatal(err)
	}
	pass, err := s.pass.Issue(room.Pass{ItemID: id, UserID: "ann", Ticket: 7, Expiry: time.Now().Add(time.Minute), Line: line})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(stock.OrderRequest{ItemID: id, UserID: "ben"}, pass); !errors.Is(err, room.ErrPassWrongUser) {
		t.Errorf("ann's pass on ben's order: %v, want wrong user", err)
	}
	if a, err = s.Admit(buyer, pass); err != nil || !a.Passed() || a.Confirm(ctx) != nil {
		t.Fatalf("ann's own pass: %+v %v; want passed", a, err)
	}
	a.Done(ctx, false) // marks ticket 7 used: best effort, nothing to fail on

	// A keyed order without a live pass is a retry's only if its order is
	// there: Confirm asks, and without one the pass's refusal stands.
	a, err = s.Admit(keyed, "")
	if err != nil || !a.Replay() {
		t.Fatalf("keyed order without a pass: %+v %v; want a replay to confirm", a, err)
	}
	if err := a.Confirm(ctx); !errors.Is(err, room.ErrPassMissing) || a.Passed() {
		t.Errorf("keyed order with no order under its key: %v (passed %v), want pass missing", err, a.Passed())
	}

	// No rooms at all: nothing passes, nothing is learnt.
	none := NoRooms
	if none.Replay() || none.Passed() || none.Confirm(ctx) != nil || !errors.Is(none.Refused(ctx, stock.ErrPassRequired), stock.ErrPassRequired) {
		t.Error("NoRooms did something")
	}
	none.Done(ctx, false)
}

// startRooms starts a Service on b without a shop or orders (noShop, nil),
// with cfg's zero fields set for a test: a zero key, b's key prefix, a 10
// ms tick, and an hour between reloads (the test says when to learn). It
// is closed when the test ends.
func startRooms(t *testing.T, b testenv.Backend, cfg Config) *Service {
	t.Helper()
	if cfg.Key == nil {
		cfg.Key = make([]byte, 32)
	}
	cfg.KeyPrefix = b.KeyPrefix
	if cfg.Tick == 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	if cfg.Reload == 0 {
		cfg.Reload = time.Hour
	}
	s, err := New(context.Background(), b.DB(t), b.Universal(t), noShop{}, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}
