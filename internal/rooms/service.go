// Package rooms runs the waiting rooms (issue 21) of a service instance: it
// keeps each item's room settings in the database, knows which items have a
// room (reloaded every second, and at once after a change made here), runs
// each room's admission loop (Open at starts_at, Admit every 100 ms, Close
// when the item sells out, Resume when stock comes back), and answers the
// HTTP layer's questions: join, status, the draw, the pass of an order.
//
// internal/room holds the rules (tickets, the draw, admission, passes) in
// Redis; this package wires them to items. Every instance runs every loop:
// admission is one Redis script with all its state in Redis, so several
// instances together admit at most R a second.
package rooms

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/room"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// Shop is what the rooms need of the shop: the items and their remaining
// stock (the public view: the gate's count, at most a few hundred ms old;
// the admission loop reads it fresh).
type Shop interface {
	Item(ctx context.Context, id int64) (*stock.Item, error)
	ItemView(ctx context.Context, id int64) (*stock.ItemView, error)
	// FreshItemView is ItemView read now: it shows every sale taken
	// before the call (shop.Service.FreshItemView).
	FreshItemView(ctx context.Context, id int64) (*stock.ItemView, error)
	// CreateItemWith creates an item with with written in its transaction.
	CreateItemWith(ctx context.Context, in stock.NewItem, with store.WithItem) (*stock.Item, error)
	// ChangeRoom runs write (a change of the item's room) in a transaction
	// holding the item's row lock, and makes the item's sale enforce the
	// room from its commit on (shop.Service.ChangeRoom).
	ChangeRoom(ctx context.Context, id int64, write store.WithItem) error
}

// Orders finds a user's order of an item and the Idempotency-Key it was
// placed with (store.Store.OrderOf): a keyed retry of an order already
// taken is replayed even if its pass expired since.
type Orders interface {
	OrderOf(ctx context.Context, itemID int64, userID string) (*stock.Order, string, error)
}

// Observer receives the rooms' measurements (metrics.Metrics). Item labels
// are the metrics' (docs/OPERATIONS.md): rooms are few.
type Observer interface {
	RoomWaiting(item int64, n int64)
	RoomAdmitted(item int64, n int)
	RoomWait(d time.Duration)
	RoomPassesExpired(item int64, n int64)
	RoomDeferred(item int64, reason string, n int64)
	RoomPassRejected(reason string)
	RoomForget(item int64)
}

type nopObserver struct{}

func (nopObserver) RoomWaiting(int64, int64)          {}
func (nopObserver) RoomAdmitted(int64, int)           {}
func (nopObserver) RoomWait(time.Duration)            {}
func (nopObserver) RoomPassesExpired(int64, int64)    {}
func (nopObserver) RoomDeferred(int64, string, int64) {}
func (nopObserver) RoomPassRejected(string)           {}
func (nopObserver) RoomForget(int64)                  {}

// Config tunes the service.
type Config struct {
	// Key signs passes and ticket strings: every instance must share it.
	// At least room.MinPassKeyLen bytes. Required.
	Key []byte
	// KeyPrefix starts the rooms' Redis keys (the gate's prefix).
	KeyPrefix string
	// PassFactor caps the admitted-and-unused passes at PassFactor times
	// the remaining stock, rounded up (passCap). Default 1.
	PassFactor float64
	// RedisTimeout bounds each Redis call of a request or a loop tick, so
	// a stalled Redis answers 503 fast. Default 1 s.
	RedisTimeout time.Duration
	// Tick is the admission loop's period (default 100 ms); Reload how
	// often the rooms are read from the database (default 1 s).
	Tick, Reload time.Duration
	Logger       *slog.Logger
	Observer     Observer
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxTickets bounds the tickets (and so the Redis memory) of one room:
	// a join is refused ErrRoomFull once the room holds
	// min(MaxTickets, max(MinRoomTickets, TicketsPerUnit × the units the
	// item has left)). Default DefaultMaxTickets; negative: no bound.
	MaxTickets int64
}

// The bound on a room's tickets (Config.MaxTickets): a line 50 times the
// units left is more than a sale can serve, and small items still take a
// thousand.
const (
	DefaultMaxTickets = 1_000_000
	MinRoomTickets    = 1000
	TicketsPerUnit    = 50
)

// maxTickets is the bound on item v's room's tickets for a join now (0:
// none).
func (s *Service) maxTickets(v *stock.ItemView) int64 {
	if s.cfg.MaxTickets < 0 {
		return 0
	}
	n := int64(MinRoomTickets)
	if v.Remaining > n/TicketsPerUnit {
		n = s.cfg.MaxTickets // 50 × remaining, without overflowing
		if v.Remaining < s.cfg.MaxTickets/TicketsPerUnit {
			n = TicketsPerUnit * v.Remaining
		}
	}
	return min(n, s.cfg.MaxTickets)
}

