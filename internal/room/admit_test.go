package room_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/room"
)

// TestAdmitRateAcrossInstances: two instances admit concurrently; in no
// second of the injected clock do they admit more than R together, and
// with enough people waiting they admit exactly R.
func TestAdmitRateAcrossInstances(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		const rate, seconds = 37, 4
		a, b := e.room(t, nil), e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, a, seed, time.Hour)
		if err := a.Open(context.Background(), seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, a, 1, rate*seconds+50, t0)

		perSecond := make([]int, seconds)
		var all []int64
		var mu sync.Mutex
		for s := range int64(seconds) {
			// Both instances call every few ms through the same second,
			// concurrently; the next second starts when both are through.
			var wg sync.WaitGroup
			for i, inst := range []*room.Room{a, b} {
				wg.Go(func() {
					for ms := int64(i * 3); ms < 1000; ms += 7 {
						if i == 1 && ms+7 >= 1000 {
							ms = 999
						}
						m, err := inst.Mark(context.Background())
						if err != nil {
							t.Errorf("Mark: %v", err)
							return
						}
						adm, err := inst.Admit(context.Background(), at(s*1000+ms), m, rate, 1_000_000)
						if err != nil {
							t.Errorf("Admit: %v", err) // not Fatal: off the test's goroutine
							return
						}
						mu.Lock()
						perSecond[s] += len(adm.Tickets)
						all = append(all, adm.Tickets...)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
		}
		for s, n := range perSecond {
			if n != rate {
				t.Errorf("second %d: %d admitted by two instances, want exactly %d (never more)", s, n, rate)
			}
		}
		slices.Sort(all)
		wantTickets(t, "admitted tickets", all, seq(1, rate*seconds))
	})
}

func TestAdmitSpreadsTheRateOverTheSecond(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		r := e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, r, seed, time.Hour)
		if err := r.Open(context.Background(), seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, r, 1, 30, t0)
		steps := []struct {
			ms   int64
			want int
		}{
			{0, 1},    // ceil(10*1/1000)
			{99, 0},   // ceil(10*100/1000) = 1, already used
			{100, 1},  // ceil(10*101/1000) = 2
			{499, 3},  // 5 by the middle of the second
			{999, 5},  // 10 in the whole second
			{999, 0},  // and never more
			{1000, 1}, // a new second
			{500, 0},  // a caller whose clock is behind shares the current second
			{1999, 9}, // the rest of it
			{1500, 0}, // still nothing for the late clock
			{5000, 1}, // seconds with no call carry nothing over
			{5999, 9},
		}
		for _, s := range steps {
			if a := admit(t, r, at(s.ms), 10, 1000); len(a.Tickets) != s.want {
				t.Fatalf("Admit at %d ms admitted %d, want %d", s.ms, len(a.Tickets), s.want)
			}
		}
	})
}

// With AdmitLead, a call admits what falls due before the caller's next
// call: the second's last call (at 950 ms of a 100 ms tick) brings it to R,
// where without the lead up to R/10 would be lost every second; and never
// more than R in a second.
func TestAdmitLeadFillsTheSecond(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		r := e.room(t, &room.Options{AdmitLead: 100 * time.Millisecond})
		seed := room.NewSeed()
		setUp(t, r, seed, time.Hour)
		if err := r.Open(context.Background(), seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, r, 1, 300, t0)
		steps := []struct {
			ms   int64
			want int
		}{
			{50, 16},   // ceil(100*151/1000): due by the next call at 150 ms
			{150, 10},  // 26 by 251 ms
			{850, 70},  // 96 by 951 ms
			{950, 4},   // the whole second's 100, not ceil(100*951/1000) = 96
			{999, 0},   // and never more
			{1050, 16}, // the next second starts over
		}
		for _, s := range steps {
			if a := admit(t, r, at(s.ms), 100, 1000); len(a.Tickets) != s.want {
				t.Fatalf("Admit at %d ms admitted %d, want %d", s.ms, len(a.Tickets), s.want)
			}
		}
	})
}

