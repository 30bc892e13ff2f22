package room_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/room"
)

// deferRig is a room sold out to tickets 1 and 2 (both bought) with more
// tickets waiting behind them, on the injected clock: b is the start of a
// long seen window, so the windows the test crosses are plain offsets.
type deferRig struct {
	r *room.Room
	b time.Time
}

func (g deferRig) at(d time.Duration) time.Time { return g.b.Add(d) }

// poll is what a page's poll does: the service marks the ticket seen
// (room.MarkSeen, batched a tick) and reads its status.
func (g deferRig) poll(t *testing.T, now time.Time, tickets ...int64) map[int64]room.Status {
	t.Helper()
	if err := g.r.MarkSeen(context.Background(), now, tickets); err != nil {
		t.Fatalf("MarkSeen: %v", err)
	}
	out := map[int64]room.Status{}
	for _, tk := range tickets {
		out[tk] = status(t, g.r, tk, now)
	}
	return out
}

func newDeferRig(t *testing.T, e env, waiters int) deferRig {
	t.Helper()
	ctx := context.Background()
	g := deferRig{r: e.room(t, nil), b: t0.Add(room.SeenWindow).Truncate(room.SeenWindow)}
	seed := room.NewSeed()
	setUp(t, g.r, seed, 5*time.Second)
	if err := g.r.Open(ctx, seed); err != nil {
		t.Fatal(err)
	}
	tickets := joinUsers(t, g.r, 1, 2+waiters, g.b)
	g.poll(t, g.b, tickets...)
	// Two units: tickets 1 and 2 buy them, and the room closes.
	wantTickets(t, "the sale's admission", admit(t, g.r, g.at(time.Second), 1_000_000, 2).Tickets, seq(1, 2))
	for _, tk := range []int64{1, 2} {
		if s := status(t, g.r, tk, g.at(time.Second)); s.State != room.StateAdmitted {
			t.Fatalf("ticket %d: %s, want admitted", tk, s.State)
		}
		if err := g.r.Consume(ctx, tk, g.at(time.Second)); err != nil {
			t.Fatalf("Consume(%d): %v", tk, err)
		}
	}
	if err := g.r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return g
}

// Redteam #4: after a sell-out a unit returned by a cancel went to the
// tickets ahead whose pages were gone, one pass TTL each (30.6 s with a 5 s
// pass). Now those seen lately but not very lately are deferred, and a
// pass nobody reads lapses after the claim window: a live waiter behind
// them has the unit within a claim window or two.
func TestReturnedUnitReachesALiveWaiterWithinClaimWindows(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		g := newDeferRig(t, e, 7) // tickets 3..9 wait
		live := int64(8)
		// Every page polls every second (sold out, a unit may come back)
		// until 56 s; then only 3 (until 61 s), 8 and 9 go on.
		for s := 2 * time.Second; s <= 61*time.Second; s += time.Second {
			tickets := []int64{3, 8, 9}
			if s <= 56*time.Second {
				tickets = append(tickets, 4, 5, 6, 7)
			}
			for tk, st := range g.poll(t, g.at(s), tickets...) {
				if st.State != room.StateSoldOut {
					t.Fatalf("ticket %d at %v: %s, want sold_out", tk, s, st.State)
				}
			}
		}

		// 62 s: ticket 1's order is cancelled, its unit is back.
		cancel := g.at(62 * time.Second)
		if err := g.r.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		var deferred, unclaimed int64
		var admittedAt time.Time
		for now := cancel; admittedAt.IsZero() && now.Before(cancel.Add(4*room.DefaultClaimWindow)); now = now.Add(500 * time.Millisecond) {
			if now.Sub(cancel)%time.Second == 0 {
				g.poll(t, now, live, 9)
			}
			a := admit(t, g.r, now, 1_000_000, 1)
			deferred += a.Deferred
			unclaimed += a.Unclaimed
			for _, tk := range a.Tickets {
				if tk == live {
					admittedAt = now
				} else if tk != 3 {
					t.Fatalf("ticket %d admitted at %v after the cancel, want 3 (seen a second before) then %d", tk, now.Sub(cancel), live)
				}
			}
		}
		if admittedAt.IsZero() {
			t.Fatalf("live ticket %d not admitted within %v of the cancel (deferred %d, unclaimed %d)",
				live, 4*room.DefaultClaimWindow, deferred, unclaimed)
		}
		if s := g.poll(t, admittedAt.Add(time.Second), live)[live]; s.State != room.StateAdmitted || s.Pass == "" && s.PassExpiry.IsZero() {
			t.Errorf("live ticket %d polls: %+v, want admitted", live, s)
		}
		// Ticket 3, seen a second before the cancel, had the pass first and
		// never read it: it lapsed after the claim window. 4..7 were deferred.
		if unclaimed != 1 || deferred != 4 {
			t.Errorf("unclaimed %d, deferred %d; want 1 (ticket 3's pass lapsed) and 4 (tickets 4..7)", unclaimed, deferred)
		}
		// One claim window (ticket 3's) and a tick, well within the 5 s pass
		// TTL that each dead ticket ahead took before.
		if d := admittedAt.Sub(cancel); d > room.DefaultClaimWindow+500*time.Millisecond {
			t.Errorf("live ticket admitted %v after the cancel, want within a claim window and a tick", d)
		}
		for _, tk := range []int64{3, 4, 5, 6, 7} {
			if s := status(t, g.r, tk, admittedAt); s.State != room.StateWaiting || s.Position != 1 {
				t.Errorf("deferred ticket %d: %s at position %d, want waiting at position 1", tk, s.State, s.Position)
			}
		}
		if s := status(t, g.r, 9, admittedAt); s.State != room.StateWaiting {
			t.Errorf("ticket 9: %s, want waiting", s.State)
		}
	})
}

