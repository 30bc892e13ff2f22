package rooms

import (
	"context"
	"errors"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
)

// Ticket is a ticket's status as the API shows it (join and status).
type Ticket struct {
	Ticket        string     `json:"ticket"`
	Number        int64      `json:"number"`
	State         room.State `json:"state"`
	Drawn         bool       `json:"drawn"`
	Position      int64      `json:"position"`
	Ahead         int64      `json:"ahead"`
	ETASeconds    int64      `json:"eta_seconds"`
	Remaining     int64      `json:"remaining"`
	Pass          string     `json:"pass,omitempty"`
	PassExpiresAt *time.Time `json:"pass_expires_at,omitempty"`
	OpensAt       *time.Time `json:"opens_at"`
	PollAfterMS   int64      `json:"poll_after_ms"`
	// Commitment is the commitment of the ticket's line (a lottery room's;
	// empty without one): what its holder checks the draw against
	// (seckill-draw -ticket).
	Commitment string `json:"commitment,omitempty"`
}

// Join gives user a place in item v's line (the place the user has, when
// joining again), in a batch with the joins arriving meanwhile (join.go).
// Errors: ErrNoWaitingRoom, stock.ErrSoldOut, and stock.ErrUnavailable for
// Redis.
func (s *Service) Join(ctx context.Context, v *stock.ItemView, user string) (*Ticket, error) {
	e := s.entry(v.ID)
	if e == nil {
		return nil, ErrNoWaitingRoom
	}
	if !e.ready.Load() {
		rctx, cancel := s.redisCtx(ctx)
		err := s.setup(rctx, e)
		cancel()
		if err != nil {
			return nil, roomErr(err)
		}
	}
	if e.epoch() == (epoch{}) {
		// Before the loop's first read: learn the set-up's epoch now, so
		// the ticket's polls can be answered from the cache.
		rctx, cancel := s.redisCtx(ctx)
		st, err := e.room.Stats(rctx)
		cancel()
		if err == nil {
			e.setEpoch(st.Epoch)
		}
	}
	st, now, err := e.joins.join(ctx, user, s.maxTickets(v)) // bounded by RedisTimeout

	if errors.Is(err, room.ErrNoRoom) {
		e.lost()
	}
	if err != nil {
		return nil, joinErr(err)
	}
	e.noteJoin(st.Ticket, now, v.StartsAt)
	e.markSeen(st.Ticket)
	return s.ticket(e, v, st, now), nil
}

// Status is the status of the ticket string t in item v's room: not found
// when t was not signed here for this item, the item has no room, or Redis
// says the number is another user's (t is of a line that is gone).
//
// A ticket that verifies for a room this process does not know yet was
// issued by another instance that knew it first (rooms are reloaded every
// Config.Reload): the rooms are learned now (one reload for concurrent
// callers, at most one every minUnprovenGap; a poll in between is a 503 to
// retry), so a buyer polling through another instance than
// the join's is never told its ticket does not exist. Only a ticket signed
// with the room key costs a reload: a forged one is refused first.
func (s *Service) Status(ctx context.Context, v *stock.ItemView, t string) (*Ticket, error) {
	number, ep, user, ok := s.tix.open(v.ID, t)
	if !ok {
		return nil, stock.ErrNotFound
	}
	e := s.entry(v.ID)
	if e == nil {
		// Anyone can get a signed ticket by joining, so its room turned off
		// must not make each poll a database read: as for joins, one reload
		// every minUnprovenGap, and the polls in between retry (503: a 404
		// would stop a buyer whose room another instance just made).
		if !s.learnThrottled(ctx, v.ID) {
			return nil, errNotLearned
		}
		if e = s.entry(v.ID); e == nil {
			return nil, stock.ErrNotFound
		}
	}
	now := s.cfg.Now()
	if tk, ok := s.cachedStatus(e, v, number, ep, t, now); ok {
		tk.Commitment = e.line()
		e.markSeen(number) // a live page: Admit does not pass it over (room.MarkSeen)
		return tk, nil
	}
	rctx, cancel := s.redisCtx(ctx)
	defer cancel()
	st, err := e.room.Status(rctx, number, now)
	if errors.Is(err, room.ErrNoRoom) {
		e.lost()
	}
	if err != nil {
		return nil, roomErr(err)
	}
	if st.User != user {
		// The number is someone else's now: t is of a line that is gone.
		return nil, stock.ErrNotFound
	}
	e.markSeen(number)
	tk := s.ticket(e, v, st, now)
	tk.Ticket = t // the holder's string, whichever epoch it names
	return tk, nil
}

