package rooms

import (
	"context"
)

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
