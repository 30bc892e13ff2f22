package rooms

import (
	"context"
	"errors"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
)

// An order's passage through the waiting room, the one door the order
// path uses:
//
//	a, err := rooms.Admit(req, pass) // the pass, in the process: no I/O
//	... the per-user rate limit ...
//	err = a.Confirm(ctx)             // a keyed retry without a live pass: the database's word
//	req.Pass = a.Passed()
//	o, replayed, err := shop.PlaceOrder(ctx, req)
//	if err != nil { err = a.Refused(ctx, err) } else { a.Done(ctx, replayed) }
//
// Admit refuses what the pass alone refuses (forged, another user's or
// item's, a line started over from, none for a room known here), so the
// rate limiter and the database see only orders that may buy. The sale
// itself checks the database's rooms whatever Admit said (shop: the
// order's transaction, lua-async's room mark in the gate): a room made on
// another instance a moment ago refuses there, and Refused learns it.

// Admission is one order's answer from the waiting room, from Admit.
type Admission interface {
	// Replay reports whether Confirm has a database read to make: the
	// caller puts it behind its rate limit (a fresh key is free to make).
	Replay() bool
	// Confirm finishes a keyed retry's admission (Replay): it passes if
	// the user has an order of the item under the request's key, whose
	// answer the sale then replays; otherwise the error is the pass's
	// refusal.
	Confirm(ctx context.Context) error
	// Passed reports whether the order carries a verified pass (or is a
	// confirmed retry): the sale then skips its own check for a room.
	Passed() bool
	// Refused is the answer to the sale's refusal err of the admitted
	// order. A refusal for want of a pass (stock.ErrPassRequired) means
	// the item has a room this process did not know of: it learns the
	// rooms now, and a pass the order did carry is answered with its own
	// refusal. Any other err is returned as it is.
	Refused(ctx context.Context, err error) error
	// Done is told the admitted order was taken (replayed: it was a keyed
	// retry's replay, which used nothing). A pass that bought marks its
	// ticket used, so its slot frees at the next admission round; a pass
	// for a room set up elsewhere a moment ago makes this process learn
	// the room first, so that its use is recorded.
	Done(ctx context.Context, replayed bool)
}

// NoRooms is the Admission of every order in a service without waiting
// rooms: nothing to pass, nothing to learn.
var NoRooms Admission = noRooms{}

type noRooms struct{}

func (noRooms) Replay() bool                               { return false }
func (noRooms) Confirm(context.Context) error              { return nil }
func (noRooms) Passed() bool                               { return false }
func (noRooms) Refused(_ context.Context, err error) error { return err }
func (noRooms) Done(context.Context, bool)                 {}

// admission is Service.Admit's Admission.
type admission struct {
	s      *Service
	req    stock.OrderRequest
	pass   string
	ticket int64 // the pass's ticket; 0 without a valid pass
	passed bool
	// replay: a keyed order whose pass has expired, or that carries none
	// (placed under the key before the room was turned on): it passes
	// only as the retry of an order already taken (Confirm).
	replay error
}

// Admit checks req's pass (the Seckill-Pass header; "" without one) for
// its item and user, in the process. An item not known here to have a room
// needs none; a valid pass for it still counts (its room was set up on
// another instance a moment ago). The errors are room's pass errors.
func (s *Service) Admit(req stock.OrderRequest, pass string) (Admission, error) {
	a := &admission{s: s, req: req, pass: pass}
	if !s.Roomed(req.ItemID) {
		if pass != "" {
			if p, err := s.verifyPass(req.ItemID, req.UserID, pass); err == nil {
				a.ticket, a.passed = p.Ticket, true
			}
		}
		return a, nil
	}
	p, err := s.checkPass(req.ItemID, req.UserID, pass)
	if err == nil {
		a.ticket, a.passed = p.Ticket, true
		return a, nil
	}
	// Only a genuine pass that has expired, or none, can be a retry's:
	// the database is not asked on behalf of forged ones, nor of a
	// pass-less order without a key.
	if req.IdempotencyKey != "" && (errors.Is(err, room.ErrPassExpired) || errors.Is(err, room.ErrPassMissing)) {
		a.replay = err
		return a, nil
	}
	return nil, err
}

func (a *admission) Replay() bool { return a.replay != nil }

func (a *admission) Confirm(ctx context.Context) error {
	if a.replay == nil {
		return nil
	}
	if !a.s.replayable(ctx, a.req.ItemID, a.req.UserID, a.req.IdempotencyKey) {
		return a.replay
	}
	a.passed, a.replay = true, nil
	return nil
}

func (a *admission) Passed() bool { return a.passed }

func (a *admission) Refused(ctx context.Context, err error) error {
	if !errors.Is(err, stock.ErrPassRequired) {
		return err
	}
	var passErr error
	if a.pass != "" {
		_, passErr = a.s.verifyPass(a.req.ItemID, a.req.UserID, a.pass)
	}
	a.s.refused(ctx, a.req.ItemID, passErr)
	if passErr != nil {
		return passErr
	}
	return err
}

func (a *admission) Done(ctx context.Context, replayed bool) {
	if replayed || a.ticket == 0 {
		return
	}
	a.s.Learn(ctx, a.req.ItemID)
	a.s.consume(ctx, a.req.ItemID, a.ticket, a.req.UserID)
}