// TestAdmitCapAndNoShows: never more live passes than the cap; a used
// pass leaves the live set at once, an expired one at the next Admit, and
// the tickets read used and expired.
func TestAdmitCapAndNoShows(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, r, seed, 10*time.Second)
		if err := r.Open(ctx, seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, r, 1, 10, t0)

		// 3 units left.
		a := admit(t, r, at(0), 1_000_000, 3)
		wantTickets(t, "first admission", a.Tickets, seq(1, 3))
		if !a.PassExpiry.Equal(at(10_000)) {
			t.Errorf("pass expiry %v, want %v", a.PassExpiry, at(10_000))
		}
		wantTickets(t, "at the cap", admit(t, r, at(1), 1_000_000, 3).Tickets, nil)

		if err := r.Consume(ctx, 2, at(5)); err != nil {
			t.Fatalf("Consume(2): %v", err)
		}
		if err := r.Consume(ctx, 2, at(6)); !errors.Is(err, room.ErrPassUsed) || !errors.Is(err, room.ErrNotLive) {
			t.Errorf("Consume(2) again = %v, want ErrPassUsed", err)
		}
		if err := r.Consume(ctx, 9, at(6)); !errors.Is(err, room.ErrNotLive) || errors.Is(err, room.ErrPassUsed) {
			t.Errorf("Consume(never admitted) = %v, want ErrNotLive", err)
		}
		// Ticket 2 bought: 2 units left for the two live passes.
		wantTickets(t, "after one was used", admit(t, r, at(7), 1_000_000, 2).Tickets, nil)
		// A lower cap (stock ran down) admits nobody until enough passes go.
		wantTickets(t, "cap lowered", admit(t, r, at(8), 1_000_000, 1).Tickets, nil)

		if s := status(t, r, 1, at(9_999)); s.State != room.StateAdmitted || !s.PassExpiry.Equal(at(10_000)) {
			t.Errorf("ticket 1 just before expiry: %+v, want admitted until %v", s, at(10_000))
		}
		if err := r.Consume(ctx, 3, at(10_000)); !errors.Is(err, room.ErrNotLive) {
			t.Errorf("Consume(3) at its expiry = %v, want ErrNotLive", err)
		}
		// Tickets 1 and 3 expired at 10 s, unused: their 2 units go on.
		a = admit(t, r, at(10_000), 1_000_000, 2)
		if a.Expired != 2 {
			t.Errorf("expired = %d, want 2", a.Expired)
		}
		wantTickets(t, "slots handed on", a.Tickets, seq(4, 5))
		for tk, want := range map[int64]room.State{1: room.StateExpired, 2: room.StateUsed, 3: room.StateExpired, 4: room.StateAdmitted, 5: room.StateAdmitted, 6: room.StateWaiting} {
			if s := status(t, r, tk, at(10_000)); s.State != want {
				t.Errorf("ticket %d: %s, want %s", tk, s.State, want)
			}
		}
		if s := status(t, r, 6, at(10_000)); s.Position != 1 || s.ETASeconds != 1 || s.Waiting != 5 {
			t.Errorf("ticket 6: %+v, want position 1, eta 1 s, 5 waiting", s)
		}
		if s := status(t, r, 10, at(10_000)); s.Position != 5 || s.Ahead != 4 {
			t.Errorf("ticket 10: %+v, want position 5 with 4 ahead", s)
		}
	})
}