// A deferred ticket whose page polls again is admitted before the other
// deferred tickets and before the line; a used ticket is never deferred,
// and a deferred ticket unseen in the long windows is passed over.
func TestDeferredTicketThatPollsAgainGoesFirst(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		g := newDeferRig(t, e, 5) // tickets 3..7 wait
		for s := 2 * time.Second; s <= 61*time.Second; s += time.Second {
			tickets := []int64{7}
			if s <= 56*time.Second {
				tickets = append(tickets, 3, 4, 5, 6)
			}
			g.poll(t, g.at(s), tickets...)
		}
		if err := g.r.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		now := g.at(62 * time.Second)
		a := admit(t, g.r, now, 1_000_000, 1)
		wantTickets(t, "after the cancel", a.Tickets, []int64{7})
		if a.Deferred != 4 || a.Advanced != 5 {
			t.Errorf("deferred %d, line advanced %d; want 4 (tickets 3..6) and 5", a.Deferred, a.Advanced)
		}
		// Ticket 7 buys without its page reading the pass (a claim is still
		// on it): past the claim deadline it is used, not deferred.
		if err := g.r.Consume(ctx, 7, now); err != nil {
			t.Fatal(err)
		}
		now = now.Add(room.DefaultClaimWindow + time.Millisecond)
		if a := admit(t, g.r, now, 1_000_000, 1); a.Unclaimed != 0 || len(a.Tickets) != 0 {
			t.Errorf("after the used pass's claim deadline: %+v, want nothing lapsed or admitted", a)
		}
		if s := status(t, g.r, 7, now); s.State != room.StateUsed {
			t.Errorf("used ticket 7: %s, want used", s.State)
		}

		// Ticket 5's page comes back; a unit returns: 5 first, though 3 and
		// 4 were deferred with it and ahead of it.
		if s := g.poll(t, now, 5)[5]; s.State != room.StateWaiting || s.Position != 1 {
			t.Fatalf("deferred ticket 5 polls: %s at position %d, want waiting at 1", s.State, s.Position)
		}
		wantTickets(t, "a deferred ticket seen again", admit(t, g.r, now, 1_000_000, 1).Tickets, []int64{5})
		if s := g.poll(t, now, 5)[5]; s.State != room.StateAdmitted {
			t.Errorf("ticket 5: %s, want admitted", s.State)
		}

		// Past both long windows in which 3, 4 and 6 were last seen (56 s):
		// passed over, they read expired.
		now = g.at(90 * time.Second)
		a = admit(t, g.r, now, 1_000_000, 2)
		if a.Skipped != 3 || len(a.Tickets) != 0 {
			t.Errorf("after the long windows: %+v, want 3 passed over and none admitted", a)
		}
		for _, tk := range []int64{3, 4, 6} {
			if s := status(t, g.r, tk, now); s.State != room.StateExpired {
				t.Errorf("ticket %d: %s, want expired", tk, s.State)
			}
		}
	})
}

