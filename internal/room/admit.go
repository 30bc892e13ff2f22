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

// SpentGrace is how long a pass that bought (Consume) still holds its slot
// among the caller's maxUnusedPasses: the caller derives that cap from a
// figure of the remaining stock that may be a little old (the service's is
// at most about 250 ms), and until the figure shows the purchase, freeing
// the slot would admit one user more than the stock can serve. It also
// covers a clock skew between instances of up to about 1.5 s.
const SpentGrace = 2 * time.Second

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
	if ratePerSecond <= 0 || maxUnusedPasses < 0 {
		return Admission{}, fmt.Errorf("%w: rate %d a second and %d unused passes", ErrInvalid, ratePerSecond, maxUnusedPasses)
	}
	v, err := admitScript.Run(ctx, r.rdb, []string{r.k.meta, r.k.live, r.k.draw, r.k.spent}, now.UnixMilli(), ratePerSecond, maxUnusedPasses, MaxAdmitPerCall, SpentGrace.Milliseconds()).Slice()
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
