package harness

import "time"

// observe records what an answer says about the user's ticket and checks
// it against what earlier answers said.
func (rr *roomRun) observe(u *roomUser, v *ticketView, c call) {
	if v.Ticket != u.ticket || v.Number != u.number {
		u.problem("ticket %q/%d answered as %q/%d", u.ticket, u.number, v.Ticket, v.Number)
	}
	switch v.State {
	case stateWaiting, stateAdmitted, stateExpired, stateUsed, stateSoldOut, stateHeld, stateEnded:
	default:
		u.problem("unknown state %q", v.State)
	}
	if finalState(u.state) && v.State != u.state {
		u.problem("state %s after %s", v.State, u.state)
	}
	if finalState(v.State) && v.PollAfterMS != 0 {
		u.problem("final state %s with poll_after_ms %d", v.State, v.PollAfterMS)
	}
	switch v.State {
	case stateWaiting, stateAdmitted:
		if c.start.After(u.lastLive) {
			u.lastLive = c.start
		}
	case stateSoldOut, stateHeld:
		if u.soldOutSeen.IsZero() {
			u.soldOutSeen = c.end
			rr.soldOut.Add(1)
		}
	}
	if v.State == stateAdmitted {
		rr.observePass(u, v, c)
	}
	u.state = v.State
	u.polls++
}

func (rr *roomRun) observePass(u *roomUser, v *ticketView, c call) {
	if v.Pass == "" {
		u.problem("admitted without a pass")
		return
	}
	at, sub, err := admittedAt(v.PassExpiresAt, rr.rc.PassTTL)
	if err != nil {
		u.problem("%v", err)
		return
	}
	if sub {
		rr.subSecond.Store(true)
	}
	if u.pass == "" {
		u.pass, u.admitted, u.admittedSeen = v.Pass, at, c.end
		rr.admitted.Add(1)
		return
	}
	if v.Pass != u.pass || !at.Equal(u.admitted) {
		u.problem("a second pass (admitted %s, then %s)", u.admitted.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
	}
}
