package shop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/store"
)

// Service is the domain API the HTTP layer uses.
type Service struct {
	cfg        Config
	store      *store.Store
	rdb        redis.UniversalClient
	keys       gate.Keys
	gate       *gate.Gate
	lua        *luaBuyer
	locked     *lockBuyer
	queue      *queue.Queue
	pipe       *gate.Pipeline // shared round trips for the hot path's calls
	strategies map[stock.StrategyName]Strategy

	// items caches the fields of an item that never change after creation
	// (strategy, sale window), so an order costs no database read to route.
	items   sync.Map // int64 -> *Item
	loading singleflight.Group
	// missing answers unknown item ids on the public paths from memory.
	missing *missingItems
	// restoring shares one restore of an item's claims (restoreClaims).
	restoring singleflight.Group
	soldOut   gate.Memo
	// purchased answers a buyer's repeated attempts from memory for a
	// moment (PurchasedMaxAge).
	purchased purchaseMemo
	events    *gate.Events
	views     itemViews
	// bucketed lists the items with several buckets seen here (the
	// sweeper finishes their moves).
	bucketed bucketItems

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
	s := &Service{cfg: cfg, store: st, rdb: rdb, keys: keys, pipe: gate.NewPipeline(rdb, &gate.PipelineOptions{Wait: cfg.RedisWait})}
	s.views.clock = time.Now
	s.missing = newMissingItems(cfg.MissingItemTTL)
	s.gate = gate.New(rdb, keys, s.pipe, cfg.Logger)
	s.lua = newLuaBuyer(st, s.gate, cfg.Logger)
	s.lua.returned = s.restocked
	s.lua.writer.bound(cfg.WriteTimeout, cfg.RequestTimeout)
	s.lua.orphanAfter = orphanWindow(cfg.RequestTimeout)
	s.locked = newLockBuyer(st, rdb, keys, cfg.LockTTL, cfg.LockWait, cfg.RedisWait, cfg.Logger, cfg.LockObserver)
	s.locked.writer.bound(cfg.WriteTimeout, cfg.RequestTimeout)
	s.strategies = map[stock.StrategyName]Strategy{}
	for _, st := range []Strategy{luaStrategy{s, s.lua}, lockStrategy{s, s.locked}, luaAsyncStrategy{s}} {
		s.strategies[st.Name()] = st
	}
	qcfg := cfg.Queue
	qcfg.IdempotencyTTL = cfg.IdempotencyTTL
	if s.queue, err = queue.New(st, rdb, s.gate, s.pipe, qcfg, cfg.Logger); err != nil {
		s.locked.close()
		s.pipe.Close()
		return nil, err
	}
	s.queue.SetRouting(func(ctx context.Context, id int64) (int, error) {
		it, err := s.routing(ctx, id)
		if err != nil {
			return 0, err
		}
		return it.Buckets, nil
	})
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

// CreateItem validates and stores a new item, then builds its Redis gate.
func (s *Service) CreateItem(ctx context.Context, in stock.NewItem) (*stock.Item, error) {
	return s.CreateItemWith(ctx, in, nil)
}

// CreateItemWith is CreateItem with with (when not nil) written in the
// item's own transaction: an item created with a waiting room is stored
// with its room or not at all. The gate is built after the commit, from
// the database, so it knows the room.
func (s *Service) CreateItemWith(ctx context.Context, in stock.NewItem, with store.WithItem) (*stock.Item, error) {
	if in.Strategy == "" {
		in.Strategy = s.cfg.DefaultStrategy
	}
	if in.Buckets == 0 {
		in.Buckets = 1
	}
	if err := stock.ValidateNewItem(in); err != nil {
		return nil, err
	}
	it := &stock.Item{Name: in.Name, PriceCents: in.PriceCents, Stock: in.Stock, Strategy: in.Strategy,
		Buckets: in.Buckets, StartsAt: in.StartsAt, EndsAt: in.EndsAt}
	if err := s.store.CreateItem(ctx, it, with); err != nil {
		return nil, err
	}
	// The item is in the database, which is what counts; a gate that could
	// not be built now is built by the first order.
	if err := s.lua.buildGate(ctx, it.ID); err != nil {
		s.cfg.Logger.WarnContext(ctx, "gate not seeded at creation; the first order will seed it", "item", it.ID, "err", err)
	}
	if err := s.markClaims(ctx, it); err != nil {
		// The first sold-out replay without a claim restores and marks.
		s.cfg.Logger.WarnContext(ctx, "idempotency claims not marked at creation", "item", it.ID, "err", err)
	}
	s.strategy(it.Strategy).created(it)
	s.bucketed.add(it)
	// Known here at once, even if this process just answered its id
	// unknown.
	routed := *it
	s.items.Store(it.ID, &routed)
	s.missing.created(it.ID)
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
	strat := s.strategy(it.Strategy)
	if strat.Gated() {
		if err := s.ensureGate(ctx, strat, it); err != nil {
			return nil, nil, err
		}
	}
	if it.Buckets > 1 && strat.Gated() {
		return s.setStockBuckets(ctx, it, n)
	}
	touched := false
	old, updated, err := s.store.SetStock(ctx, id, n, func(old *stock.Item) (err error) {
		touched, err = strat.SetGateStock(ctx, old, n)
		return err
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

// ensureGate rebuilds an item's gate if Redis lost it, the way its
// strategy needs.
func (s *Service) ensureGate(ctx context.Context, strat Strategy, it *stock.Item) error {
	if built, err := s.gate.ExistsAll(ctx, it.ID, it.Buckets); err != nil || built {
		return err
	}
	return strat.BuildGate(ctx, it.ID)
}

// syncGateStock writes the database's stock to the item's gate, holding
// the item's row lock so no stock change runs in between.
func (s *Service) syncGateStock(ctx context.Context, id int64) error {
	return s.store.WithItemLocked(ctx, id, func(ctx context.Context, locked *store.LockedItem) error {
		units, err := locked.Stock(ctx)
		if err != nil {
			return err
		}
		_, err = s.setGateStock(ctx, id, units, false)
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
	it, err := s.publicRouting(ctx, req.ItemID)
	if err != nil {
		return nil, false, err
	}
	if s.cfg.Orders != nil {
		defer func() { s.cfg.Orders.Order(it.Strategy, err) }()
	}
	return s.strategy(it.Strategy).Place(ctx, it, req)
}

// placeSync is Place for the strategies that answer once the order is in
// the database (lua, lock): the sold-out memo and the Idempotency-Key are
// settled here, the unit sold by b.
func (s *Service) placeSync(ctx context.Context, it *stock.Item, req stock.OrderRequest, b buyer) (o *stock.Order, replayed bool, err error) {
	if req.IdempotencyKey != "" && s.soldOut.SoldOut(it.ID) {
		return s.soldOutKeyed(ctx, it, req)
	}
	state := ""
	if req.IdempotencyKey != "" {
		var prevID string
		if state, prevID, err = s.claim(ctx, it, req); err != nil {
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
		committed = func(o *stock.Order) { s.settle(ctx, it, req, o.ID) }
	}
	gen := s.soldOut.Generation(it.ID)
	if s.soldOut.SoldOut(it.ID) {
		err = stock.ErrSoldOut
	} else if req.IdempotencyKey == "" && s.knownPurchased(it, req.UserID) {
		err = errKnownPurchased
	} else {
		o, err = b.Buy(ctx, it, req, id.String(), committed)
		if errors.Is(err, stock.ErrSoldOut) {
			s.markSoldOut(ctx, it.ID, gen)
		}
		if req.IdempotencyKey == "" {
			s.notePurchase(it.ID, req.UserID, err)
		}
	}
	if err == nil {
		return o, false, nil
	}
	if req.IdempotencyKey != "" {
		prev, twinErr := s.twinOrder(ctx, it, req, err)
		if prev != nil {
			// The claim may be one this request made pending after Redis
			// lost the settled one: settle it again, or an instance that
			// knows the sell-out, which reads the claim alone, would answer
			// the next replay sold_out.
			s.settle(ctx, it, req, prev.ID)
			return prev, true, nil
		}
		if twinErr != nil {
			return nil, false, twinErr
		}
	}
	return nil, false, err
}

// errKnownPurchased is the refusal of a user this process just heard
// refused as already purchased (see PurchasedMaxAge).
var errKnownPurchased = fmt.Errorf("this user was just refused as holding an order of the item: %w", stock.ErrAlreadyPurchased)

// knownPurchased reports whether an attempt of userID on it, without an
// Idempotency-Key, is refused from memory: the user was refused as already
// purchasing less than PurchasedMaxAge ago, and the sale is open (outside
// its window the gate's answer is not_started or ended, which it is left
// to give).
func (s *Service) knownPurchased(it *stock.Item, userID string) bool {
	return s.purchased.Holds(it.ID, userID) && it.Window(time.Now()) == nil
}

// notePurchase learns from the answer to an attempt without an
// Idempotency-Key: already purchased is remembered for a moment; any other
// failure forgets the user, whose reservation may have been handed back.
func (s *Service) notePurchase(itemID int64, userID string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, stock.ErrAlreadyPurchased):
		s.purchased.Learn(itemID, userID)
	default:
		s.purchased.Forget(itemID, userID)
	}
}

// KnownPurchased reports whether this process would refuse userID's
// attempt on itemID without an Idempotency-Key from memory, as already
// purchased (see PurchasedMaxAge). It costs no round trip.
func (s *Service) KnownPurchased(itemID int64, userID string) bool {
	return s.purchased.Holds(itemID, userID)
}

// markSoldOut remembers that item id is sold out, as learned by a request
// that noted gen, and tells the other instances.
func (s *Service) markSoldOut(ctx context.Context, id int64, gen gate.MemoGen) {
	if news, last := s.soldOut.Mark(id, gen); news {
		// The other instances may mark it too; if they miss it, they
		// learn it themselves.
		if perr := s.events.SoldOut(ctx, id, last, gen); perr != nil {
			s.cfg.Logger.DebugContext(ctx, "sold out not announced", "item", id, "err", perr)
		}
	}
}

// restocked makes this and every other instance forget that item id is sold
// out: units of it are available again. This instance forgets it first,
// whatever Redis answers.
func (s *Service) restocked(ctx context.Context, id int64) {
	r := gate.NewRestockID()
	s.soldOut.Restocked(id, r)
	if err := s.events.Restock(ctx, id, r); err != nil {
		s.cfg.Logger.WarnContext(ctx, "restock not announced; other instances may refuse the item for a few seconds more",
			"item", id, "err", err)
	}
}

// KnownSoldOut reports whether this process knows the item is sold out: it
// saw it, or another instance said so, and no restock has been announced
// since (within the memo's bounds, see gate.Memo). It costs no round trip.
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
		s.bucketed.add(it)
		return it, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*stock.Item), nil
}

// Ready reports whether Redis and the database both answer.
func (s *Service) Ready(ctx context.Context) error {
	// Every master of a Redis Cluster: each holds some items' gates.
	err := gate.EachMaster(ctx, s.rdb, func(ctx context.Context, addr string, c redis.Cmdable) error {
		if err := c.Ping(ctx).Err(); err != nil {
			return gate.Error("ping "+addr, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.store.Ping(ctx)
}
