package shop

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/stock/store"
)

// Strategy is how the items of one kind are sold. lua, lock and lua-async
// each implement it, and the Service routes every decision that depends on
// an item's kind through the item's Strategy (Service.strategy), never by
// comparing names.
type Strategy interface {
	// Name is the kind, as stored on items.
	Name() stock.StrategyName
	// Place sells one unit of it to req's user. replayed says the order
	// is an earlier request's with the same Idempotency-Key.
	Place(ctx context.Context, it *stock.Item, req stock.OrderRequest) (o *stock.Order, replayed bool, err error)
	// Gated reports whether the kind keeps stock in the Redis gate, whose
	// count a returned unit must reach as well as the database's.
	Gated() bool
	// BuildGate creates the item's gate from the database (and, for
	// lua-async, its queue) if Redis lacks it.
	BuildGate(ctx context.Context, itemID int64) error
	// SetGateStock writes a stock change to the item's gate while the
	// database holds the item's row lock (see Service.SetStock); touched
	// says whether the gate may have changed.
	SetGateStock(ctx context.Context, old *stock.Item, n int64) (touched bool, err error)
	// Release returns a cancelled order's unit to the item's gate, once
	// however often it runs.
	Release(ctx context.Context, itemID int64, orderID string) error
	// created is told of a new item, once it is in the database.
	created(it *stock.Item)
	// reservesFirst reports whether a sale reserves the unit in the gate
	// before its write: a twin request may then hold a reservation whose
	// order is still being written.
	reservesFirst() bool
	// inFlight counts, for Reconcile, the orders Redis holds and the
	// database does not have yet, adding their buyers to want; it may
	// find orphaned reservations (plan.orphans).
	inFlight(id int64, seen redisSeen, snap store.Buyers, want map[string]string, r *stock.Reconciliation, plan *repairPlan) int64
}

// redisSeen is what Reconcile read of an item in Redis.
type redisSeen struct {
	buyers       map[string]string
	entries      []redis.XMessage // the queue's and the dead letters'
	queued, dead int64
}

// strategy is the Strategy of items of kind name (validated on creation).
func (s *Service) strategy(name stock.StrategyName) Strategy {
	if st, ok := s.strategies[name]; ok {
		return st
	}
	return unknownStrategy(name)
}

// buyer writes one order of a synchronous strategy (lua, lock) once the
// Service has settled idempotency; see Service.placeSync.
type buyer interface {
	Buy(ctx context.Context, it *stock.Item, req stock.OrderRequest, orderID string, committed func(*stock.Order)) (*stock.Order, error)
}

// luaStrategy reserves in the gate, then writes (luaBuyer).
type luaStrategy struct {
	s   *Service
	buy *luaBuyer
}

func (l luaStrategy) Name() stock.StrategyName { return stock.StrategyLua }
func (l luaStrategy) Gated() bool              { return true }
func (l luaStrategy) reservesFirst() bool      { return true }
func (l luaStrategy) created(*stock.Item)      {}

func (l luaStrategy) Place(ctx context.Context, it *stock.Item, req stock.OrderRequest) (*stock.Order, bool, error) {
	return l.s.placeSync(ctx, it, req, l.buy)
}

func (l luaStrategy) BuildGate(ctx context.Context, itemID int64) error {
	return l.buy.buildGate(ctx, itemID)
}

func (l luaStrategy) SetGateStock(ctx context.Context, old *stock.Item, n int64) (bool, error) {
	return l.s.setGateStock(ctx, old.ID, n, false)
}

func (l luaStrategy) Release(ctx context.Context, itemID int64, orderID string) error {
	_, err := l.s.release(ctx, itemID, orderID, l.BuildGate)
	return err
}

func (l luaStrategy) inFlight(_ int64, seen redisSeen, snap store.Buyers, want map[string]string, r *stock.Reconciliation, plan *repairPlan) int64 {
	n := int64(0)
	for u, o := range seen.buyers {
		if snap.Done[o] || snap.Users[u] != "" {
			continue
		}
		if reservationAge(o) >= l.buy.orphanAfter {
			plan.orphans[u] = o
			r.Orphaned++
		} else {
			want[u] = o
			r.Reserved++
			n++
		}
	}
	return n
}

// lockStrategy writes under the item's Redis lock (a lock per bucket for
// an item with several, see lockBuyer); it keeps no stock in Redis.
// (Creation still builds a gate for every item, unused by it.)
type lockStrategy struct {
	s   *Service
	buy *lockBuyer
}

func (l lockStrategy) Name() stock.StrategyName { return stock.StrategyLock }
func (l lockStrategy) Gated() bool              { return false }
func (l lockStrategy) reservesFirst() bool      { return false }
func (l lockStrategy) created(*stock.Item)      {}

func (l lockStrategy) Place(ctx context.Context, it *stock.Item, req stock.OrderRequest) (*stock.Order, bool, error) {
	return l.s.placeSync(ctx, it, req, l.buy)
}

func (l lockStrategy) BuildGate(context.Context, int64) error { return nil }

// SetGateStock keeps the unused gate's stock of an item with one bucket
// (as before buckets); an item with several keeps its stock in its bucket
// rows alone (the store spreads a change over them), and its gate is not
// written.
func (l lockStrategy) SetGateStock(ctx context.Context, old *stock.Item, n int64) (bool, error) {
	if old.Buckets > 1 {
		return false, nil
	}
	return l.s.setGateStock(ctx, old.ID, n, false)
}

