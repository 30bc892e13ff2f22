package harness

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// RoomReport summarises a room-mode run of one item.
type RoomReport struct {
	Users    int           `json:"users"` // joined before the opening (planned)
	Late     int           `json:"late"`  // joined after it (planned)
	Tickets  int           `json:"tickets"`
	PreQueue int           `json:"pre_queue"` // the draw's pre-queue
	Rate     int           `json:"admit_per_second"`
	PassTTL  time.Duration `json:"pass_ttl_ns"`
	OpensAt  time.Time     `json:"opens_at"`
	Lottery  bool          `json:"lottery"`

	Admitted int            `json:"admitted"` // users who read their pass
	Outcomes map[string]int `json:"outcomes"` // bought, sold_out, or why a user never learned

	Polls       int          `json:"polls"`
	PollsPerSec float64      `json:"polls_per_sec"`
	Join        LatencyStats `json:"join_latency"`
	Poll        LatencyStats `json:"poll_latency"`
	// PollLag is how late polls were sent after poll_after_ms (the
	// worker pool's backlog): large when the client cannot keep up.
	PollLag LatencyStats `json:"poll_lag"`

	// PerSecond counts admissions per second of the room's clock, from
	// the first admission's second, derived from each pass's expiry.
	PerSecond      []int     `json:"admitted_per_second"`
	FirstAdmission time.Time `json:"first_admission"`
	SubSecond      bool      `json:"sub_second"` // pass expiries carried milliseconds
	// LastUnit is when the last new order was acknowledged; LearnedSoldOut
	// how long after it each waiting user read sold_out.
	LastUnit       time.Time    `json:"last_unit"`
	LearnedSoldOut LatencyStats `json:"learned_sold_out"`

	Errors map[string]int `json:"errors"` // answers without a verdict, by request, status and code
	Admin  *roomView      `json:"admin_view,omitempty"`
}

func (rr *roomRun) summary(sr *StrategyReport, f roomFacts, a afterRun) *RoomReport {
	rep := &RoomReport{Users: rr.cfg.Users, Late: rr.rc.Late, Tickets: len(f.byNumber), PreQueue: len(f.preQ),
		Rate: rr.rc.Rate, PassTTL: rr.rc.PassTTL, OpensAt: rr.startsAt, Lottery: !rr.rc.NoLottery,
		Admitted: len(f.admitted), Outcomes: map[string]int{}, Polls: int(rr.polls.Load()),
		Join: latencyStats(rr.joins), Poll: latencyStats(rr.pollLat), PollLag: latencyStats(rr.lags),
		FirstAdmission: f.firstAdmit, SubSecond: rr.subSecond.Load(), LastUnit: f.lastUnit,
		Errors: rr.errorsBy, Admin: a.admin}
	if sr.Duration > 0 {
		rep.PollsPerSec = float64(rep.Polls) / sr.Duration.Seconds()
	}
	var learned []time.Duration
	for i := range rr.users {
		u := &rr.users[i]
		rep.Outcomes[u.outcome]++
		if f.soldOut && !u.soldOutSeen.IsZero() {
			learned = append(learned, u.soldOutSeen.Sub(f.lastUnit))
		}
	}
	rep.LearnedSoldOut = latencyStats(learned)
	if len(f.admitted) > 0 {
		first := f.firstAdmit.Unix()
		for _, u := range f.admitted {
			s := int(u.admitted.Unix() - first)
			for len(rep.PerSecond) <= s {
				rep.PerSecond = append(rep.PerSecond, 0)
			}
			rep.PerSecond[s]++
		}
	}
	return rep
}

// writeRoomText prints the room's summary (before the invariants).
func writeRoomText(w io.Writer, r *RoomReport) {
	fmt.Fprintf(w, "room: R %d/s, pass %s, lottery %v, opens %s; users %d before the opening + %d after, %d tickets, pre-queue %d\n",
		r.Rate, r.PassTTL, r.Lottery, r.OpensAt.UTC().Format("15:04:05"), r.Users, r.Late, r.Tickets, r.PreQueue)
	keys := slices.Sorted(maps.Keys(r.Outcomes))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, r.Outcomes[k])
	}
	fmt.Fprintf(w, "room outcomes: admitted %d; %s\n", r.Admitted, strings.Join(parts, " "))
	fmt.Fprintf(w, "room admissions per second (from %s, %s precision): %s\n", r.FirstAdmission.UTC().Format("15:04:05"),
		map[bool]string{true: "ms", false: "second"}[r.SubSecond], fmtCounts(r.PerSecond))
	fmt.Fprintf(w, "room polls: %d (%.0f/s); join p50 %s p99 %s; poll p50 %s p99 %s; poll sent late p50 %s p99 %s\n",
		r.Polls, r.PollsPerSec, ms(r.Join.P50), ms(r.Join.P99), ms(r.Poll.P50), ms(r.Poll.P99), ms(r.PollLag.P50), ms(r.PollLag.P99))
	if r.LearnedSoldOut.Count > 0 {
		fmt.Fprintf(w, "room sold out: %d users read sold_out p50 %.2fs p99 %.2fs max %.2fs after the last unit\n",
			r.LearnedSoldOut.Count, r.LearnedSoldOut.P50.Seconds(), r.LearnedSoldOut.P99.Seconds(), r.LearnedSoldOut.Max.Seconds())
	}
	if len(r.Errors) > 0 {
		keys := slices.Sorted(maps.Keys(r.Errors))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s:%d", k, r.Errors[k])
		}
		fmt.Fprintf(w, "room answers without a verdict (retried): %s\n", strings.Join(parts, ", "))
	}
	if a := r.Admin; a != nil {
		fmt.Fprintf(w, "room admin view: phase %s closed %v tickets %d waiting %d admitted %d used %d expired %d live %d\n",
			a.Phase, a.Closed, a.Tickets, a.Waiting, a.Admitted, a.Used, a.Expired, a.Live)
	}
}
