package rooms

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// Set sets up item id's room, or changes it (nil fields of c keep their
// values). The item must exist. Lottery can change only before the sale
// opened and before anyone joined (ErrRoomOpened); the room then starts
// over with a new seed. The row is written in one transaction holding the
// item's row lock (shop ChangeRoom): once Set returns, every instance's
// orders of the item need a pass.
func (s *Service) Set(ctx context.Context, id int64, c Change) error {
	it, err := s.shop.Item(ctx, id)
	if err != nil {
		return err
	}
	cur, err := loadRow(ctx, s.db, id)
	if err != nil {
		return err
	}
	r, restart, err := s.plan(ctx, it, cur, c)
	if err != nil {
		return err
	}
	if restart {
		// Nobody joined: drop the line, the loop sets it up again.
		if err := s.withRoom(ctx, id, func(ctx context.Context, rm *room.Room) error { return rm.Delete(ctx) }); err != nil {
			return err
		}
	}
	if err := s.shop.ChangeRoom(ctx, id, func(ctx context.Context, tx *gorm.DB, _ int64) error {
		if err := saveRow(ctx, tx, &r, cur == nil); err != nil {
			return err
		}
		return publish(ctx, tx, &r, cur)
	}); err != nil {
		return err
	}
	s.changed(ctx, id, &r, c)
	return nil
}

// CreateItem creates an item with a room (c, validated as a new room's):
// the item's row and its room's are one transaction, so the item is never
// on sale without its room. Once it returns, every instance's orders of
// the item need a pass.
func (s *Service) CreateItem(ctx context.Context, in stock.NewItem, c Change) (*stock.Item, error) {
	if err := c.Validate(true); err != nil {
		return nil, err
	}
	var r row
	it, err := s.shop.CreateItemWith(ctx, in, func(ctx context.Context, tx *gorm.DB, id int64) error {
		planned, _, err := s.plan(ctx, &stock.Item{ID: id, StartsAt: in.StartsAt}, nil, c)
		if err != nil {
			return err
		}
		r = planned
		if err := saveRow(ctx, tx, &r, true); err != nil {
			return err
		}
		return publish(ctx, tx, &r, nil)
	})
	if err != nil {
		return nil, err
	}
	s.changed(ctx, it.ID, &r, c)
	return it, nil
}

// plan is the row that c makes of item it's room cur (nil: none yet), and
// whether its line starts over.
func (s *Service) plan(ctx context.Context, it *stock.Item, cur *row, c Change) (row, bool, error) {
	if err := c.Validate(cur == nil); err != nil {
		return row{}, false, err
	}
	id := it.ID
	now := s.cfg.Now().UTC()
	r := row{ItemID: id, PassTTLSeconds: DefaultPassTTLSeconds, Lottery: true, CreatedAt: now}
	if cur != nil {
		r = *cur
	}
	r.UpdatedAt = now
	if c.AdmitPerSecond != nil {
		r.AdmitPerSecond = *c.AdmitPerSecond
	}
	if c.PassTTLSeconds != nil {
		r.PassTTLSeconds = *c.PassTTLSeconds
	}
	if c.Paused != nil {
		r.Paused = *c.Paused
	}
	restart := false
	if c.Lottery != nil && *c.Lottery != r.Lottery {
		if cur != nil {
			if it.StartsAt == nil || !now.Before(*it.StartsAt) {
				return row{}, false, ErrRoomOpened
			}
			st, err := s.redisStats(ctx, id)
			if err != nil && !errors.Is(err, room.ErrNoRoom) {
				return row{}, false, roomErr(err)
			}
			if st.Tickets > 0 {
				return row{}, false, ErrRoomOpened
			}
			restart = true
		}
		r.Lottery = *c.Lottery
	}
	if cur == nil || restart {
		r.newSeed()
	}
	return r, restart, nil
}