// TestSpentPassHoldsItsSlotOnlyAfterTheMark: the caller's figure of the
// remaining stock is read after its mark (room.Mark), so it shows every
// order whose pass was spent before the mark. Such a pass frees its slot
// at once (it held it for room.SpentGrace, 2 s, before: near the end of a
// sale the line moved seconds late while units were free); a pass spent
// after the mark, whose order the figure may not show, still holds it.
func TestSpentPassHoldsItsSlotOnlyAfterTheMark(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, r, seed, time.Hour)
		if err := r.Open(ctx, seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, r, 1, 10, t0)
		left := 4 // units: the figure a caller reads
		// The rate (3 a second) holds admission below the stock.
		wantTickets(t, "first second", admit(t, r, at(999), 3, left).Tickets, seq(1, 3))

		// Ticket 1 buys: its order is taken, then its pass spent.
		left--
		if err := r.Consume(ctx, 1, at(1000)); err != nil {
			t.Fatal(err)
		}
		// A mark now, then the figure (3): two live passes, one unit free.
		wantTickets(t, "a pass spent before the mark", admit(t, r, at(1999), 3, left).Tickets, []int64{4})

		// A mark, the figure (3 units, live passes 2, 3 and 4), and only
		// then ticket 2 buys: this caller's figure does not show it.
		m := mark(t, r)
		figure := left
		left--
		if err := r.Consume(ctx, 2, at(2000)); err != nil {
			t.Fatal(err)
		}
		wantTickets(t, "a pass spent after the mark", admitSince(t, r, at(2999), m, 3, figure).Tickets, nil)
		// The next round's figure shows it: 2 units, 2 live passes.
		wantTickets(t, "the next round", admit(t, r, at(3999), 3, left).Tickets, nil)

		// A round slower than SpentGrace from its mark to its Admit admits
		// nobody: the spent passes it must count may be gone.
		old := mark(t, r).Add(-room.SpentGrace - time.Second)
		a, err := r.Admit(ctx, at(4999), old, 3, 10)
		if !errors.Is(err, room.ErrStaleMark) || len(a.Tickets) != 0 {
			t.Errorf("Admit with a mark older than SpentGrace = %v, %v; want nobody, ErrStaleMark", a.Tickets, err)
		}
		// Stock came back (a restock to 10 units left): 8 free slots, 3 a
		// second.
		wantTickets(t, "restocked", admit(t, r, at(5999), 3, 10).Tickets, seq(5, 7))
	})
}

// TestSpentPassStampedAheadIsBounded: a spent pass stamped by a node whose
// clock ran ahead of the one holding the room now (a failover) holds its
// slot until this clock reaches the stamp, and at most SpentGrace: one
// stamped further ahead is dropped.
func TestSpentPassStampedAheadIsBounded(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, r, seed, time.Hour)
		if err := r.Open(ctx, seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, r, 1, 10, t0)
		now := mark(t, r).Time()
		spent := room.SpentKeyOf(r)
		for tk, ahead := range map[int64]time.Duration{901: time.Second, 902: time.Hour} {
			if err := e.rdb.ZAdd(ctx, spent, redis.Z{Score: float64(now.Add(ahead).UnixMilli()), Member: tk}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// 3 units: one held by the pass stamped 1 s ahead, none by the one
		// an hour ahead.
		wantTickets(t, "stamped ahead", admit(t, r, at(999), 1000, 3).Tickets, seq(1, 2))
		if n := e.rdb.ZCard(ctx, spent).Val(); n != 1 {
			t.Errorf("%d spent passes kept, want 1 (the one stamped an hour ahead dropped)", n)
		}
	})
}

func TestETA(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		r := e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, r, seed, time.Minute)
		if err := r.Open(context.Background(), seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, r, 1, 25, t0)
		if s := status(t, r, 25, t0); s.ETASeconds != -1 {
			t.Errorf("ETA before any admission = %d, want -1 (unknown)", s.ETASeconds)
		}
		admit(t, r, at(999), 4, 100) // admits 4: rate 4 a second
		if s := status(t, r, 25, at(999)); s.Position != 21 || s.ETASeconds != 6 {
			t.Errorf("ticket 25: position %d eta %d, want 21 and ceil(21/4) = 6", s.Position, s.ETASeconds)
		}
	})
}

// TestAdmitPerCallBound runs on the real Redis and Cluster only: 5,000
// joins through miniredis's Lua take seconds and prove nothing more.
func TestAdmitPerCallBound(t *testing.T) {
	t.Parallel()
	forEachRealRedis(t, func(t *testing.T, e env) {
		r := e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, r, seed, time.Minute)
		if err := r.Open(context.Background(), seed); err != nil {
			t.Fatal(err)
		}
		joinMany(t, r, room.MaxAdmitPerCall+10)
		if a := admit(t, r, at(999), 1_000_000, 1_000_000); len(a.Tickets) != room.MaxAdmitPerCall {
			t.Errorf("one call admitted %d, want MaxAdmitPerCall = %d", len(a.Tickets), room.MaxAdmitPerCall)
		}
		if a := admit(t, r, at(999), 1_000_000, 1_000_000); len(a.Tickets) != 10 {
			t.Errorf("the next call admitted %d, want the 10 left", len(a.Tickets))
		}
	})
}

