package harness

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Probe kinds: orders the service must refuse (403) and whose expected
// error code.
const (
	probeNoPass    = "no_pass"          // no Seckill-Pass header
	probeForged    = "forged_pass"      // a real pass with one character changed
	probeOtherUser = "other_users_pass" // another user's valid pass
	probeReuse     = "pass_reuse"       // a pass that already bought, with a fresh Idempotency-Key
)

// probeWant is the refusal each probe kind expects; probeReuse accepts any
// answer that is not an order (409 already_purchased, or a 403).
var probeWant = map[string]string{
	probeNoPass:    "pass_required",
	probeForged:    "pass_invalid",
	probeOtherUser: "pass_wrong_user",
}

// buy places user u's order with its pass; a retry (no answer, 5xx) sends
// the same Idempotency-Key again, at most 5 times.
func (rr *roomRun) buy(ctx context.Context, i int32, u *roomUser) {
	r := Record{Strategy: rr.label, ItemID: rr.itemID, User: u.id, Key: rr.key(i, 0), ReplayOf: -1, pass: u.pass}
	if u.orderSeq >= 0 {
		r.ReplayOf = u.orderSeq
	}
	rr.cl.placeOrder(ctx, &r)
	seq := rr.addRecord(&r)
	if u.orderSeq < 0 {
		u.orderSeq = seq
	}
	u.orderTries++
	switch {
	case acked(r.Outcome):
		u.bought, u.orderID = true, r.OrderID
		rr.bought.Add(1)
		rr.next(i, r.End, stepPoll) // read the ticket again: it should be used now
	case unknownOutcome(r.Outcome) && u.orderTries < 5:
		rr.next(i, r.End.Add(200*time.Millisecond), stepBuy)
	default:
		u.refusal = fmt.Sprintf("HTTP %d %s", r.Status, r.Code)
		if r.Status == http.StatusForbidden {
			u.problem("its own pass was refused: %s", u.refusal)
		}
		rr.next(i, r.End.Add(time.Second), stepPoll)
	}
}

// settle stops a user at a final state; a buyer whose ticket reads used
// may first try the same pass once more (probeReuse).
func (rr *roomRun) settle(ctx context.Context, u *roomUser) {
	switch {
	case u.bought && u.state == stateUsed:
		if rr.reuseProbes.Add(1) <= int64(rr.rc.Probes) {
			rr.probe(ctx, probeReuse, u.id, u.pass)
		}
		rr.stop(u, "bought")
	case u.bought:
		u.problem("bought, but the ticket reads %s, not used", u.state)
		rr.stop(u, "bought")
	case u.state == stateUsed:
		u.problem("the ticket reads used, but its user has no order")
		rr.stop(u, "used without an order")
	case u.state == stateSoldOut, u.state == stateHeld:
		rr.stop(u, stateSoldOut) // held: sold out while unpaid orders may return units
	case u.refusal == fmt.Sprintf("HTTP %d %s", http.StatusConflict, stateSoldOut):
		// Admitted, then told sold out by the order: the user knows.
		rr.stop(u, fmt.Sprintf("%s (the order; the ticket reads %s)", stateSoldOut, u.state))
	default:
		rr.stop(u, fmt.Sprintf("pass %s (order %s)", u.state, u.refusal))
	}
}

// refusalProbes runs once, when the first user reads its pass, before it
// buys: orders for users still in line (the last ones) without a pass,
// with a forged pass, and with a's pass. Each must be a 403 with its own
// code, and changes nothing (the verification checks the orders).
func (rr *roomRun) refusalProbes(ctx context.Context, a int32, u *roomUser) {
	forged := []byte(u.pass)
	if k := len(forged) / 2; k < len(forged) {
		if forged[k] == 'A' {
			forged[k] = 'B'
		} else {
			forged[k] = 'A'
		}
	}
	n := len(rr.users)
	for k := range rr.rc.Probes {
		t := n - 1 - k
		if t < 0 || int32(t) == a {
			continue
		}
		target := rr.users[t].id // set before the run, never written since
		rr.probe(ctx, probeNoPass, target, "")
		rr.probe(ctx, probeForged, target, string(forged))
		rr.probe(ctx, probeOtherUser, target, u.pass)
	}
}

func (rr *roomRun) probe(ctx context.Context, kind, user, pass string) {
	key := fmt.Sprintf("lt-%s-i%d-probe%d", rr.cfg.RunID, rr.itemID, rr.probes.Add(1))
	r := Record{Strategy: rr.label, ItemID: rr.itemID, User: user, Key: key, ReplayOf: -1, pass: pass, Probe: kind}
	rr.cl.placeOrder(ctx, &r)
	rr.addRecord(&r)
}

// progress prints a line about once per ProgressEvery until stop closes.
func (rr *roomRun) progress(stop <-chan struct{}, done chan<- struct{}) {
	start, last, lastPolls := time.Now(), time.Now(), int64(0)
	progressLoop(rr.cfg, func(now time.Time) string {
		polls := rr.polls.Load()
		rate := float64(polls-lastPolls) / now.Sub(last).Seconds()
		last, lastPolls = now, polls
		phase := fmt.Sprintf("opens in %.0fs", time.Until(rr.startsAt).Seconds())
		if now.After(rr.startsAt) {
			phase = "open"
		}
		return fmt.Sprintf("[room %s %5.1fs %s] joined=%d/%d admitted=%d bought=%d sold_out=%d left=%d polls=%d (%.0f/s) errors=%d",
			rr.label, now.Sub(start).Seconds(), phase, rr.joined.Load(), len(rr.users), rr.admitted.Load(), rr.bought.Load(),
			rr.soldOut.Load(), rr.sched.remaining(), polls, rate, rr.errs.Load())
	}, stop, done)
}