// saveRow writes r in tx: a new row (create), or the changed fields.
func saveRow(ctx context.Context, tx *gorm.DB, r *row, create bool) error {
	var err error
	if create {
		err = tx.WithContext(ctx).Create(r).Error
	} else {
		err = tx.WithContext(ctx).Model(&row{}).Where("item_id = ?", r.ItemID).Updates(map[string]any{
			"admit_per_second": r.AdmitPerSecond, "pass_ttl_seconds": r.PassTTLSeconds, "lottery": r.Lottery,
			"paused": r.Paused, "seed": r.Seed, "commitment": r.Commitment, "updated_at": r.UpdatedAt}).Error
	}
	return dbErr("save room", err)
}

// publish records r's commitment in room_draws when it is a new one (cur
// is the room before, nil when it had none), in tx: the commitment is
// never in item_rooms without its line in the history.
func publish(ctx context.Context, tx *gorm.DB, r, cur *row) error {
	if cur != nil && cur.Commitment == r.Commitment {
		return nil
	}
	return store.PublishDraw(ctx, tx, r.ItemID, r.Commitment, r.Lottery, r.UpdatedAt)
}

// changed brings this process up to date after item id's room r was
// stored by c: its rooms reloaded, the pause and rate in Redis, the room
// set up in Redis so that a join right after the answer finds it.
func (s *Service) changed(ctx context.Context, id int64, r *row, c Change) {
	s.reloadNow(ctx)
	if e := s.entry(id); e != nil && (c.Paused != nil || c.AdmitPerSecond != nil) && e.ready.Load() {
		// In Redis before the answer, so no instance admits anyone (or
		// faster) after it (the loop writes it again should this fail).
		rctx, cancel := s.redisCtx(ctx)
		defer cancel()
		if err := e.room.SetControl(rctx, r.Paused, r.AdmitPerSecond); err != nil {
			s.log.Warn("waiting room: pause or rate not written to redis; the loop retries", "item", id, "err", err)
		}
	}
	if e := s.entry(id); e != nil && !e.ready.Load() {
		rctx, cancel := s.redisCtx(ctx)
		defer cancel()
		if err := s.setup(rctx, e); err != nil {
			s.log.Warn("waiting room: set-up in redis failed; the loop retries", "item", id, "err", err)
		}
	}
}

