package rooms

import (
	"context"
	"errors"

	"github.com/seckill/seckill/internal/room"
)

// Every poll and join marks its ticket seen here; the loop writes them to
// the room's seen bitmaps once a tick (room.MarkSeen), so that a returned
// unit goes to a live waiter, not one pass TTL at a time to the pages that
// stopped polling (internal/room/seen.go).

// maxSeen bounds the tickets an instance remembers as seen between two
// flushes (a tick): beyond it a poll is not recorded, and its ticket may be
// passed over if no other poll of it in two windows was recorded.
const maxSeen = 1 << 20

// markSeen records that ticket was polled or joined here (room.MarkSeen at
// the loop's next tick): a map insert under a mutex, no Redis call.
func (e *entry) markSeen(ticket int64) {
	e.seenMu.Lock()
	if e.seen == nil {
		e.seen = map[int64]struct{}{}
	}
	if len(e.seen) < maxSeen {
		e.seen[ticket] = struct{}{}
	}
	e.seenMu.Unlock()
}

// flushSeen writes the tickets seen here since the last tick to Redis,
// before Admit reads them. A failed write keeps them for the next tick.
func (s *Service) flushSeen(ctx context.Context, e *entry) error {
	e.seenMu.Lock()
	seen := e.seen
	e.seen = nil
	e.seenMu.Unlock()
	if len(seen) == 0 {
		return nil
	}
	tickets := make([]int64, 0, len(seen))
	for t := range seen {
		tickets = append(tickets, t)
	}
	err := e.room.MarkSeen(ctx, s.cfg.Now(), tickets)
	if errors.Is(err, room.ErrNoRoom) {
		return nil // Redis lost the room: the tick's Stats finds out
	}
	if err != nil {
		for _, t := range tickets {
			e.markSeen(t)
		}
	}
	return err
}