func TestStats(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		ctx := context.Background()
		r := e.room(t, nil)
		if _, err := r.Stats(ctx); !errors.Is(err, room.ErrNoRoom) {
			t.Errorf("Stats without a room = %v, want ErrNoRoom", err)
		}
		seed := room.NewSeed()
		setUp(t, r, seed, time.Second)
		joinUsers(t, r, 1, 4, t0)
		first, err := r.Stats(ctx)
		if err != nil || len(first.Epoch) != 16 {
			t.Fatalf("Stats before the opening = %+v, %v; want a 16-digit epoch", first, err)
		}
		if s := first; s != (room.Stats{Phase: "pre", Tickets: 4, Waiting: 4, Epoch: first.Epoch}) {
			t.Errorf("Stats before the opening = %+v", s)
		}
		setUp(t, r, seed, time.Second) // again: the same set-up, the same epoch
		if err := r.Open(ctx, seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, r, 5, 2, t0)
		a := admit(t, r, at(999), 3, 10)
		if err := r.Consume(ctx, a.Tickets[0], at(999)); err != nil {
			t.Fatal(err)
		}
		admit(t, r, at(2000), 3, 10) // the two unused passes expired at 1.999 s
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		want := room.Stats{Phase: "open", Closed: true, Tickets: 6, PreQueue: 4, Waiting: 2,
			Admitted: 4, Used: 1, Expired: 2, Live: 1, Rate: 3, Epoch: first.Epoch}
		if s, err := r.Stats(ctx); err != nil || len(s.Transcript) != 64 {
			t.Errorf("Stats = %+v, %v; want the opening's transcript", s, err)
		} else {
			want.Transcript = s.Transcript
		}
		if s, err := r.Stats(ctx); err != nil || s != want {
			t.Errorf("Stats = %+v, %v; want %+v", s, err, want)
		}
		// Lost and set up again (same commitment): another epoch.
		if err := r.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		setUp(t, r, seed, time.Second)
		if s, err := r.Stats(ctx); err != nil || s.Epoch == first.Epoch || len(s.Epoch) != 16 {
			t.Errorf("Stats after setting up again = %+v, %v; want an epoch other than %s", s, err, first.Epoch)
		}
	})
}

// TestAdmissionClockNeverGoesBack: two instances whose clocks differ (or
// one that read its clock, then waited for the CPU before its script ran)
// admit in turn. A later admission never carries an earlier time than the
// one before it: a pass's expiry, from which the buyer and the load
// harness read when it was admitted, follows the line's order.
func TestAdmissionClockNeverGoesBack(t *testing.T) {
	t.Parallel()
	forEachRedis(t, func(t *testing.T, e env) {
		a, b := e.room(t, nil), e.room(t, nil)
		seed := room.NewSeed()
		setUp(t, a, seed, time.Hour)
		if err := a.Open(context.Background(), seed); err != nil {
			t.Fatal(err)
		}
		joinUsers(t, a, 1, 10, t0)
		// The cap of live passes holds a back (a knows of 3 units left);
		// b knows of 6.
		ahead, err := a.Admit(context.Background(), at(1500), mark(t, a), 1000, 3)
		if err != nil || len(ahead.Tickets) == 0 {
			t.Fatalf("Admit at 1.5 s: %+v, %v", ahead, err)
		}
		// b's clock is 400 ms behind a's.
		behind, err := b.Admit(context.Background(), at(1100), mark(t, b), 1000, 6)
		if err != nil || len(behind.Tickets) == 0 {
			t.Fatalf("Admit at 1.1 s: %+v, %v", behind, err)
		}
		if behind.Tickets[0] <= ahead.Tickets[len(ahead.Tickets)-1] {
			t.Fatalf("tickets %v admitted after %v", behind.Tickets, ahead.Tickets)
		}
		if behind.PassExpiry.Before(ahead.PassExpiry) {
			t.Errorf("tickets %v admitted after %v expire first (%v before %v): the admission clock went back",
				behind.Tickets, ahead.Tickets, behind.PassExpiry.Sub(t0), ahead.PassExpiry.Sub(t0))
		}
		st, err := b.Status(context.Background(), behind.Tickets[0], at(1100))
		if err != nil || st.State != room.StateAdmitted || !st.PassExpiry.Equal(behind.PassExpiry) {
			t.Errorf("status of %d: %+v, %v; want admitted, expiring at %v", behind.Tickets[0], st, err, behind.PassExpiry.Sub(t0))
		}
	})
}
