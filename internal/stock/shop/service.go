package shop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/store"
)

// Strategy sells one unit of an item to one user. Each strategy must be
// correct under any concurrency; the database write is the last word.
// committed, when not nil, is called once the order is committed, before
// anything that lets other requests see the item sold out.
type Strategy interface {
	Buy(ctx context.Context, it *stock.Item, req stock.OrderRequest, orderID string, committed func(*stock.Order)) (*stock.Order, error)
}

// Config tunes a Service. Zero values mean the documented defaults.
type Config struct {
	// DefaultStrategy is used for items created without one. Default "lua".
	DefaultStrategy stock.StrategyName
	// KeyPrefix starts every Redis key. Default "seckill".
	KeyPrefix string
	// LockTTL is the lease of the per-item lock. Default 5s.
	LockTTL time.Duration
	// LockWait bounds how long an order waits for the item's lock. Default 5s.
	LockWait time.Duration
	// IdempotencyTTL is how long an Idempotency-Key stays bound to its user. Default 24h.
	IdempotencyTTL time.Duration
	// RequestTimeout is the longest an order request lives (the handler's
	// bound): a caller without a deadline waits for its write at most this
	// long, and a lua reservation without an order is taken for an orphan
	// only once it is well older than this. Default 10s.
	RequestTimeout time.Duration
	// WriteTimeout bounds each step (a statement, the commit) of a lua or
	// lock order transaction (group commit), after the item's lock is
	// held: a stalled database answers 503 in about this long, while a
	// large batch on a busy database still gets a budget per step. Default 1s.
	WriteTimeout time.Duration
	// ReplayWait bounds how long a replay waits for its original, still in
	// flight, to commit. Default 5s (under the 10s request bound).
	ReplayWait time.Duration
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
	// LockObserver receives the item locks' events (metrics). Default none.
	LockObserver lock.Observer
	// Orders receives the outcome of every order that reached an item's
	// strategy (metrics). Default none.
	Orders OrderObserver
	// Queue tunes the lua-async queue and its writers (its IdempotencyTTL
	// is this Config's). Zero fields mean queue's defaults.
	Queue queue.Config
	// SweepInterval is how often the sweeper expires orders past their
	// deadline and finishes stock returns that failed. Default 1s; negative:
	// no sweeper (tests call ExpireDue and ReturnStock themselves).
	SweepInterval time.Duration
	// Lifecycle receives order transitions and stock returns (metrics).
	// Default none.
	Lifecycle LifecycleObserver
}

// OrderObserver receives order outcomes. It must be fast and safe for
// concurrent use.
type OrderObserver interface {
	// Order reports one order on strategy; err is nil for a sale or replay.
	Order(strategy stock.StrategyName, err error)
}

func (c *Config) withDefaults() {
	if c.DefaultStrategy == "" {
		c.DefaultStrategy = stock.StrategyLua
	}
	if c.LockTTL == 0 {
		c.LockTTL = 5 * time.Second
	}
	if c.LockWait == 0 {
		c.LockWait = 5 * time.Second
	}
	if c.IdempotencyTTL == 0 {
		c.IdempotencyTTL = 24 * time.Hour
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = defaultWriteTimeout
	}
	if c.ReplayWait == 0 {
		c.ReplayWait = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = time.Second
	}
}

// Service is the domain API the HTTP layer uses.
type Service struct {
	cfg        Config
	store      *store.Store
	rdb        redis.UniversalClient
	keys       gate.Keys
	gate       *gate.Gate
	lua        *LuaGate
	locked     *LockStrategy
	queue      *queue.Queue
	pipe       *gate.Pipeline // shared round trips for the hot path's calls
	strategies map[stock.StrategyName]Strategy

	// items caches the fields of an item that never change after creation
	// (strategy, sale window), so an order costs no database read to route.
	items   sync.Map // int64 -> *Item
	loading singleflight.Group
	soldOut gate.Memo
	events  *gate.Events

	sweeper   sync.WaitGroup
	stopSweep context.CancelFunc
	closeOnce sync.Once
}