// Deferring needs short seen windows kept two short windows: in a room
// whose callers (an older build) wrote only the long ones, or whose short
// windows are newer than that, nobody is deferred and no claim is written.
func TestNoDeferringBeforeTheShortWindowsAreKept(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		b := t0.Add(room.SeenWindow).Truncate(room.SeenWindow)
		seed := room.NewSeed()
		setUp(t, r, seed, 5*time.Second)
		if err := r.Open(ctx, seed); err != nil {
			t.Fatal(err)
		}
		// Sold out and back: deferring is for a resumed room only.
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, r, 1, 4, b)
		if err := r.MarkSeen(ctx, b, seq(1, 4)); err != nil {
			t.Fatal(err)
		}
		// As if an older build had marked them: no short windows.
		if err := e.rdb.HDel(ctx, room.MetaKeyOf(r), "seen_short_since").Err(); err != nil {
			t.Fatal(err)
		}
		at := func(d time.Duration) time.Time { return b.Add(d) }
		a := admit(t, r, at(10*time.Second), 1_000_000, 1)
		wantTickets(t, "long windows only", a.Tickets, []int64{1})
		if a.Deferred != 0 {
			t.Errorf("deferred %d without short windows, want 0", a.Deferred)
		}
		// Its pass is never read: with no claim written, it does not lapse.
		if a := admit(t, r, at(14*time.Second), 1_000_000, 1); a.Unclaimed != 0 || len(a.Tickets) != 0 {
			t.Errorf("after the claim window without claims: %+v, want nothing", a)
		}
		// A new build marks ticket 4 at 15 s: short windows from then on.
		if err := r.MarkSeen(ctx, at(15*time.Second), []int64{4}); err != nil {
			t.Fatal(err)
		}
		a = admit(t, r, at(16*time.Second), 1_000_000, 1) // ticket 1's pass expired at 15 s
		wantTickets(t, "short windows one window old", a.Tickets, []int64{2})
		if a.Deferred != 0 {
			t.Errorf("deferred %d one short window after they began, want 0", a.Deferred)
		}
		if err := r.MarkSeen(ctx, at(21*time.Second), []int64{4}); err != nil {
			t.Fatal(err)
		}
		a = admit(t, r, at(21*time.Second+500*time.Millisecond), 1_000_000, 1) // ticket 2's expired at 21 s
		wantTickets(t, "short windows two windows old", a.Tickets, []int64{4})
		if a.Deferred != 1 {
			t.Errorf("deferred %d, want 1 (ticket 3, not seen in the short windows)", a.Deferred)
		}
		if s := status(t, r, 3, at(22*time.Second)); s.State != room.StateWaiting || s.Position != 1 {
			t.Errorf("ticket 3: %s at %d, want waiting at position 1 (deferred)", s.State, s.Position)
		}
	})
}

// Until a room has sold out and come back, its line is served in order: a
// page that has not polled lately (a slow phone, a starved client) is
// still admitted in its turn, never deferred, and no claim is written.
func TestNoDeferringBeforeASellOut(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		b := t0.Add(room.SeenWindow).Truncate(room.SeenWindow)
		seed := room.NewSeed()
		setUp(t, r, seed, 5*time.Second)
		if err := r.Open(ctx, seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, r, 1, 3, b)
		if err := r.MarkSeen(ctx, b, seq(1, 3)); err != nil {
			t.Fatal(err)
		}
		at := func(d time.Duration) time.Time { return b.Add(d) }
		// 10 s on, only ticket 3 polled again: 1 and 2 are not seen in the
		// short windows, yet they come first.
		if err := r.MarkSeen(ctx, at(10*time.Second), []int64{3}); err != nil {
			t.Fatal(err)
		}
		a := admit(t, r, at(10*time.Second+500*time.Millisecond), 1_000_000, 2)
		wantTickets(t, "in order", a.Tickets, []int64{1, 2})
		if a.Deferred != 0 {
			t.Errorf("deferred %d before any sell-out, want 0", a.Deferred)
		}
		// Their passes unread past the claim window: nothing lapses.
		if a := admit(t, r, at(14*time.Second), 1_000_000, 2); a.Unclaimed != 0 {
			t.Errorf("unclaimed %d before any sell-out, want 0", a.Unclaimed)
		}
		// Sold out, then a unit back: from now on a page not seen lately is
		// deferred.
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := e.rdb.HGet(ctx, room.MetaKeyOf(r), "resumed").Result(); err != nil || got != "1" {
			t.Errorf("resumed mark after Close and Resume: %q %v, want 1", got, err)
		}
	})
}
