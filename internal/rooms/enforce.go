package rooms

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
)

// What this process knows of the rooms (Roomed) is a copy, reloaded every
// second: the order path checks passes from it, cheaply, but the sale
// itself enforces the database's rooms (shop: the order's transaction, or
// lua-async's room mark in the gate). An order this process let through
// without a pass, for a room set up on another instance a moment ago, is
// refused there; refused then brings the copy up to date at once, so the
// item's next orders are refused here, from memory. A pass sent for an
// item not known to have a room is verified anyway (verifyPass), so a
// buyer admitted a moment ago buys through any instance.

// refused is told that the shop refused an order of item id for want of a
// pass: the item has a room this process did not know of yet. passErr is
// why the pass the order carried does not verify (nil: it carried none).
// It counts the rejection and learns the rooms now (Learn).
func (s *Service) refused(ctx context.Context, id int64, passErr error) {
	reason := "pass_required"
	if passErr != nil {
		reason = PassRejection(passErr)
	}
	s.obs.RoomPassRejected(reason)
	s.Learn(ctx, id)
}

// Learn reloads the rooms now unless item id's is known here (one reload
// for concurrent callers): the item was found to have a room this process
// did not know of (a refusal, or a pass that bought it).
func (s *Service) Learn(ctx context.Context, id int64) {
	if s.Roomed(id) {
		return
	}
	_, _, _ = s.reloading.Do("reload", func() (any, error) {
		// Shared: not cut short by the first caller's client going away.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*s.cfg.Reload)
		defer cancel()
		s.reloadNow(ctx)
		return nil, nil
	})
}

// minUnprovenGap is how often requests with nothing to show that an item
// has a room (joins) may make this process reload the rooms.
const minUnprovenGap = 100 * time.Millisecond

// LearnUnproven is Learn for a join of item id, whose room this process
// does not know: the room may have been made through another instance
// within the last reload (Config.Reload), and the buyer is better told
// their place than "no waiting room". Nothing shows the item has one (a
// refused order or a signed ticket does), so at most one such reload
// happens every minUnprovenGap: joins of items without a room cannot make
// every request a database read.
func (s *Service) LearnUnproven(ctx context.Context, id int64) { s.learnThrottled(ctx, id) }

// learnThrottled is LearnUnproven; false: a reload ran less than
// minUnprovenGap ago, and this call did not reload.
func (s *Service) learnThrottled(ctx context.Context, id int64) bool {
	if s.Roomed(id) {
		return true
	}
	now := s.cfg.Now().UnixNano()
	last := s.unproven.Load()
	if now-last < int64(minUnprovenGap) || !s.unproven.CompareAndSwap(last, now) {
		return false
	}
	s.Learn(ctx, id)
	return true
}

// errNotLearned: a signed ticket's room is not known here, and the rooms
// were reloaded too recently to look again (learnThrottled); the poll is
// retried.
var errNotLearned = fmt.Errorf("waiting room: %w: the ticket's room is not known here yet; retry", stock.ErrUnavailable)

// verifyPass verifies pass for item id and user like checkPass, without
// counting a rejection: for an order of an item not known here to have a
// room, whose pass decides only whether the sale needs to check for one.
// Its line is checked only if the room became known here meanwhile: an
// unknown room's line is not known either (a reload away, as the room is).
func (s *Service) verifyPass(id int64, user, pass string) (room.Pass, error) {
	return s.verify(id, user, pass)
}
