package rooms

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
)

// Redteam #4, the pages closed lately: they still count as seen in the long
// windows, so they are not passed over, and each had a pass for a TTL. Now
// those not seen in the short windows are deferred: the live waiter behind
// them has the returned unit at the first round, and a deferred ticket's
// page reads waiting at position 1 (polling every second), from Redis,
// not from the cache's stale place.
func TestClosedPagesAheadAreDeferred(t *testing.T) {
	b := testenv.Real(t)
	g := newLoopRig(t, b, false, 1000, 0, nil, Config{}) // sold out
	var gone []*Ticket
	for i := range 5 {
		gone = append(gone, g.join(t, fmt.Sprintf("gone-%d", i)))
	}
	live := g.join(t, "live")
	// Sold out: the pages poll for 20 s (sold out, every order paid: the
	// test's shop has none), the five closing at 10 s.
	for s := 0; s < 20; s++ {
		g.advance(time.Second)
		if err := g.tick(t); err != nil {
			t.Fatal(err)
		}
		if s < 10 {
			for _, tk := range gone {
				g.status(t, tk)
			}
		}
		if st := g.status(t, live); st.State == room.StateAdmitted || st.State == room.StateWaiting {
			t.Fatalf("live at %d s, sold out: %s", s, st.State)
		}
	}
	if err := g.tick(t); err != nil { // writes the last polls' seen marks
		t.Fatal(err)
	}
	// A unit comes back (a cancel): the first round admits the live waiter.
	g.shop.set(func(v *stock.ItemView, _ *bool) { v.Remaining = 1 })
	g.advance(100 * time.Millisecond)
	if err := g.tick(t); err != nil {
		t.Fatal(err)
	}
	if st := g.status(t, live); st.State != room.StateAdmitted {
		t.Fatalf("live waiter at the first round after the unit came back: %s, want admitted (5 closed pages ahead)", st.State)
	}
	for _, tk := range gone {
		if st := g.status(t, tk); st.State != room.StateWaiting || st.Position != 1 || st.PollAfterMS != 1000 {
			t.Errorf("closed page %d polls again: %s at position %d, poll_after_ms %d; want waiting at 1, 1000",
				tk.Number, st.State, st.Position, st.PollAfterMS)
		}
	}
	// The loop's count of waiting tickets follows the head, deferred or not.
	rs, err := g.e.room.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st := g.e.stats.Load(); st.Waiting != rs.Waiting {
		t.Errorf("loop's waiting %d, Redis's %d", st.Waiting, rs.Waiting)
	}
}
