package harness

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// roomFacts is what the room checks share: tickets, admissions, orders.
type roomFacts struct {
	byNumber   map[int64]*roomUser // every ticket the users hold
	preQ       map[int64]bool      // the draw's pre-queue
	admitted   []*roomUser         // users who read their pass
	orderUsers map[string]bool     // users with an order (DB rows, else acknowledged)
	orders     int
	soldOut    bool      // the item sold its whole stock
	lastUnit   time.Time // the last acknowledgement of a new order
	firstAdmit time.Time // the earliest admission (the room's clock when it admitted)
	firstSeen  time.Time // the earliest answer showing a pass: the room was open by then
}

func (rr *roomRun) facts(ctx context.Context, sr *StrategyReport, d drawDoc) (roomFacts, error) {
	f := roomFacts{byNumber: map[int64]*roomUser{}, preQ: map[int64]bool{}, orderUsers: map[string]bool{}}
	for i := range rr.users {
		u := &rr.users[i]
		if u.number > 0 {
			f.byNumber[u.number] = u
		}
		if u.pass != "" {
			f.admitted = append(f.admitted, u)
			if f.firstAdmit.IsZero() || u.admitted.Before(f.firstAdmit) {
				f.firstAdmit = u.admitted
			}
			if f.firstSeen.IsZero() || u.admittedSeen.Before(f.firstSeen) {
				f.firstSeen = u.admittedSeen
			}
		}
	}
	for _, t := range d.PreQueue {
		f.preQ[t] = true
	}
	seen := map[string]bool{}
	for i := range sr.Records {
		r := &sr.Records[i]
		if acked(r.Outcome) && !seen[r.OrderID] {
			seen[r.OrderID] = true
			if r.End.After(f.lastUnit) {
				f.lastUnit = r.End
			}
			if rr.cfg.Store == nil {
				f.orderUsers[r.User] = true
			}
		}
	}
	f.orders = sr.Final.Sold
	if rr.cfg.Store != nil {
		rows, err := rr.cfg.Store.Orders(ctx, rr.itemID)
		if err != nil {
			return f, fmt.Errorf("verify room: db orders: %w", err)
		}
		for _, o := range rows {
			f.orderUsers[o.UserID] = true
		}
		f.orders = len(rows)
	}
	f.soldOut = sr.Final.Sold == rr.cfg.Stock && rr.cfg.Stock > 0
	return f, nil
}