// ticket is the API's view of st; the pass is in it (st.Pass), which only
// the holder of the signed ticket string ever asks for. The string names
// the room's epoch as the loop last read it: right after the room was set
// up again the loop may not have read the new one yet, and that string's
// polls ask Redis (which checks its owner) instead of the cache.
func (s *Service) ticket(e *entry, v *stock.ItemView, st room.Status, now time.Time) *Ticket {
	t := &Ticket{Ticket: s.tix.sign(v.ID, st.Ticket, e.epoch(), st.User), Number: st.Ticket, State: st.State, Drawn: st.Drawn,
		Position: st.Position, Ahead: st.Ahead, ETASeconds: st.ETASeconds, Remaining: v.Remaining,
		Pass: st.Pass, OpensAt: v.StartsAt, Commitment: e.line()}
	if st.State == room.StateAdmitted {
		exp := st.PassExpiry.UTC()
		t.PassExpiresAt = &exp
	}
	soldOutFor(e, t)
	if saleEnded(v, now) {
		endTicket(t)
	}
	if !st.Drawn || t.State != room.StateWaiting {
		t.Position, t.Ahead, t.ETASeconds = 0, 0, -1
	}
	s.capETA(e, t)
	t.PollAfterMS = pollAfter(t, now)
	return t
}

// saleEnded: item v's sale window closed at or before now.
func saleEnded(v *stock.ItemView, now time.Time) bool {
	return v.EndsAt != nil && !now.Before(*v.EndsAt)
}

// endTicket makes t read ended once the sale is over: a waiter will never
// be admitted, and a pass can only get sale_ended, so it is not shown.
// Used and expired keep their state (what happened to the pass).
func endTicket(t *Ticket) {
	switch t.State {
	case room.StateWaiting, room.StateAdmitted, room.StateSoldOut, room.StateHeld:
		t.State, t.Pass, t.PassExpiresAt = room.StateEnded, "", nil
	}
}

// pollAfter is the advice for the next poll (docs/API.md, "Waiting room").
func pollAfter(t *Ticket, now time.Time) int64 {
	switch {
	case t.State == room.StateUsed, t.State == room.StateExpired, t.State == room.StateSoldOut,
		t.State == room.StateEnded:
		return 0
	case t.State == room.StateHeld:
		return 5000 // a unit may come back: not often
	case t.State == room.StateWaiting && t.OpensAt != nil && t.OpensAt.Sub(now) > time.Minute:
		return 5000
	case t.State == room.StateWaiting && t.Position > 1000:
		return 2000
	}
	return 1000
}

// checkPass verifies an order's Seckill-Pass for item id and user, in the
// process (no Redis call), and that it was issued in the item's current
// line (the commitment this process holds): a pass of a line the room has
// started over from since (turned off and on, lottery changed) names a
// ticket number that means nothing now, and is room.ErrPassWrongLine. An
// instance that has not reloaded the change yet (within Config.Reload, 1 s)
// still holds the old line: it takes the old line's passes and refuses the
// new one's until then. The errors are room's pass errors.
func (s *Service) checkPass(id int64, user, pass string) (room.Pass, error) {
	p, err := s.verify(id, user, pass)
	if err != nil {
		s.obs.RoomPassRejected(PassRejection(err))
	}
	return p, err
}

// verify checks pass in item id's current line when its room is known
// here; in any line otherwise (the room was just turned off here, or is
// not known here yet: see verifyPass).
func (s *Service) verify(id int64, user, pass string) (room.Pass, error) {
	e := s.entry(id)
	if e == nil {
		return s.pass.Verify(pass, id, user, s.cfg.Now())
	}
	line, err := room.LineOf(e.set.Load().Commitment)
	if err != nil {
		// A stored commitment that is not one: the room cannot be set up
		// either. Fail closed.
		s.log.Warn("waiting room: the stored commitment is not valid; refusing its passes", "item", id, "err", err)
		return room.Pass{}, room.ErrPassForged
	}
	return s.pass.VerifyIn(pass, id, line, user, s.cfg.Now())
}

// PassRejection names a pass error as the API and the metrics do: a pass
// of a line since started over is pass_invalid, as a forged one is.
func PassRejection(err error) string {
	switch {
	case errors.Is(err, room.ErrPassMissing):
		return "pass_required"
	case errors.Is(err, room.ErrPassExpired):
		return "pass_expired"
	case errors.Is(err, room.ErrPassWrongUser):
		return "pass_wrong_user"
	case errors.Is(err, room.ErrPassWrongItem):
		return "pass_wrong_item"
	}
	return "pass_invalid"
}

// consume marks user's pass of ticket used, after its order was taken: its
// slot frees at the next admission round (whose figure of the stock, read
// after its mark, shows the order). Best effort: a pass left live expires by itself, and
// UNIQUE(item, user) already stops a second order.
func (s *Service) consume(ctx context.Context, id, ticket int64, user string) {
	e := s.entry(id)
	if e == nil {
		return
	}
	rctx, cancel := s.redisCtx(ctx)
	defer cancel()
	if err := e.room.ConsumeFor(rctx, ticket, user, s.cfg.Now()); err != nil && !errors.Is(err, room.ErrNotLive) {
		s.log.Warn("waiting room: marking a pass used failed; it expires by itself", "item", id, "ticket", ticket, "err", err)
	}
}

// replayable reports whether user already has an order of item id placed
// with Idempotency-Key key: its keyed retry replays the answer whatever its
// pass says now.
func (s *Service) replayable(ctx context.Context, id int64, user, key string) bool {
	if key == "" || s.orders == nil {
		return false
	}
	o, k, err := s.orders.OrderOf(ctx, id, user)
	return err == nil && o != nil && k == key
}