// Service runs the rooms of one process.
type Service struct {
	cfg    Config
	db     *gorm.DB
	rdb    redis.UniversalClient
	shop   Shop
	orders Orders
	pass   room.PassKey
	tix    ticketSigner
	log    *slog.Logger
	obs    Observer

	mu    sync.RWMutex
	rooms map[int64]*entry
	kick  chan struct{}
	// reloading shares one reload among the orders refused at once for a
	// room not known here yet (refused).
	reloading singleflight.Group
	// unproven is when (Unix ns, Config.Now) a join last made this process
	// reload for a room it did not know (LearnUnproven).
	unproven atomic.Int64

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	running atomic.Bool
	// joins runs the join batches' goroutines (join.go).
	joins goroutines
}

// New builds the service and reads the rooms once; Start runs its loops.
func New(ctx context.Context, db *gorm.DB, rdb redis.UniversalClient, shop Shop, orders Orders, cfg Config) (*Service, error) {
	pass, err := room.NewPassKey(cfg.Key)
	if err != nil {
		return nil, err
	}
	if cfg.PassFactor <= 0 {
		cfg.PassFactor = 1
	}
	if cfg.MaxTickets == 0 {
		cfg.MaxTickets = DefaultMaxTickets
	}
	if cfg.RedisTimeout <= 0 {
		cfg.RedisTimeout = time.Second
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	if cfg.Reload <= 0 {
		cfg.Reload = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{cfg: cfg, db: db, rdb: rdb, shop: shop, orders: orders, pass: pass, tix: newTicketSigner(cfg.Key),
		log: cfg.Logger, obs: cfg.Observer, rooms: map[int64]*entry{}, kick: make(chan struct{}, 1)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.reload(ctx); err != nil {
		s.cancel()
		return nil, err
	}
	return s, nil
}

// Start runs the reload loop (and, through it, every room's admission
// loop) until Close.
func (s *Service) Start() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.cfg.Reload)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
			case <-s.kick:
			}
			ctx, cancel := context.WithTimeout(s.ctx, 2*s.cfg.Reload)
			if err := s.reload(ctx); err != nil {
				s.log.Warn("waiting rooms: reload from the database failed; keeping the last known rooms", "err", err)
			}
			cancel()
		}
	}()
	s.mu.Lock()
	s.running.Store(true)
	for _, e := range s.rooms {
		s.startLoop(e)
	}
	s.mu.Unlock()
}

// Close stops every loop and join batch and waits for them. A reload
// after it (an order path's Learn during shutdown) starts no loop: its
// WaitGroup Add would race the Wait.
func (s *Service) Close() {
	s.mu.Lock()
	s.running.Store(false)
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.joins.Close()
}

// reload reads the rooms from the database: new rooms get an entry (and a
// loop once started), changed ones their new settings, removed ones stop.
func (s *Service) reload(ctx context.Context) error {
	rows, err := loadRows(ctx, s.db)
	if err != nil {
		return err
	}
	seen := make(map[int64]bool, len(rows))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range rows {
		r := rows[i]
		seen[r.ItemID] = true
		if e, ok := s.rooms[r.ItemID]; ok {
			e.update(&r)
			continue
		}
		rm, err := room.New(s.rdb, r.ItemID, &room.Options{KeyPrefix: s.cfg.KeyPrefix, PassKey: s.pass, AdmitLead: s.cfg.Tick,
			TicketString: s.ticketString(r.ItemID)})
		if err != nil {
			return err
		}
		e := newEntry(rm, &r)
		e.joins = &joinBatcher{room: rm, spawn: &s.joins, base: s.ctx, timeout: s.cfg.RedisTimeout, now: s.cfg.Now}
		s.rooms[r.ItemID] = e
		if s.running.Load() {
			s.startLoop(e)
		}
	}
	for id, e := range s.rooms {
		if !seen[id] {
			e.stop()
			delete(s.rooms, id)
			s.obs.RoomForget(id)
		}
	}
	return nil
}

// reloadNow asks the reload loop to read the database at once (a change
// made here), and applies it in this goroutine too.
func (s *Service) reloadNow(ctx context.Context) {
	if err := s.reload(ctx); err != nil {
		s.log.Warn("waiting rooms: reload after a change failed", "err", err)
	}
}

// entry returns item id's room, or nil.
func (s *Service) entry(id int64) *entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rooms[id]
}

// Roomed reports whether item id's orders need a pass (from memory: a room
// set up on another instance is known here within a second, or at once
// after the shop refused an order of it, see refused).
func (s *Service) Roomed(id int64) bool { return s.entry(id) != nil }

// redisCtx bounds one Redis step of a request.
func (s *Service) redisCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.RedisTimeout)
}

// roomErr maps the room package's errors to the API's.
func roomErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, room.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("waiting room: %w: %w", stock.ErrUnavailable, err)
	case errors.Is(err, room.ErrNoRoom):
		// The database says the item has a room and Redis has none: Redis
		// lost it (the loop sets it up again). Fail closed.
		return fmt.Errorf("waiting room: %w: not in redis (being set up again): %w", stock.ErrUnavailable, err)
	case errors.Is(err, room.ErrSoldOut):
		return stock.ErrSoldOut
	case errors.Is(err, room.ErrFull):
		return ErrRoomFull
	case errors.Is(err, room.ErrUnknownTicket):
		return stock.ErrNotFound
	}
	return err
}
