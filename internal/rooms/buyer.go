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
	st, now, err := e.joins.join(ctx, user, s.maxTickets(v)) // bounded by RedisTimeout

	if errors.Is(err, room.ErrNoRoom) {
		e.ready.Store(false)
	}
	if err != nil {
		return nil, joinErr(err)
	}
	e.noteJoin(st.Ticket, now, v.StartsAt)
	return s.ticket(v, st, now), nil
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
	number, user, ok := s.tix.open(v.ID, t)
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
	if tk, ok := s.cachedStatus(e, v, number, t, now); ok {
		return tk, nil
	}
	rctx, cancel := s.redisCtx(ctx)
	defer cancel()
	st, err := e.room.Status(rctx, number, now)
	if errors.Is(err, room.ErrNoRoom) {
		e.ready.Store(false)
	}
	if err != nil {
		return nil, roomErr(err)
	}
	if st.User != user {
		// The number is someone else's now: t is of a line that is gone.
		return nil, stock.ErrNotFound
	}
	return s.ticket(v, st, now), nil
}

// ticket is the API's view of st; the pass is in it (st.Pass), which only
// the holder of the signed ticket string ever asks for.
func (s *Service) ticket(v *stock.ItemView, st room.Status, now time.Time) *Ticket {
	t := &Ticket{Ticket: s.tix.sign(v.ID, st.Ticket, st.User), Number: st.Ticket, State: st.State, Drawn: st.Drawn,
		Position: st.Position, Ahead: st.Ahead, ETASeconds: st.ETASeconds, Remaining: v.Remaining,
		Pass: st.Pass, OpensAt: v.StartsAt}
	if st.State == room.StateAdmitted {
		exp := st.PassExpiry.UTC()
		t.PassExpiresAt = &exp
	}
	if !st.Drawn || st.State != room.StateWaiting {
		t.Position, t.Ahead, t.ETASeconds = 0, 0, -1
	}
	t.PollAfterMS = pollAfter(t, now)
	return t
}

// pollAfter is the advice for the next poll (ROOM-API.md).
func pollAfter(t *Ticket, now time.Time) int64 {
	switch {
	case t.State == room.StateUsed, t.State == room.StateExpired, t.State == room.StateSoldOut:
		return 0
	case t.State == room.StateWaiting && t.OpensAt != nil && t.OpensAt.Sub(now) > time.Minute:
		return 5000
	case t.State == room.StateWaiting && t.Position > 1000:
		return 2000
	}
	return 1000
}

// Draw is item id's public draw document (ROOM-API.md).
type Draw struct {
	ItemID     int64   `json:"item_id"`
	Lottery    bool    `json:"lottery"`
	Commitment string  `json:"commitment,omitempty"`
	Seed       *string `json:"seed"`
	PreQueue   []int64 `json:"pre_queue"`
	Served     []int64 `json:"served"`
}

// Draw reads item id's draw. A FIFO room (lottery off) has none: its
// document says so, with no seed.
func (s *Service) Draw(ctx context.Context, id int64) (*Draw, error) {
	e := s.entry(id)
	if e == nil {
		return nil, ErrNoWaitingRoom
	}
	if !e.set.Load().Lottery {
		return &Draw{ItemID: id, PreQueue: []int64{}, Served: []int64{}}, nil
	}
	rctx, cancel := s.redisCtx(ctx)
	defer cancel()
	d, err := e.room.Draw(rctx)
	if err != nil {
		return nil, roomErr(err)
	}
	out := &Draw{ItemID: id, Lottery: true, Commitment: d.Commitment, PreQueue: d.PreQueue, Served: d.Served}
	if d.Seed != "" {
		out.Seed = &d.Seed
	}
	return out, nil
}

// CheckPass verifies an order's Seckill-Pass for item id and user, in the
// process (no Redis call), and that it was issued in the item's current
// line (the commitment this process holds): a pass of a line the room has
// started over from since (turned off and on, lottery changed) names a
// ticket number that means nothing now, and is room.ErrPassWrongLine. An
// instance that has not reloaded the change yet (within Config.Reload, 1 s)
// still holds the old line: it takes the old line's passes and refuses the
// new one's until then. The errors are room's pass errors.
func (s *Service) CheckPass(id int64, user, pass string) (room.Pass, error) {
	p, err := s.verify(id, user, pass)
	if err != nil {
		s.obs.RoomPassRejected(PassRejection(err))
	}
	return p, err
}

// verify checks pass in item id's current line when its room is known
// here; in any line otherwise (the room was just turned off here, or is
// not known here yet: see VerifyPass).
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

// Consume marks user's pass of ticket used, after its order was taken: its
// slot frees at the next admission round (whose figure of the stock, read
// after its mark, shows the order). Best effort: a pass left live expires by itself, and
// UNIQUE(item, user) already stops a second order.
func (s *Service) Consume(ctx context.Context, id, ticket int64, user string) {
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

// Replayable reports whether user already has an order of item id placed
// with Idempotency-Key key: its keyed retry replays the answer whatever its
// pass says now.
func (s *Service) Replayable(ctx context.Context, id int64, user, key string) bool {
	if key == "" || s.orders == nil {
		return false
	}
	o, k, err := s.orders.OrderOf(ctx, id, user)
	return err == nil && o != nil && k == key
}
