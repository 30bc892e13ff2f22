package room

import (
	"context"
	"fmt"
	"time"
)

// MaxAdmitPerCall bounds the tickets one Admit call admits, so its script
// holds Redis for a few milliseconds at most. Above it a second's rate
// needs several calls in the second.
const MaxAdmitPerCall = 5000

// SpentGrace bounds how long a pass that bought (Consume) is remembered
// for Admit, by the room's Redis clock: the longest a caller may take from
// its Mark to its Admit call (a later call admits nobody: ErrStaleMark),
// and the longest a spent pass stamped by a node whose clock ran ahead of
// this one's (a failover) holds its slot. It no longer delays admission: a
// spent pass holds its slot only for a mark taken before it was spent.
const SpentGrace = 2 * time.Second

// Mark is an instant on the clock of the Redis node that holds the room
// (TIME), the clock Consume stamps a spent pass with. A caller takes one
// before it reads the remaining stock it derives Admit's maxUnusedPasses
// from: every order whose pass was spent before the mark was taken before
// it (the order comes first), so that figure shows it.
type Mark struct{ at time.Time }

// Time is the mark's instant on the room's Redis clock.
func (m Mark) Time() time.Time { return m.at }

// Add is the mark d later (earlier, d < 0).
func (m Mark) Add(d time.Duration) Mark { return Mark{m.at.Add(d)} }

// Mark reads the room's Redis clock: one round trip to the node holding
// the room's keys (a Redis Cluster routes it by the room's key).
func (r *Room) Mark(ctx context.Context) (Mark, error) {
	v, err := markScript.Run(ctx, r.rdb, []string{r.k.meta}).Int64()
	if err != nil {
		return Mark{}, unavailable(err)
	}
	return Mark{time.UnixMilli(v)}, nil
}

// Admission is what one Admit call did.
type Admission struct {
	// Tickets admitted by this call, in serve order.
	Tickets []int64
	// PassExpiry of the tickets admitted by this call.
	PassExpiry time.Time
	// Expired counts the passes this call found expired unused (their
	// slots were handed on).
	Expired int64
	// Skipped counts the waiting tickets passed over, not seen lately
	// (MarkSeen); they read expired.
	Skipped int64
	// Deferred counts the tickets of the line this call set aside, seen
	// lately but not very lately (seen.go); they read waiting at position
	// 1 and go first once seen again.
	Deferred int64
	// Unclaimed counts the passes this call found unread past their claim
	// deadline (Options.ClaimWindow): they lapsed and their tickets were
	// deferred.
	Unclaimed int64
	// Advanced is how far this call moved the line's head: the tickets it
	// took from the line (admitted, deferred or passed over), not counting
	// deferred tickets admitted or passed over. Stats.Waiting falls by it.
	Advanced int64
}

// Admit admits the next tickets in line: at most ratePerSecond a second
// across every instance calling it (counted per second of now, spread over
// the second), and at most MaxAdmitPerCall. After dropping the passes
// expired at now, the live passes and those spent since mark together
// stay within maxUnusedPasses, which the caller computes from a figure of
// the remaining stock read after it took mark (Mark): that figure shows
// the orders of the passes spent before the mark, not necessarily the
// later ones. Call it often (every 100 ms, say) from every instance, or
// from one: the state is all in Redis and each call is one script, each
// caller with its own mark and figure. Nothing is admitted before Open or
// while closed, and nothing for a mark older than SpentGrace
// (ErrStaleMark). Waiting tickets not seen lately (MarkSeen) are passed
// over, up to maxSkipPerCall a call: they read expired; those seen lately
// but not very lately are deferred, and passes unread within the claim
// window lapse (seen.go).
func (r *Room) Admit(ctx context.Context, now time.Time, mark Mark, ratePerSecond, maxUnusedPasses int) (Admission, error) {
	if ratePerSecond <= 0 || maxUnusedPasses < 0 {
		return Admission{}, fmt.Errorf("%w: rate %d a second and %d unused passes", ErrInvalid, ratePerSecond, maxUnusedPasses)
	}
	if mark.at.IsZero() {
		return Admission{}, fmt.Errorf("%w: no mark (Mark)", ErrInvalid)
	}
	w, sw := seenWindow(now), shortSeenWindow(now)
	k := r.k
	v, err := admitScript.Run(ctx, r.rdb, []string{k.meta, k.live, k.draw, k.spent, k.seen(w), k.seen(w - 1),
		k.deferred, k.claim, k.seenShort(sw), k.seenShort(sw - 1), k.used},
		now.UnixMilli(), ratePerSecond, maxUnusedPasses, MaxAdmitPerCall, SpentGrace.Milliseconds(), r.opt.AdmitLead.Milliseconds(),
		mark.at.UnixMilli(), SeenWindow.Milliseconds(), maxSkipPerCall, ShortSeenWindow.Milliseconds(), r.opt.ClaimWindow.Milliseconds()).Slice()
	if err != nil {
		return Admission{}, unavailable(err)
	}
	if len(v) != 4 && len(v) != 8 {
		return Admission{}, unavailable(fmt.Errorf("unexpected admit reply %v", v))
	}
	a := Admission{Expired: v[1].(int64)}
	if len(v) == 8 {
		a.Skipped, _ = v[4].(int64)
		a.Deferred, _ = v[5].(int64)
		a.Unclaimed, _ = v[6].(int64)
		a.Advanced, _ = v[7].(int64)
	}
	switch v[0] {
	case "noroom":
		return a, ErrNoRoom
	case "sold_out":
		return a, ErrSoldOut
	case "stale":
		return a, ErrStaleMark
	}
	tickets, _ := v[3].([]any)
	for _, t := range tickets {
		a.Tickets = append(a.Tickets, t.(int64))
	}
	if len(a.Tickets) > 0 {
		a.PassExpiry = time.UnixMilli(v[2].(int64))
	}
	return a, nil
}
