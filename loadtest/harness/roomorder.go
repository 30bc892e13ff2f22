package harness

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// lineOrder checks tickets in the order the room says it admitted them:
// each seen admission no earlier than the one before it (both times from
// the room's clock, exact), and no ticket still read waiting after a later
// one in line was certainly admitted: after the answer that showed the
// later one its pass had ended (the admission time itself is the loop's
// clock before its script ran, a little early). A ticket whose user never
// read its pass (the room closed, or it expired, before the next poll) is
// not a fault by itself. label formats a place (1-based) and a ticket
// number.
func lineOrder(line []*roomUser, label string) []string {
	var probs []string
	// firstLater[k]: the earliest answer showing a pass among line[k:].
	firstLater := make([]time.Time, len(line)+1)
	for k := len(line) - 1; k >= 0; k-- {
		firstLater[k] = firstLater[k+1]
		if u := line[k]; u != nil && u.pass != "" && (firstLater[k].IsZero() || u.admittedSeen.Before(firstLater[k])) {
			firstLater[k] = u.admittedSeen
		}
	}
	var prev *roomUser
	for k, u := range line {
		if u == nil {
			probs = append(probs, fmt.Sprintf(label+" is no user's ticket", k+1, int64(0)))
			continue
		}
		if u.pass == "" {
			if t := firstLater[k+1]; !t.IsZero() && u.lastLive.After(t) {
				probs = append(probs, fmt.Sprintf(label+" still read waiting %.3fs after a later ticket read its pass",
					k+1, u.number, u.lastLive.Sub(t).Seconds()))
			}
			continue
		}
		if prev != nil && u.admitted.Before(prev.admitted) {
			probs = append(probs, fmt.Sprintf(label+" admitted before the ticket ahead of it (%d)", k+1, u.number, prev.number))
		}
		prev = u
	}
	return probs
}

// fifoInvariant (R4): after the opening, tickets are admitted in number
// order, all after the pre-queue's.
func (rr *roomRun) fifoInvariant(f roomFacts) Invariant {
	name := "R4 FIFO after the opening"
	var post []*roomUser
	var lastPre time.Time
	for t, u := range f.byNumber {
		if !f.preQ[t] {
			post = append(post, u)
		} else if u.pass != "" && u.admitted.After(lastPre) {
			lastPre = u.admitted
		}
	}
	slices.SortFunc(post, func(a, b *roomUser) int { return cmp.Compare(a.number, b.number) })
	probs := lineOrder(post, "later ticket #%d (%d)")
	n := 0
	for _, u := range post {
		if u.pass == "" {
			continue
		}
		n++
		if u.admitted.Before(lastPre) {
			probs = append(probs, fmt.Sprintf("ticket %d admitted before the last pre-queue admission", u.number))
		}
	}
	if n == 0 && len(probs) == 0 {
		return Invariant{Name: name, Skipped: true, Detail: fmt.Sprintf("no ticket taken after the opening was admitted (%d such tickets)", len(post))}
	}
	if len(probs) > 0 {
		return Invariant{Name: name, Detail: listSome(probs)}
	}
	return Invariant{Name: name, Pass: true, Detail: fmt.Sprintf("%d of %d later tickets admitted in number order, after the pre-queue", n, len(post))}
}

// rateInvariants (R5): no second admits more than R+10 %; each full
// second admits R±10 % (timing). A full second is neither the first
// second with admissions nor one in which admissions reached the line's
// end (limit: the stock, or every ticket): from then on the cap of live
// passes or the empty line holds admission back, not the rate.
func (rr *roomRun) rateInvariants(perSecond []int, limit int) []Invariant {
	R := float64(rr.rc.Rate)
	lo, hi := 0.9*R, 1.1*R
	var over []string
	for s, n := range perSecond {
		if float64(n) > hi {
			over = append(over, fmt.Sprintf("second %d: %d", s, n))
		}
	}
	capInv := Invariant{Name: "R5a no second admits more than R+10%", Pass: len(over) == 0,
		Detail: fmt.Sprintf("R %d; per second %s", rr.rc.Rate, fmtCounts(perSecond))}
	if len(over) > 0 {
		capInv.Detail = fmt.Sprintf("R %d, above %.0f: %s", rr.rc.Rate, hi, strings.Join(over, ", "))
	}
	name := "R5b admissions per full second within ±10% of R"
	end, sum := len(perSecond), 0
	for k, n := range perSecond {
		if sum += n; sum >= limit {
			end = k
			break
		}
	}
	if end < 2 {
		return []Invariant{capInv, {Name: name, Skipped: true, Timing: true,
			Detail: fmt.Sprintf("no full second of admissions: per second %s, the line's end (%d) reached in second %d", fmtCounts(perSecond), limit, end)}}
	}
	full := perSecond[1:end]
	var bad []string
	for k, n := range full {
		if float64(n) < lo || float64(n) > hi {
			bad = append(bad, fmt.Sprintf("second %d: %d", k+1, n))
		}
	}
	inv := Invariant{Name: name, Timing: true, Pass: len(bad) == 0,
		Detail: fmt.Sprintf("%d full seconds, min %d max %d (R %d)", len(full), slices.Min(full), slices.Max(full), rr.rc.Rate)}
	if len(bad) > 0 {
		inv.Detail = fmt.Sprintf("R %d, outside [%.0f, %.0f]: %s", rr.rc.Rate, lo, hi, strings.Join(bad, ", "))
	}
	return []Invariant{capInv, inv}
}

func fmtCounts(xs []int) string {
	parts := make([]string, 0, min(len(xs), 12))
	for k, n := range xs {
		if k == 12 {
			parts = append(parts, fmt.Sprintf("... (%d seconds)", len(xs)))
			break
		}
		parts = append(parts, fmt.Sprint(n))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