// NewService wires the strategies over one store and one Redis.
func NewService(st *store.Store, rdb redis.UniversalClient, cfg Config) (*Service, error) {
	cfg.withDefaults()
	if !cfg.DefaultStrategy.Valid() {
		return nil, fmt.Errorf("unknown default strategy %q (want lua, lock or lua-async): %w", cfg.DefaultStrategy, stock.ErrInvalid)
	}
	keys, err := gate.NewKeys(cfg.KeyPrefix)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, store: st, rdb: rdb, keys: keys, pipe: gate.NewPipeline(rdb, nil)}
	s.gate = gate.New(rdb, keys, s.pipe, cfg.Logger)
	s.lua = newLuaGate(st, s.gate, cfg.Logger)
	s.lua.returned = s.restocked
	s.lua.writer.bound(cfg.WriteTimeout, cfg.RequestTimeout)
	s.lua.orphanAfter = orphanWindow(cfg.RequestTimeout)
	s.lua.rebuild = func(ctx context.Context, id int64) error {
		it, err := s.routing(ctx, id)
		if err != nil {
			return err
		}
		return s.rebuildGate(ctx, id, it.Strategy)
	}
	s.locked = newLockStrategy(st, rdb, keys, cfg.LockTTL, cfg.LockWait, cfg.Logger, cfg.LockObserver)
	s.locked.writer.bound(cfg.WriteTimeout, cfg.RequestTimeout)
	s.strategies = map[stock.StrategyName]Strategy{stock.StrategyLua: s.lua, stock.StrategyLock: s.locked}
	qcfg := cfg.Queue
	qcfg.IdempotencyTTL = cfg.IdempotencyTTL
	if s.queue, err = queue.New(st, rdb, s.gate, s.pipe, qcfg, cfg.Logger); err != nil {
		s.locked.close()
		s.pipe.Close()
		return nil, err
	}
	s.events = gate.StartEvents(rdb, keys, &s.soldOut, cfg.Logger)
	s.startSweeper()
	return s, nil
}

// Close stops the sweeper and the lua-async writers (after their current
// batch: what is still queued stays in Redis for other writers; a process
// whose Redis closes with it calls DrainQueues first), finishes the lua
// strategy's queued writes, waits for background work (hand-back retries)
// and closes the subscriptions. It is safe to call more than once.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		s.stopSweep()
		s.sweeper.Wait()
		s.queue.Close()
		s.lua.Close()
		s.locked.close()
		s.events.Close()
		s.pipe.Close()
	})
}

// DefaultStrategy is the strategy of items created without one.
func (s *Service) DefaultStrategy() stock.StrategyName { return s.cfg.DefaultStrategy }

// CreateItem validates and stores a new item, then seeds its Redis gate.
func (s *Service) CreateItem(ctx context.Context, in stock.NewItem) (*stock.Item, error) {
	if in.Strategy == "" {
		in.Strategy = s.cfg.DefaultStrategy
	}
	if err := stock.ValidateNewItem(in); err != nil {
		return nil, err
	}
	it := &stock.Item{Name: in.Name, PriceCents: in.PriceCents, Stock: in.Stock, Strategy: in.Strategy,
		StartsAt: in.StartsAt, EndsAt: in.EndsAt}
	if err := s.store.CreateItem(ctx, it); err != nil {
		return nil, err
	}
	// The item is in the database, which is what counts; a gate that could
	// not be seeded now is rebuilt by the first order.
	if err := s.lua.seed(ctx, it.ID); err != nil {
		s.cfg.Logger.WarnContext(ctx, "gate not seeded at creation; the first order will seed it", "item", it.ID, "err", err)
	}
	if it.Strategy == stock.StrategyLuaAsync {
		s.queue.Added(it.ID)
	}
	return it, nil
}

// Item reads an item as the database has it now.
func (s *Service) Item(ctx context.Context, id int64) (*stock.Item, error) {
	return s.store.Item(ctx, id)
}

