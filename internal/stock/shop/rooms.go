package shop

import (
	"context"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/stock/store"
)

// Waiting rooms (internal/rooms) are an admission concern in front of the
// shop, but whether an item has one is the database's (item_rooms), and the
// sale is where it is enforced for orders without a verified pass
// (stock.OrderRequest.Pass), so a room turned on at one instance holds at
// every other one from the moment its change committed:
//
//   - lua and lock: the UPDATE that takes an order's unit finds no room
//     (store.noRoom), in the order's transaction; a refused order is
//     answered alone (its group-commit batch is settled without it) and a
//     lua reservation is handed back.
//   - lua-async: its 202 is decided in Redis, so its gate carries the room
//     (gate.MarkRoom), marked under the item's row lock before the change
//     commits, and restored by every rebuild.

// ChangeRoom runs write (a change of item id's waiting room) in one
// transaction holding the item's row lock and, for a lua-async item, marks
// its gate with the room before the commit. A room turned off is unmarked
// after the commit (until then orders without a pass are refused, which
// is safe), and so is a mark left by a change that failed; should that
// fail too, the next order refused by the stale mark clears it
// (placeAsync).
func (s *Service) ChangeRoom(ctx context.Context, id int64, write store.WithItem) error {
	it, err := s.routing(ctx, id)
	if err != nil {
		return err
	}
	if !it.Strategy.Queued() {
		return s.store.ChangeRoom(ctx, id, write, nil)
	}
	roomed := false
	err = s.store.ChangeRoom(ctx, id, write, func(ctx context.Context, on bool) error {
		roomed = on
		if !on {
			return nil // unmarked once committed, below
		}
		return s.gate.MarkRoom(ctx, id, it.Buckets, true)
	})
	if err == nil && roomed {
		return nil
	}
	if serr := s.syncRoomMark(context.WithoutCancel(ctx), id); serr != nil {
		s.cfg.Logger.WarnContext(ctx, "waiting room mark not synced with the database; the next order it refuses clears it", "item", id, "err", serr)
	}
	return err
}

// syncRoomMark sets a lua-async item's room mark from the database, under
// the item's row lock.
func (s *Service) syncRoomMark(ctx context.Context, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, returnTimeout)
	defer cancel()
	it, err := s.routing(ctx, id)
	if err != nil {
		return err
	}
	return s.store.ChangeRoom(ctx, id, func(context.Context, *gorm.DB, int64) error { return nil },
		func(ctx context.Context, roomed bool) error { return s.gate.MarkRoom(ctx, id, it.Buckets, roomed) })
}

// staleRoomMark reports whether a lua-async order refused by the room mark
// of item id was refused by a mark the database no longer backs (a room
// turned off whose unmarking failed), and clears it then: the order may be
// tried again. A database that cannot say keeps the refusal.
func (s *Service) staleRoomMark(ctx context.Context, id int64) bool {
	roomed, err := s.store.Roomed(ctx, id)
	if err != nil || roomed {
		return false
	}
	if err := s.syncRoomMark(ctx, id); err != nil {
		s.cfg.Logger.WarnContext(ctx, "stale waiting room mark not cleared", "item", id, "err", err)
		return false
	}
	s.cfg.Logger.InfoContext(ctx, "stale waiting room mark cleared", "item", id)
	return true
}
