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

// Admission is what one Admit call did.
type Admission struct {
	// Tickets admitted by this call, in serve order.
	Tickets []int64
	// PassExpiry of the tickets admitted by this call.
	PassExpiry time.Time
	// Expired counts the passes this call found expired unused (their
	// slots were handed on).
	Expired int64
}

// Admit admits the next tickets in line: at most ratePerSecond a second
// across every instance calling it (counted per second of now, spread over
// the second), never more than maxUnusedPasses admitted-and-unused passes
// after dropping the passes expired at now, and at most MaxAdmitPerCall.
// Call it often (every 100 ms, say) from every instance, or from one: the
// state is all in Redis and each call is one script. Nothing is admitted
// before Open or while closed; the caller computes maxUnusedPasses from the
// remaining stock.
func (r *Room) Admit(ctx context.Context, now time.Time, ratePerSecond, maxUnusedPasses int) (Admission, error) {
	return r.AdmitSinceUsed(ctx, now, ratePerSecond, maxUnusedPasses, -1)
}

// AdmitSinceUsed is Admit for a caller whose maxUnusedPasses comes from a
// stock count that may be older than the room's used count usedBase (a
// Stats read before the count): the passes used since then bought units
// that count may still hold, so each lowers maxUnusedPasses by one, in the
// script. usedBase -1 is Admit.
func (r *Room) AdmitSinceUsed(ctx context.Context, now time.Time, ratePerSecond, maxUnusedPasses int, usedBase int64) (Admission, error) {
	if ratePerSecond <= 0 || maxUnusedPasses < 0 || usedBase < -1 {
		return Admission{}, fmt.Errorf("%w: rate %d a second, %d unused passes, used base %d", ErrInvalid, ratePerSecond, maxUnusedPasses, usedBase)
	}
	v, err := admitScript.Run(ctx, r.rdb, []string{r.k.meta, r.k.live, r.k.draw}, now.UnixMilli(), ratePerSecond, maxUnusedPasses, MaxAdmitPerCall, usedBase).Slice()
	if err != nil {
		return Admission{}, unavailable(err)
	}
	if len(v) != 4 {
		return Admission{}, unavailable(fmt.Errorf("unexpected admit reply %v", v))
	}
	a := Admission{Expired: v[1].(int64)}
	switch v[0] {
	case "noroom":
		return a, ErrNoRoom
	case "sold_out":
		return a, ErrSoldOut
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
