package room

import (
	"context"
	"strconv"
)

// Stats are a room's counters, for metrics and the console.
type Stats struct {
	// Phase is "pre" (before the opening), "opening" (the draw being
	// written) or "open".
	Phase string
	// Closed: sold out (Close), until Resume.
	Closed bool
	// Tickets is how many users joined; PreQueue how many of them before
	// the opening (0 until Open).
	Tickets, PreQueue int64
	// Waiting is Tickets not yet admitted.
	Waiting int64
	// Admitted, Used and Expired count passes since Setup: issued, bought
	// with (Consume), and found expired unused by Admit.
	Admitted, Used, Expired int64
	// Live is how many passes are live: admitted, not used, and not yet
	// found expired by Admit.
	Live int64
	// Rate is the admissions a second the last Admit call was given.
	Rate int64
	// Epoch names this set-up of the room (16 hex digits, new at each
	// Setup that created it; empty for a room set up before epochs).
	Epoch string
	// Transcript is the draw's transcript (hex), set by the opening.
	Transcript string
}

// Stats reads the room's counters (two reads, not one snapshot).
func (r *Room) Stats(ctx context.Context) (Stats, error) {
	m, err := r.rdb.HMGet(ctx, r.k.meta, "phase", "closed", "seq", "pre", "head", "admitted", "used", "expired", "rate", "epoch", "transcript").Result()
	if err != nil {
		return Stats{}, unavailable(err)
	}
	if m[0] == nil {
		return Stats{}, ErrNoRoom
	}
	n := func(i int) int64 {
		s, _ := m[i].(string)
		v, _ := strconv.ParseInt(s, 10, 64)
		return v
	}
	s := Stats{Phase: m[0].(string), Closed: m[1] == "1", Tickets: n(2), PreQueue: n(3),
		Admitted: n(5), Used: n(6), Expired: n(7), Rate: n(8)}
	s.Epoch, _ = m[9].(string)
	s.Transcript, _ = m[10].(string)
	s.Waiting = s.Tickets - n(4)
	if s.Live, err = r.rdb.ZCard(ctx, r.k.live).Result(); err != nil {
		return Stats{}, unavailable(err)
	}
	return s, nil
}