// verifyRoom adds the room's invariants (R0-R9) to sr and its summary.
func (rr *roomRun) verifyRoom(ctx context.Context, sr *StrategyReport, pre *roomView, a afterRun) error {
	f, err := rr.facts(ctx, sr, a.draw)
	if err != nil {
		return err
	}
	sr.Room = rr.summary(sr, f, a)
	var invs []Invariant
	add := func(name string, timing bool, probs []string, okFormat string, args ...any) {
		inv := Invariant{Name: name, Pass: len(probs) == 0, Timing: timing}
		if inv.Pass {
			inv.Detail = fmt.Sprintf(okFormat, args...)
		} else {
			inv.Detail = listSome(probs)
		}
		invs = append(invs, inv)
	}
	skip := func(name string, timing bool, why string) {
		invs = append(invs, Invariant{Name: name, Skipped: true, Timing: timing, Detail: why})
	}
	S := rr.cfg.Stock

	// R0: every answer fits the contract and what the user's earlier answers said.
	{
		var probs []string
		n := 0
		for i := range rr.users {
			u := &rr.users[i]
			n += u.nProblem
			for _, p := range u.problems {
				probs = append(probs, u.id+": "+p)
			}
		}
		add("R0 room answers follow the contract", false, probs, "%d joins, %d status answers, no contradiction", rr.joined.Load(), rr.polls.Load())
	}

	// R1: no order without a valid pass.
	{
		var probs []string
		admitted := map[string]bool{}
		for _, u := range f.admitted {
			admitted[u.id] = true
		}
		for u := range f.orderUsers {
			if !admitted[u] {
				probs = append(probs, fmt.Sprintf("user %s has an order but was never admitted", u))
			}
		}
		if f.orders > len(f.admitted) {
			probs = append(probs, fmt.Sprintf("%d orders for %d admitted users", f.orders, len(f.admitted)))
		}
		if a.admin != nil && int64(f.orders) > a.admin.Admitted {
			probs = append(probs, fmt.Sprintf("%d orders, the room admitted %d", f.orders, a.admin.Admitted))
		}
		probes := 0
		for i := range sr.Records {
			r := &sr.Records[i]
			want, ok := probeWant[r.Probe]
			if !ok {
				continue
			}
			probes++
			if r.Status != http.StatusForbidden || r.Code != want {
				probs = append(probs, fmt.Sprintf("%s for %s: HTTP %d %s, want 403 %s", r.Probe, r.User, r.Status, r.Code, want))
			}
		}
		if rr.rc.Probes > 0 && len(f.admitted) > 0 && probes == 0 {
			probs = append(probs, "no refusal probe was sent")
		}
		add("R1 no order without a valid pass", false, probs,
			"%d orders, all by the %d users admitted; %d orders without a pass, with a forged one or another user's refused with their 403",
			f.orders, len(f.admitted), probes)
	}

	// R2: no pass used twice.
	{
		var probs []string
		byPass := map[string]map[string]bool{}
		reuse := 0
		for i := range sr.Records {
			r := &sr.Records[i]
			if r.Probe == probeReuse {
				reuse++
				if acked(r.Outcome) {
					probs = append(probs, fmt.Sprintf("%s's pass bought again (order %s)", r.User, r.OrderID))
				}
				continue
			}
			if r.Probe != "" || r.pass == "" || !acked(r.Outcome) {
				continue
			}
			if byPass[r.pass] == nil {
				byPass[r.pass] = map[string]bool{}
			}
			byPass[r.pass][r.OrderID] = true
		}
		for _, ids := range byPass {
			if len(ids) > 1 {
				probs = append(probs, fmt.Sprintf("one pass bought %d orders", len(ids)))
			}
		}
		used := 0
		for i := range rr.users {
			if u := &rr.users[i]; u.bought && u.state == stateUsed {
				used++
			}
		}
		switch {
		case a.admin == nil:
			probs = append(probs, "the admin item view has no waiting_room")
		case a.admin.Used != int64(f.orders):
			probs = append(probs, fmt.Sprintf("the room counts %d passes used, %d orders", a.admin.Used, f.orders))
		}
		add("R2 no pass used twice", false, probs, "%d passes bought one order each, %d buyers read used, %d reused passes refused",
			len(byPass), used, reuse)
	}

	invs = append(invs, rr.drawInvariant(f, pre, a.draw, a.drawErr))
	invs = append(invs, rr.fifoInvariant(f))
	invs = append(invs, rr.rateInvariants(sr.Room.PerSecond, min(S, len(f.byNumber)))...)

	// R6: every user learns the outcome.
	{
		var probs []string
		for i := range rr.users {
			u := &rr.users[i]
			if u.outcome != "bought" && !strings.HasPrefix(u.outcome, stateSoldOut) {
				probs = append(probs, fmt.Sprintf("%s: %s", u.id, u.outcome))
			}
		}
		add("R6 every waiting user learns the outcome", false, probs, "%d bought, %d read sold_out, %d were told sold out by their order",
			sr.Room.Outcomes["bought"], sr.Room.Outcomes[stateSoldOut], len(rr.users)-sr.Room.Outcomes["bought"]-sr.Room.Outcomes[stateSoldOut])
	}

	// R7, R8: the room closes when the stock is gone, within a second.
	if !f.soldOut {
		skip("R7 the room closes at the sell-out", false, fmt.Sprintf("the item did not sell out (sold %d of %d)", sr.Final.Sold, S))
		skip("R8 every ticket reads sold_out within 1 s", true, "the item did not sell out")
	} else {
		var probs []string
		if a.public == nil || a.public.Phase != "closed" {
			probs = append(probs, fmt.Sprintf("public phase %v after the sell-out, want closed", phaseOf(a.public)))
		}
		if a.admin != nil && !a.admin.Closed {
			probs = append(probs, "the admin view says the room is not closed")
		}
		if a.lateJoin.status != http.StatusConflict || a.lateJoin.code != stateSoldOut {
			probs = append(probs, fmt.Sprintf("a join after the sell-out: HTTP %d %s %s, want 409 sold_out", a.lateJoin.status, a.lateJoin.code, a.lateState))
		}
		expired := 0
		for i := range rr.users {
			if u := &rr.users[i]; u.state == stateExpired {
				if expired++; expired <= maxListed {
					probs = append(probs, fmt.Sprintf("ticket %d reads expired after the sell-out, not sold_out", u.number))
				}
			}
		}
		if expired > maxListed {
			probs = append(probs, fmt.Sprintf("%d tickets in all read expired after the sell-out", expired))
		}
		add("R7 the room closes at the sell-out", false, probs, "phase closed, a new join is 409 sold_out, every ticket not used reads sold_out")
		probs = nil
		limit := f.lastUnit.Add(time.Second)
		for i := range rr.users {
			if u := &rr.users[i]; u.lastLive.After(limit) {
				probs = append(probs, fmt.Sprintf("%s read %s at +%.3fs after the last unit", u.id, u.state, u.lastLive.Sub(f.lastUnit).Seconds()))
			}
		}
		l := sr.Room.LearnedSoldOut
		add("R8 every ticket reads sold_out within 1 s", true, probs,
			"no answer waiting/admitted sent later than 1 s after the last unit; users read sold_out p50 %.2fs, max %.2fs after it (their next poll)",
			l.P50.Seconds(), l.Max.Seconds())
	}

	// R9: the item sells exactly its stock.
	{
		want := min(S, len(f.byNumber))
		var probs []string
		if sr.Final.Sold != want {
			probs = append(probs, fmt.Sprintf("sold %d, want min(stock %d, tickets %d) = %d", sr.Final.Sold, S, len(f.byNumber), want))
		}
		if f.orders != want {
			probs = append(probs, fmt.Sprintf("%d orders, want %d", f.orders, want))
		}
		add("R9 the item sells exactly its stock", false, probs, "sold %d = min(stock %d, tickets %d)", sr.Final.Sold, S, len(f.byNumber))
	}

	// R10: never more admitted-and-unused passes than the remaining stock
	// (times the pass factor). With factor 1 every pass that did not
	// expire must have bought: a pass beyond that was live while no unit
	// was left for it.
	{
		refused := 0
		for _, u := range f.admitted {
			if !u.bought {
				refused++
			}
		}
		name := "R10 admitted passes never outnumber the remaining stock"
		switch {
		case a.admin == nil:
			add(name, false, []string{"the admin item view has no waiting_room"}, "")
		case rr.rc.PassFactor != 1:
			skip(name, false, fmt.Sprintf("pass factor %g: passes may exceed the stock by design; %d admitted users did not buy", rr.rc.PassFactor, refused))
		default:
			var probs []string
			if over := a.admin.Admitted - a.admin.Expired - int64(max(f.orders, sr.Final.Sold)); over > 0 && f.soldOut {
				probs = append(probs, fmt.Sprintf("the room admitted %d and %d expired for %d units: %d passes had no unit left (%d users read their pass and did not buy)",
					a.admin.Admitted, a.admin.Expired, S, over, refused))
			}
			add(name, false, probs, "admitted %d, expired %d, for %d orders", a.admin.Admitted, a.admin.Expired, f.orders)
		}
	}

	sr.Invariants = append(sr.Invariants, invs...)
	sr.Pass = true
	for _, inv := range sr.Invariants {
		if !inv.Pass && !inv.Skipped {
			sr.Pass = false
		}
	}
	return nil
}

