package rooms

import (
	"context"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
)

// A sold-out room is closed, but a unit can still come back: an unpaid
// order cancelled or expired, a cancel whose unit is not back in the gate
// yet, a lua-async order still queued whose write fails. Telling the
// waiters a final sold_out then (their pages stop polling) left the
// returned unit to tickets nobody watched (redteam #4). So while a unit
// may come back the waiters read held (polling every 5 s), and sold_out,
// final, only once none can.
//
// The loop asks the database once a second while the room is closed:
// does the item have an order that is created (unpaid) or cancelled with
// its unit not yet returned? One indexed read (orders_item_user's item_id
// prefix), stopping at the first such row. Queued lua-async writes are not
// in the database yet: a closed room counts as held for heldGrace after it
// closed, which the writers' flush (milliseconds) is well within; a write
// that fails later hands its unit back, and the room resumes then like
// for a restock. A restock resumes a room sold out for good too.

// heldGrace is how long a room that just closed reads held whatever the
// database says (queued writes).
const heldGrace = 5 * time.Second

// heldCheckEvery is how often the loop asks the database while closed.
const heldCheckEvery = time.Second

// unitsHeld reports whether item id has an order whose unit may come back.
func (s *Service) unitsHeld(ctx context.Context, id int64) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Raw(
		"SELECT COUNT(*) FROM (SELECT 1 FROM orders WHERE item_id = ? AND (status = ? OR (status = ? AND stock_returned_at IS NULL)) LIMIT 1) AS held",
		id, stock.StatusCreated, stock.StatusCancelled).Scan(&n).Error
	return n > 0, err
}

// noteClosed updates e's held flag at a tick that found the room closed
// (closed true) or open; the database is asked at most every
// heldCheckEvery. A failed read keeps the room held: not final is the
// safe answer.
func (s *Service) noteClosed(ctx context.Context, e *entry, closed bool, now time.Time) {
	if !closed {
		e.closedAt, e.heldAt = time.Time{}, time.Time{}
		e.held.Store(false)
		return
	}
	if e.closedAt.IsZero() {
		e.closedAt = now
		e.held.Store(true)
	}
	if !e.heldAt.IsZero() && now.Sub(e.heldAt) < heldCheckEvery {
		return
	}
	e.heldAt = now
	held, err := s.unitsHeld(ctx, e.id)
	if err != nil {
		e.warn(s, err)
		held = true
	}
	e.held.Store(held || now.Sub(e.closedAt) < heldGrace)
}

// soldOutFor is the state a sold-out ticket of e reads: held while a unit
// may come back, sold_out (final) once none can.
func soldOutFor(e *entry, t *Ticket) {
	if t.State == room.StateSoldOut && e.held.Load() {
		t.State = room.StateHeld
	}
}

// capETA makes a waiting ticket's ETA honest about the pass cap: the rate
// admits position p in about p/R seconds only if p is within the slots
// free now (the cap on unused passes, from the remaining stock, less the
// live passes). Past them a ticket waits for passes ahead to be spent
// (fewer units, fewer slots) or to expire: not known (-1).
func (s *Service) capETA(e *entry, t *Ticket) {
	st := e.stats.Load()
	if t.State != room.StateWaiting || t.Position <= 0 || st == nil {
		return
	}
	if free := int64(passCap(s.cfg.PassFactor, t.Remaining)) - st.Live; t.Position > free {
		t.ETASeconds = -1
	}
}