// SetStock changes an item's stock and returns the item before and after
// the change (for the audit log). n below what is sold is refused, and on a
// lua-async item n below what is sold or queued (promised to its buyers).
//
// The gate is written while the database holds the item's row lock, before
// the commit, whichever way the stock moves: concurrent changes reach the
// gate in the order they reach the database, so the gate ends with the
// stock of the change that committed last. While the lock is held no order
// can take a unit in the database either (its UPDATE waits for the lock),
// so a gate loosened just before the commit sends nobody to a refusal.
// Should the change fail after the gate was written (the commit or the
// connection failed; the outcome may even be unknown), the gate is set
// again from the database, under the row lock.
//
// A missing gate is rebuilt first (for lua-async it counts the queue, which
// the strict check needs); if it vanishes again before the check, a
// lowering on lua-async is refused as unavailable rather than unchecked.
func (s *Service) SetStock(ctx context.Context, id, n int64) (before, after *stock.Item, err error) {
	if err := stock.ValidateStock(n); err != nil {
		return nil, nil, err
	}
	it, err := s.routing(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if it.Strategy.Gated() {
		if err := s.ensureGate(ctx, it); err != nil {
			return nil, nil, err
		}
	}
	touched := false
	old, updated, err := s.store.SetStock(ctx, id, n, func(old *stock.Item) error {
		// lua-async has promised the units its queue holds: never below them.
		strict := old.Strategy == stock.StrategyLuaAsync && n < old.Stock
		res, err := s.gate.SetStock(ctx, id, n, strict)
		touched = err != nil || res == gate.StockSet
		switch {
		case err != nil:
			return err
		case res == gate.StockRefused:
			return fmt.Errorf("stock %d is below the units sold or queued for writing: %w", n, stock.ErrStockBelowSold)
		case res == gate.StockMissing && strict:
			return fmt.Errorf("redis: the gate of item %d vanished, so its queued orders cannot be counted; repeat the request: %w", id, stock.ErrUnavailable)
		}
		return nil
	})
	if err != nil {
		if touched {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), returnTimeout)
			defer cancel()
			if rerr := s.syncGateStock(rctx, id); rerr != nil {
				s.soldOut.Forget(id)
				s.cfg.Logger.WarnContext(ctx, "gate stock not set back from the database after a failed change; reconcile the item",
					"item", id, "err", rerr)
			}
		}
		return nil, nil, err
	}
	s.restocked(ctx, id)
	return old, updated, nil
}

// ensureGate rebuilds the gate of a gated item if Redis lost it, the way
// its strategy needs (see rebuildGate).
func (s *Service) ensureGate(ctx context.Context, it *stock.Item) error {
	n, err := s.rdb.Exists(ctx, s.keys.Meta(it.ID)).Result()
	if err != nil {
		return gate.Error("check gate", err)
	}
	if n == 1 {
		return nil
	}
	return s.rebuildGate(ctx, it.ID, it.Strategy)
}

// syncGateStock writes the database's stock to the item's gate, holding
// the item's row lock so no stock change runs in between.
func (s *Service) syncGateStock(ctx context.Context, id int64) error {
	return s.store.WithItemLocked(ctx, id, func(ctx context.Context, locked *store.LockedItem) error {
		units, err := locked.Stock(ctx)
		if err != nil {
			return err
		}
		_, err = s.gate.SetStock(ctx, id, units, false)
		return err
	})
}

// Order reads one order.
func (s *Service) Order(ctx context.Context, id string) (*stock.Order, error) {
	if err := stock.ValidateOrderID(id); err != nil {
		return nil, err
	}
	return s.findOrder(ctx, id)
}

