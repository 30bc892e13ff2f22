package rooms

import (
	"context"
	"time"
)

// lost records that Redis has no room for e, which must be set up again;
// if this loop had seen it there, the line was lost (holdRebuilt).
func (e *entry) lost() {
	e.ready.Store(false)
	if e.stats.Load() != nil {
		c := e.set.Load().Commitment
		e.lostLine.Store(&c)
	}
}

// rebuiltAfter is how old a room's row must be for a room this instance
// creates in Redis to count as rebuilt (Redis lost it), not new: a room
// just turned on is set up by every instance within a reload or two.
const rebuiltAfter = 10 * time.Second

// holdRebuilt holds the admission of a room just created in Redis for a
// line that may have issued passes already (redteam #7): this loop saw the
// line in Redis and then found it gone, or its row is older than
// rebuiltAfter (an instance started since), and its sale has opened: Redis
// lost the room. The
// passes issued before the loss still verify (same line), and the new
// room's count of live passes is empty: admitting at once would issue a
// second set for the same units. Every old pass has expired one pass TTL
// from now; the rebuilt room admits nobody until then (a keyed order
// still buys with an old pass meanwhile).
func (s *Service) holdRebuilt(ctx context.Context, e *entry, r *row) error {
	now := s.cfg.Now()
	if l := e.lostLine.Load(); (l == nil || *l != r.Commitment) && now.Sub(r.CreatedAt) < rebuiltAfter {
		return nil // a new line, as far as this instance knows
	}
	v := e.view.Load()
	if v == nil {
		var err error
		if v, err = s.shop.ItemView(ctx, e.id); err != nil {
			return err
		}
	}
	if v.StartsAt != nil && now.Before(*v.StartsAt) {
		return nil // not opened: no pass was issued
	}
	s.log.Warn("waiting room: set up again in redis after a loss; admitting nobody until the passes issued before it expire",
		"item", e.id, "until", now.Add(r.passTTL()))
	return e.room.HoldAdmission(ctx, now.Add(r.passTTL()))
}
