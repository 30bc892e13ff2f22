package rooms

import (
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
)

// A status poll is the hot path of a room (a waiting page polls every
// second), so a waiting ticket is answered from memory, with no Redis call:
// the admission loop reads the room's counters every tick (Stats: phase,
// closed, tickets, pre-queue, head, rate), and a ticket's serve number is
// either its own number (joined after the opening, or a room without a
// lottery) or its place in the draw, which never changes once the room
// opened and is computed here once from the seed and the transcript (DrawOrder). Only a
// ticket whose serve number the line has reached (admitted, expired or
// used), one newer than the counters, or counters older than
// maxStatsAge, asks Redis.

// maxStatsAge is how old the loop's counters may be to answer a poll.
const maxStatsAge = 400 * time.Millisecond

// epoch is the epoch of e's room as last read (the loop, or a join
// before the loop's first read); zero before.
func (e *entry) epoch() epoch {
	if ep := e.ep.Load(); ep != nil {
		return *ep
	}
	return epoch{}
}

// setEpoch records the epoch of e's room read from Redis.
func (e *entry) setEpoch(s string) {
	if ep := epochOf(s); ep != e.epoch() {
		e.ep.Store(&ep)
	}
}

// rankOf is the serve number of pre-queue ticket t (1..pre) in r's draw.
// The draw depends on the pre-queue's transcript: a room opened without
// one (by an older build) is answered by Redis.
func (e *entry) rankOf(r *row, pre int64, transcript string, t int64) (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rankFor != r.Commitment+transcript || int64(len(e.rank)) != pre {
		seed, err := r.seed()
		if err != nil {
			return 0, false
		}
		tr, err := room.ParseTranscript(transcript)
		if err != nil {
			return 0, false
		}
		tickets := make([]int64, pre)
		for i := range tickets {
			tickets[i] = int64(i + 1)
		}
		order, err := room.DrawOrder(seed, tr, tickets)
		if err != nil {
			return 0, false
		}
		e.rank = make([]uint32, pre)
		for i, tk := range order {
			e.rank[tk-1] = uint32(i + 1)
		}
		e.rankFor = r.Commitment + transcript
	}
	if t < 1 || t > int64(len(e.rank)) {
		return 0, false
	}
	return int64(e.rank[t-1]), true
}

// cachedStatus answers ticket number (signed string t, joined in the
// room's set-up ep) from the loop's counters when it is waiting; ok false:
// ask Redis. A string of another set-up (its line is gone: the room was
// turned off and on, or Redis lost it) is never answered here: its number
// may be another user's now, which only Redis knows (Status then says not
// found).
func (s *Service) cachedStatus(e *entry, v *stock.ItemView, number int64, ep epoch, t string, now time.Time) (*Ticket, bool) {
	st := e.stats.Load()
	if st == nil || !e.ready.Load() || now.Sub(time.Unix(0, e.statsAt.Load())) > maxStatsAge || number > st.Tickets ||
		ep == (epoch{}) || e.epoch() != ep {
		return nil, false
	}
	r := e.set.Load()
	head := st.Tickets - st.Waiting
	var serve int64 // 0: in the pre-queue, not drawn yet
	switch {
	case st.Phase == "pre" && (v.StartsAt == nil || !now.Before(*v.StartsAt)):
		return nil, false // opening now: Redis knows whether it is drawn
	case st.Phase == "pre":
	case st.Phase != "open":
		return nil, false // the opening is being written
	case number > st.PreQueue:
		serve = number
	default:
		var ok bool
		if serve, ok = e.rankOf(r, st.PreQueue, st.Transcript, number); !ok {
			return nil, false
		}
	}
	if serve > 0 && serve <= head {
		return nil, false // admitted, expired or used: Redis knows which
	}
	tk := &Ticket{Ticket: t, Number: number, State: room.StateWaiting, Drawn: serve > 0, ETASeconds: -1,
		Remaining: v.Remaining, OpensAt: v.StartsAt}
	switch {
	case saleEnded(v, now):
		tk.State = room.StateEnded
	case st.Closed:
		tk.State = room.StateSoldOut
		soldOutFor(e, tk)
	case serve > 0:
		tk.Position = serve - head
		tk.Ahead = tk.Position - 1
		if st.Rate > 0 {
			tk.ETASeconds = (tk.Position + st.Rate - 1) / st.Rate
		}
	}
	s.capETA(e, tk)
	tk.PollAfterMS = pollAfter(tk, now)
	return tk, true
}
