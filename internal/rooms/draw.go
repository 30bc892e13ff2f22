package rooms

import (
	"context"
	"time"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock/store"
)

// The draw's evidence lives in two places. Redis holds the live draw (the
// pre-queue's order, how far the line served it); the database's
// room_draws holds every commitment the item published, with its line
// (written in the transaction that stores the commitment: admin.go) and,
// once the room opened, its seed and the closed pre-queue's size (written
// by the loop after the opening: recordOpening), and its transcript. A Redis loss, or a room
// turned off and on, replaces the live draw; the history stays, so a
// checker (seckill-draw) sees that the draw of N tickets now reads empty,
// or that the line it observed is not the current one.

// Draw is item id's public draw document (docs/API.md, "Waiting room").
type Draw struct {
	ItemID     int64   `json:"item_id"`
	Lottery    bool    `json:"lottery"`
	Commitment string  `json:"commitment,omitempty"`
	Seed       *string `json:"seed"`
	PreQueue   []int64 `json:"pre_queue"`
	// Transcript and Leaves: room.PublicDraw's, once open.
	Transcript string   `json:"transcript,omitempty"`
	Leaves     []string `json:"leaves,omitempty"`
	Served     []int64  `json:"served"`
	// Line is the current commitment's line in History.
	Line    int             `json:"line,omitempty"`
	History []room.DrawLine `json:"history,omitempty"`
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
	d, err := e.room.Draw(rctx)
	cancel()
	if err != nil {
		return nil, roomErr(err)
	}
	out := &Draw{ItemID: id, Lottery: true, Commitment: d.Commitment, PreQueue: d.PreQueue, Served: d.Served,
		Transcript: d.Transcript, Leaves: d.Leaves}
	if d.Seed != "" {
		out.Seed = &d.Seed
	}
	lines, err := store.DrawLines(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	out.History = make([]room.DrawLine, len(lines))
	for i, l := range lines {
		h := room.DrawLine{Line: l.Line, Commitment: l.Commitment, Lottery: l.Lottery, PublishedAt: l.PublishedAt.UTC(),
			PreQueueSize: l.PreQueue}
		if l.Seed != nil {
			h.Seed = *l.Seed
		}
		if l.Transcript != nil {
			h.Transcript = *l.Transcript
		}
		if l.RevealedAt != nil {
			at := l.RevealedAt.UTC()
			h.RevealedAt = &at
		}
		if l.Commitment == d.Commitment {
			out.Line = l.Line
		}
		out.History[i] = h
	}
	return out, nil
}

// line is the commitment of e's current line as its tickets show it: a
// lottery room's only (a FIFO room has no draw to check).
func (e *entry) line() string {
	if r := e.set.Load(); r.Lottery {
		return r.Commitment
	}
	return ""
}

// recordOpening writes the opening of e's line r (open in Redis with a
// pre-queue of pre tickets) to room_draws, once per line and process:
// every instance tries, the first write counts (store.RevealDraw). It runs
// after the opening, never before it: a database outage must not hold the
// opening back (joins after starts_at are never drawn); the loop retries
// it each tick until it is written.
func (s *Service) recordOpening(ctx context.Context, e *entry, r *row, pre int64, transcript string, now time.Time) {
	if done := e.recordedFor.Load(); !r.Lottery || (done != nil && *done == r.Commitment) {
		return
	}
	ok, err := store.RevealDraw(ctx, s.db, e.id, r.Commitment, r.Seed, pre, transcript, now)
	if err != nil {
		e.warn(s, err)
		return
	}
	if !ok {
		s.log.Warn("waiting room: the opened line's commitment was never published in room_draws", "item", e.id)
	}
	e.recordedFor.Store(&r.Commitment)
}