func (l lockStrategy) Release(context.Context, int64, string) error { return nil }

func (l lockStrategy) inFlight(int64, redisSeen, store.Buyers, map[string]string, *stock.Reconciliation, *repairPlan) int64 {
	return 0
}

// luaAsyncStrategy admits and queues in one script; writers persist.
type luaAsyncStrategy struct {
	s *Service
}

func (l luaAsyncStrategy) Name() stock.StrategyName { return stock.StrategyLuaAsync }
func (l luaAsyncStrategy) Gated() bool              { return true }
func (l luaAsyncStrategy) reservesFirst() bool      { return false }

// created makes the item's stream known to this process's writers at once.
func (l luaAsyncStrategy) created(it *stock.Item) { l.s.queue.Added(it.ID, it.Buckets) }

func (l luaAsyncStrategy) Place(ctx context.Context, it *stock.Item, req stock.OrderRequest) (*stock.Order, bool, error) {
	return l.s.placeAsync(ctx, it, req)
}

func (l luaAsyncStrategy) BuildGate(ctx context.Context, itemID int64) error {
	return l.s.queue.BuildGate(ctx, itemID)
}

// SetGateStock never lowers the stock below the units the queue holds:
// lua-async has promised them to their buyers.
func (l luaAsyncStrategy) SetGateStock(ctx context.Context, old *stock.Item, n int64) (bool, error) {
	return l.s.setGateStock(ctx, old.ID, n, n < old.Stock)
}

func (l luaAsyncStrategy) Release(ctx context.Context, itemID int64, orderID string) error {
	_, err := l.s.release(ctx, itemID, orderID, l.BuildGate)
	return err
}

func (l luaAsyncStrategy) inFlight(id int64, seen redisSeen, snap store.Buyers, want map[string]string, _ *stock.Reconciliation, _ *repairPlan) int64 {
	n := int64(0)
	for _, msg := range seen.entries {
		q, err := queue.ParseEntry(id, msg)
		if err != nil || snap.Done[q.ID] {
			continue
		}
		if _, held := want[q.UserID]; held {
			continue // will fail as already_purchased: takes no unit
		}
		want[q.UserID] = q.ID
		n++
	}
	return n
}

// unknownStrategy refuses everything: an item whose kind this build does
// not know (a newer instance created it).
type unknownStrategy stock.StrategyName

func (u unknownStrategy) Name() stock.StrategyName { return stock.StrategyName(u) }
func (u unknownStrategy) Gated() bool              { return false }
func (u unknownStrategy) reservesFirst() bool      { return false }
func (u unknownStrategy) created(*stock.Item)      {}
func (u unknownStrategy) err() error {
	return fmt.Errorf("item strategy %q is unknown to this instance: %w", string(u), stock.ErrUnavailable)
}

func (u unknownStrategy) Place(context.Context, *stock.Item, stock.OrderRequest) (*stock.Order, bool, error) {
	return nil, false, u.err()
}
func (u unknownStrategy) BuildGate(context.Context, int64) error { return u.err() }
func (u unknownStrategy) SetGateStock(context.Context, *stock.Item, int64) (bool, error) {
	return false, u.err()
}
func (u unknownStrategy) Release(context.Context, int64, string) error { return u.err() }
func (u unknownStrategy) inFlight(int64, redisSeen, store.Buyers, map[string]string, *stock.Reconciliation, *repairPlan) int64 {
	return 0
}

// release returns a cancelled order's unit to the item's gate, once per
// order however often it runs. A missing gate is built (build) from the
// database first, which counts the order if it was cancelled before the build's
// snapshot; the release then finds it counted. It reports whether this
// call took the unit back.
//
// On an item with several buckets the unit goes to the bucket the order
// id picks (gate.ReleaseBucket), whose released set remembers it.
func (s *Service) release(ctx context.Context, itemID int64, orderID string, build func(context.Context, int64) error) (bool, error) {
	it, err := s.routing(ctx, itemID)
	if err != nil {
		return false, err
	}
	for attempt := 0; ; attempt++ {
		back, err := s.gate.Release(ctx, itemID, it.Buckets, orderID)
		if !errors.Is(err, gate.ErrMissing) {
			return back, err
		}
		if attempt > 0 {
			return false, fmt.Errorf("redis: gate for item %d vanished while rebuilding: %w", itemID, stock.ErrUnavailable)
		}
		if err := build(ctx, itemID); err != nil {
			return false, err
		}
	}
}

// setGateStock is SetGateStock's common part: set the stock in the gate
// (an absent gate stays absent; strict refuses a stock below what the gate
// has taken, and an absent gate).
func (s *Service) setGateStock(ctx context.Context, id, n int64, strict bool) (touched bool, err error) {
	res, err := s.gate.SetStock(ctx, id, n, strict)
	touched = err != nil || res == gate.StockSet
	switch {
	case err != nil:
		return touched, err
	case res == gate.StockRefused:
		return touched, fmt.Errorf("stock %d is below the units sold or queued for writing: %w", n, stock.ErrStockBelowSold)
	case res == gate.StockMissing && strict:
		return touched, fmt.Errorf("redis: the gate of item %d vanished, so its queued orders cannot be counted; repeat the request: %w", id, stock.ErrUnavailable)
	}
	return touched, nil
}