func phaseOf(v *roomView) string {
	if v == nil {
		return "(no waiting_room)"
	}
	return v.Phase
}

// drawInvariant (R3): the opening order reproduces from the revealed seed,
// and the users saw it: the pre-queue is the tickets taken before the
// opening, the served list is the pre-queue tickets admitted, and they
// were admitted in its order.
func (rr *roomRun) drawInvariant(f roomFacts, pre *roomView, d drawDoc, derr error) Invariant {
	name := "R3 the opening order reproduces from the seed"
	if derr != nil {
		return Invariant{Name: name, Detail: derr.Error()}
	}
	var probs []string
	lottery := d.Lottery == nil || *d.Lottery
	if lottery == rr.rc.NoLottery {
		probs = append(probs, fmt.Sprintf("the draw says lottery %v, the room was set up with %v", lottery, !rr.rc.NoLottery))
	}
	detail := ""
	if lottery {
		if d.Commitment == "" || d.Commitment != pre.Commitment {
			probs = append(probs, fmt.Sprintf("commitment %q, published before the opening %q", d.Commitment, pre.Commitment))
		}
		chk, err := d.Verify()
		switch {
		case err != nil:
			probs = append(probs, err.Error())
		case !chk.CommitmentMatches:
			probs = append(probs, "the revealed seed does not hash to the commitment")
		case !chk.OrderMatches:
			probs = append(probs, fmt.Sprintf("served order differs from the draw at index %d", chk.Mismatch))
		}
		detail = "seed revealed, hashes to the commitment published before the opening; "
	} else {
		// No draw: the document has no seed and lists no pre-queue, and
		// the whole line is served in ticket order (R4 checks it all).
		if d.Seed != "" || len(d.PreQueue) > 0 || len(d.Served) > 0 {
			probs = append(probs, "lottery off, but the draw document has a seed or lists tickets")
		}
		if len(probs) > 0 {
			return Invariant{Name: name, Detail: listSome(probs)}
		}
		return Invariant{Name: name, Pass: true, Detail: "lottery off: no draw, no seed; the whole line is checked FIFO (R4)"}
	}
	for t := int64(1); t <= int64(len(d.PreQueue)); t++ {
		if !f.preQ[t] {
			probs = append(probs, fmt.Sprintf("the pre-queue of %d lacks ticket %d", len(d.PreQueue), t))
			break
		}
	}
	served := map[int64]bool{}
	for _, t := range d.Served {
		served[t] = true
	}
	for t, u := range f.byNumber {
		switch {
		case u.joinEnd.Before(rr.startsAt) && !f.preQ[t]:
			probs = append(probs, fmt.Sprintf("ticket %d joined before starts_at but is not in the pre-queue", t))
		case !f.firstSeen.IsZero() && u.joinStart.After(f.firstSeen) && f.preQ[t]:
			probs = append(probs, fmt.Sprintf("ticket %d joined after a user read its pass but is in the pre-queue", t))
		}
		if f.preQ[t] && u.pass != "" && !served[t] {
			probs = append(probs, fmt.Sprintf("pre-queue ticket %d was admitted but is not in the served list", t))
		}
	}
	line := make([]*roomUser, len(d.Served))
	for k, t := range d.Served {
		line[k] = f.byNumber[t]
	}
	probs = append(probs, lineOrder(line, "served #%d (ticket %d)")...)
	if len(probs) > 0 {
		return Invariant{Name: name, Detail: listSome(probs)}
	}
	unseen := 0
	for _, u := range line {
		if u != nil && u.pass == "" {
			unseen++
		}
	}
	if unseen > 0 {
		detail = fmt.Sprintf("%s%d served tickets never read admitted (the room closed first); ", detail, unseen)
	}
	if len(probs) > 0 {
		return Invariant{Name: name, Detail: listSome(probs)}
	}
	return Invariant{Name: name, Pass: true, Detail: fmt.Sprintf("%s%d of %d pre-queue tickets served in the drawn order, as their users saw it",
		detail, len(d.Served), len(d.PreQueue))}
}