// Delete turns item id's room off: orders no longer need a pass, at once
// here and within a reload (a second) on the other instances, which ask
// for a pass until then (safe: a refusal changes nothing). Its line in
// Redis is dropped too (best effort: a line left behind is replaced when a
// room is set up again).
func (s *Service) Delete(ctx context.Context, id int64) error {
	if _, err := s.shop.Item(ctx, id); err != nil {
		return err
	}
	err := s.shop.ChangeRoom(ctx, id, func(ctx context.Context, tx *gorm.DB, _ int64) error {
		res := tx.WithContext(ctx).Where("item_id = ?", id).Delete(&row{})
		if res.Error != nil {
			return dbErr("delete room", res.Error)
		}
		if res.RowsAffected == 0 {
			return ErrNoWaitingRoom
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.reloadNow(ctx)
	if err := s.withRoom(ctx, id, func(ctx context.Context, rm *room.Room) error { return rm.Delete(ctx) }); err != nil {
		s.log.Warn("waiting room: turned off, but its line stays in redis", "item", id, "err", err)
	}
	return nil
}

// withRoom runs fn on item id's room in Redis (whether or not it is known
// here), bounded by the Redis timeout.
func (s *Service) withRoom(ctx context.Context, id int64, fn func(context.Context, *room.Room) error) error {
	rm, err := room.New(s.rdb, id, &room.Options{KeyPrefix: s.cfg.KeyPrefix})
	if err != nil {
		return err
	}
	rctx, cancel := s.redisCtx(ctx)
	defer cancel()
	return roomErr(fn(rctx, rm))
}

func (s *Service) redisStats(ctx context.Context, id int64) (room.Stats, error) {
	var st room.Stats
	rm, err := room.New(s.rdb, id, &room.Options{KeyPrefix: s.cfg.KeyPrefix})
	if err != nil {
		return st, err
	}
	rctx, cancel := s.redisCtx(ctx)
	defer cancel()
	return rm.Stats(rctx)
}

// Settings is a room's configuration as the API shows it.
type Settings struct {
	AdmitPerSecond int    `json:"admit_per_second"`
	PassTTLSeconds int    `json:"pass_ttl_seconds"`
	Lottery        bool   `json:"lottery"`
	Commitment     string `json:"commitment,omitempty"`
	Phase          string `json:"phase"`
	Paused         bool   `json:"paused"`
}

// AdminView is the admin item view's waiting_room.
type AdminView struct {
	Settings
	Closed            bool  `json:"closed"`
	Tickets           int64 `json:"tickets"`
	Waiting           int64 `json:"waiting"`
	Admitted          int64 `json:"admitted"`
	Used              int64 `json:"used"`
	Expired           int64 `json:"expired"`
	Live              int64 `json:"live"`
	Rate              int64 `json:"rate"`
	AdmittedPerSecond int64 `json:"admitted_per_second"`
	// SettingUp: the database has the room and Redis has none yet (it was
	// just turned on again, or Redis lost it); the loop sets it up within
	// a tick, and the counters read 0 until then.
	SettingUp bool `json:"setting_up,omitempty"`
}

// settings is e's public settings at now; phase pre before starts_at,
// ended after ends_at, closed while sold out (both as the loop last saw
// the item), open otherwise.
func (s *Service) settings(e *entry, startsAt *time.Time, now time.Time) Settings {
	r := e.set.Load()
	v := Settings{AdmitPerSecond: r.AdmitPerSecond, PassTTLSeconds: r.PassTTLSeconds, Lottery: r.Lottery, Paused: r.Paused, Phase: "open"}
	if r.Lottery {
		v.Commitment = r.Commitment
	}
	if startsAt != nil && now.Before(*startsAt) {
		v.Phase = "pre"
	} else if iv := e.view.Load(); iv != nil && saleEnded(iv, now) {
		v.Phase = "ended" // the loop's last view of the item: final
	} else if st := e.stats.Load(); st != nil && st.Closed {
		v.Phase = "closed"
	}
	return v
}

// Public is item id's waiting_room in the public item view, from memory;
// nil when the item has no room.
func (s *Service) Public(id int64, startsAt *time.Time) *Settings {
	e := s.entry(id)
	if e == nil {
		return nil
	}
	v := s.settings(e, startsAt, s.cfg.Now())
	return &v
}

// Admin is item id's waiting_room in the admin views, its counters read
// from Redis; nil when the item has no room.
func (s *Service) Admin(ctx context.Context, it *stock.Item) (*AdminView, error) {
	e := s.entry(it.ID)
	if e == nil {
		return nil, nil
	}
	rctx, cancel := s.redisCtx(ctx)
	defer cancel()
	st, err := e.room.Stats(rctx)
	if errors.Is(err, room.ErrNoRoom) {
		// Not an outage of the view: the settings are the database's, and
		// an answer to a PUT racing a DELETE, or read right after Redis
		// lost the room, says so instead of a 503.
		e.lost() // set up again by the loop, with the hold of a lost line
		return &AdminView{Settings: s.settings(e, it.StartsAt, s.cfg.Now()), SettingUp: true}, nil
	}
	if err != nil {
		return nil, roomErr(err)
	}
	v := &AdminView{Settings: s.settings(e, it.StartsAt, s.cfg.Now()), Closed: st.Closed, Tickets: st.Tickets,
		Waiting: st.Waiting, Admitted: st.Admitted, Used: st.Used, Expired: st.Expired, Live: st.Live, Rate: st.Rate,
		AdmittedPerSecond: e.admittedPerSecond()}
	if st.Closed && v.Phase != "ended" {
		v.Phase = "closed"
	}
	return v, nil
}