// PlaceOrder sells one unit to one user through the item's strategy. With an
// idempotency key, a repeat of an earlier request returns the earlier order
// and replayed=true; the key bound to another user gives ErrIdempotencyConflict.
func (s *Service) PlaceOrder(ctx context.Context, req stock.OrderRequest) (o *stock.Order, replayed bool, err error) {
	if err := stock.ValidateOrderRequest(req); err != nil {
		return nil, false, err
	}
	it, err := s.routing(ctx, req.ItemID)
	if err != nil {
		return nil, false, err
	}
	if s.cfg.Orders != nil {
		defer func() { s.cfg.Orders.Order(it.Strategy, err) }()
	}
	if it.Strategy == stock.StrategyLuaAsync {
		return s.placeAsync(ctx, it, req)
	}
	if req.IdempotencyKey != "" && s.soldOut.SoldOut(it.ID) {
		return s.soldOutKeyed(ctx, it, req)
	}
	state := ""
	if req.IdempotencyKey != "" {
		var prevID string
		if state, prevID, err = s.claim(ctx, req); err != nil {
			return nil, false, err
		}
		if state == claimDone {
			if prev, err := s.store.Order(ctx, prevID); err == nil {
				return prev, true, nil
			} else if !errors.Is(err, stock.ErrNotFound) {
				return nil, false, err
			}
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, false, fmt.Errorf("order id: %w", err)
	}
	var committed func(*stock.Order)
	if req.IdempotencyKey != "" {
		committed = func(o *stock.Order) { s.settle(ctx, req, o.ID) }
	}
	gen := s.soldOut.Generation(it.ID)
	if s.soldOut.SoldOut(it.ID) {
		err = stock.ErrSoldOut
	} else if o, err = s.strategies[it.Strategy].Buy(ctx, it, req, id.String(), committed); errors.Is(err, stock.ErrSoldOut) {
		s.markSoldOut(ctx, it.ID, gen)
	}
	if err == nil {
		return o, false, nil
	}
	if req.IdempotencyKey != "" {
		if prev := s.twinOrder(ctx, it, req, err); prev != nil {
			return prev, true, nil
		}
	}
	return nil, false, err
}

// markSoldOut remembers that item id is sold out, as learned by a request
// that noted gen, and tells the other instances.
func (s *Service) markSoldOut(ctx context.Context, id int64, gen gate.MemoGen) {
	if news, seq := s.soldOut.Mark(id, gen); news {
		// The other instances may mark it too; if they miss it, they
		// learn it themselves.
		if perr := s.events.SoldOut(ctx, id, seq, gen); perr != nil {
			s.cfg.Logger.DebugContext(ctx, "sold out not announced", "item", id, "err", perr)
		}
	}
}

// restocked makes this and every other instance forget that item id is sold
// out: units of it are available again.
func (s *Service) restocked(ctx context.Context, id int64) {
	seq, err := s.events.Restock(ctx, id)
	if err != nil {
		s.soldOut.Forget(id)
		s.cfg.Logger.WarnContext(ctx, "restock not announced; other instances may refuse the item for a few seconds more",
			"item", id, "err", err)
		return
	}
	s.soldOut.Restocked(id, seq)
}

// KnownSoldOut reports whether this process knows the item is sold out: it
// saw it, or another instance said so, and no restock has been announced
// since (within the memo's bounds, see soldout.go). It costs no round trip.
func (s *Service) KnownSoldOut(itemID int64) bool { return s.soldOut.SoldOut(itemID) }

// routing returns the immutable fields of an item, from cache when it can.
func (s *Service) routing(ctx context.Context, id int64) (*stock.Item, error) {
	if v, ok := s.items.Load(id); ok {
		return v.(*stock.Item), nil
	}
	// When a sale opens, thousands of requests miss at once: one reads.
	v, err, _ := s.loading.Do(strconv.FormatInt(id, 10), func() (any, error) {
		it, err := s.store.Item(ctx, id)
		if err != nil {
			return nil, err
		}
		s.items.Store(id, it)
		return it, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*stock.Item), nil
}

// Ready reports whether Redis and the database both answer.
func (s *Service) Ready(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return gate.Error("ping", err)
	}
	return s.store.Ping(ctx)
}
