package shop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
)

// luaBuyer sells for the "lua" strategy (luaStrategy). One script checks
// the sale window, the buyer, and what is left, then reserves a unit; only
// then is the order written to the database, whose conditional UPDATE has
// the last word. A reservation whose write fails is handed back.
type luaBuyer struct {
	store  *store.Store
	writer *orderWriter // group commit: concurrent orders share a transaction
	gate   *gate.Gate
	log    *slog.Logger
	// returned, when set, is told that a hand-back put a unit back that
	// buyers may have been told is sold out.
	returned func(ctx context.Context, itemID int64)

	// orphanAfter is the age past which a reservation without an order
	// belongs to a writer that died between the gate and the commit (see
	// orphanWindow).
	orphanAfter time.Duration

	building gate.Builds // one rebuild of an item's gate at a time here

	// Hand-backs that failed (Redis down), and writes whose outcome is
	// unknown, are settled in the background by goroutines that Close stops
	// and waits for.
	retries sync.WaitGroup
	bgMu    sync.Mutex // orders retries.Add before Close's Wait
	closed  bool       // under bgMu: Close has begun waiting, no new retries
	closing chan struct{}
	once    sync.Once
}

var _ buyer = (*luaBuyer)(nil)

func newLuaBuyer(st *store.Store, gt *gate.Gate, log *slog.Logger) *luaBuyer {
	return &luaBuyer{store: st, writer: newOrderWriter(st, nil), gate: gt, log: log,
		orphanAfter: orphanWindow(DefaultRequestTimeout), closing: make(chan struct{})}
}

// orphanWindow is how old a reservation without an order must be before it
// is taken for an orphan, for orders whose requests live at most
// requestTimeout. A live request's write always ends before its deadline
// (the order writer's transactions end before the earliest deadline of
// their batch), so a reservation older than that can only gain an order
// from a commit whose answer was lost, which the hand-back then notices as
// a sold-out gate (see handback.lua), never as an oversell. The margin
// covers clocks that differ between instances (the age is read from the
// order id, a UUIDv7 stamped by the instance that reserved). At least a
// minute.
func orphanWindow(requestTimeout time.Duration) time.Duration {
	return max(time.Minute, requestTimeout+30*time.Second)
}

// Buy reserves a unit in Redis, then writes the order.
func (g *luaBuyer) Buy(ctx context.Context, it *stock.Item, req stock.OrderRequest, orderID string, committed func(*stock.Order)) (*stock.Order, error) {
	home := gate.HomeBucket(it.ID, it.Buckets, req.UserID)
	stockSeen, err := g.reserve(ctx, home, req.UserID, orderID)
	var dup *gate.DupError
	if errors.As(err, &dup) && g.orphaned(ctx, dup.OrderID) {
		// The process that reserved for this user died before writing.
		// Give the unit back and try again, once.
		if _, err := g.handBackNow(ctx, home, req.UserID, dup.OrderID, ""); err != nil {
			return nil, err
		}
		g.log.WarnContext(ctx, "orphaned reservation handed back", "item", it.ID, "user", req.UserID, "order", dup.OrderID)
		stockSeen, err = g.reserve(ctx, home, req.UserID, orderID)
	}
	if err != nil {
		return nil, err
	}
	o := &stock.Order{ID: orderID, ItemID: it.ID, UserID: req.UserID}
	err = g.writer.write(ctx, o, req.IdempotencyKey, req.Pass, it.Buckets, committed)
	switch {
	case err == nil:
		return o, nil
	case errors.Is(err, store.ErrMaybeCommitted):
		g.resolve(home, req.UserID, orderID)
	case errors.Is(err, stock.ErrSoldOut):
		g.handBack(ctx, home, req.UserID, orderID, stockSeen)
	default:
		g.handBack(ctx, home, req.UserID, orderID, "")
	}
	return nil, err
}

// reserveRounds bounds the reserve attempts of one order on an item with
// several buckets, each after its home bucket was found empty and units
// were moved there (someone else may take them first).
const reserveRounds = 32

// reserve runs the gate script in the user's home bucket and returns the
// bucket's stock it saw. If ctx ends while the script is in flight, the
// script may still reserve a unit that nobody will write: it is handed
// back once the script has answered (the hand-back only takes back a
// reservation of this very order id). On an item with several buckets an
// empty home bucket is refilled from the others (gate.Rebalance), and the
// answer is sold out only when every bucket was found empty at once.
func (g *luaBuyer) reserve(ctx context.Context, home gate.Bucket, userID, orderID string) (string, error) {
	abandoned := func() { g.handBack(context.Background(), home, userID, orderID, "") }
	built := false
	for round := 0; round < reserveRounds; round++ {
		seen, err := g.gate.Reserve(ctx, home, userID, orderID, time.Now(), abandoned)
		if home.K > 1 && errors.Is(err, stock.ErrSoldOut) {
			var soldOut bool
			if soldOut, err = g.gate.Rebalance(ctx, home.Item, home.K, home.B); err == nil {
				if soldOut {
					return "", stock.ErrSoldOut
				}
				continue
			}
		}
		if !errors.Is(err, gate.ErrMissing) {
			return seen, err
		}
		if built {
			return "", fmt.Errorf("redis: gate for item %d vanished while rebuilding: %w", home.Item, stock.ErrUnavailable)
		}
		built = true
		if err := g.buildGate(ctx, home.Item); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("item %d: its buckets kept emptying while units were moved to this buyer's; try again: %w", home.Item, stock.ErrUnavailable)
}

// buildGate builds the item's gate from the database if any of it is
// missing: at creation, and after Redis lost data (a bucket lost alone
// too: what it held is not known without the others, which keep selling,
// so the whole item is rebuilt). It holds the item's row lock: no order
// commits meanwhile (its UPDATE waits), and a rebuilder in another process
// waits, then finds the gate built. Reservations the gate still holds for
// orders in flight are kept and counted (gate.Rebuild); those Redis lost
// are lost with it (as after any Redis loss: the database's conditional
// UPDATE refuses any excess). The rebuild runs apart from ctx, which it
// waits for until ctx ends (gate.Builds).
func (g *luaBuyer) buildGate(ctx context.Context, id int64) error {
	return g.building.Do(ctx, id, func(ctx context.Context) error {
		return g.store.WithItemLocked(ctx, id, func(ctx context.Context, locked *store.LockedItem) error {
			_, err := g.rebuildLocked(ctx, locked, nil)
			return err
		})
	})
}

// rebuildLocked rebuilds the gate of the item whose row lock is held: when
// any of it is missing, or, with seen (a reconcile's repair of an item
// with several buckets), when its taken units, buyers and stock are still
// as seen. It reports whether it rebuilt it.
func (g *luaBuyer) rebuildLocked(ctx context.Context, locked *store.LockedItem, seen *gate.BucketsView) (bool, error) {
	snap, err := locked.Buyers(ctx)
	if err != nil {
		return false, err
	}
	id, k := locked.ID, snap.Item.Buckets
	if seen == nil {
		if all, err := g.gate.ExistsAll(ctx, id, k); err != nil || all {
			return false, err
		}
	} else {
		now, err := g.gate.ReadBuckets(ctx, id, k, true)
		if err != nil {
			return false, err
		}
		if now.Taken != seen.Taken || len(now.Buyers) != len(seen.Buyers) || now.Stock != seen.Stock {
			return false, nil
		}
	}
	start := time.Now()
	kept, err := g.gate.Rebuild(ctx, gate.Rebuild{Item: snap.Item, Buyers: snap.Users, Done: snap.Done,
		Cancelled: snap.Cancelled, KeepHeld: true, Epoch: locked.QueueEpoch, Roomed: snap.Roomed})
	if err != nil {
		return false, err
	}
	g.log.InfoContext(ctx, "gate rebuilt from database", "item", id, "buckets", k, "stock", snap.Item.Stock,
		"sold", snap.Item.Sold, "buyers", len(snap.Users), "cancelled", len(snap.Cancelled), "held", kept,
		"took", time.Since(start).Round(time.Millisecond))
	return true, nil
}

// orphaned reports whether the reservation for orderID is old enough that
// its writer must be gone, and its order never reached the database.
func (g *luaBuyer) orphaned(ctx context.Context, orderID string) bool {
	id, err := uuid.Parse(orderID)
	if err != nil || id.Version() != 7 {
		return false
	}
	sec, nsec := id.Time().UnixTime()
	if time.Since(time.Unix(sec, nsec)) < g.orphanAfter {
		return false
	}
	_, err = g.store.Order(ctx, orderID)
	return errors.Is(err, stock.ErrNotFound)
}

// handBack returns a reservation whose write failed. It must not depend on
// the request's context, which may be what failed: it tries once while ctx
// has time left (so the user can buy again at once), and otherwise, or when
// Redis is down too, keeps trying in the background for a while.
func (g *luaBuyer) handBack(ctx context.Context, bk gate.Bucket, userID, orderID, soldOutAt string) {
	itemID := bk.Item
	try := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		back, err := g.handBackNow(ctx, bk, userID, orderID, soldOutAt)
		if err == nil && !back && soldOutAt == "" && g.returned != nil {
			// Kept because the gate is gone (Redis lost it): the unit comes
			// back with the rebuild, which counts it free from the
			// database, but a sell-out the gate gave while it was reserved
			// must be forgotten now, not at the memo's safety bound. Rare:
			// one more round trip on a hand-back that returned nothing.
			if ok, xerr := g.gate.ExistsAll(ctx, itemID, bk.K); xerr == nil && !ok {
				back = true
			}
		}
		if back && soldOutAt == "" && g.returned != nil {
			g.returned(ctx, itemID)
		}
		return err
	}
	delay := time.Duration(0)
	if ctx.Err() == nil {
		// The request's time left, but not its cancellation: a client
		// that goes away now must not cut the hand-back short.
		tctx := context.WithoutCancel(ctx)
		cancel := context.CancelFunc(func() {})
		if deadline, ok := ctx.Deadline(); ok {
			tctx, cancel = context.WithDeadline(tctx, deadline)
		}
		err := try(tctx)
		cancel()
		if err == nil {
			return
		}
		delay = 100 * time.Millisecond
	}
	started := g.goRetry(func() {
		for i := 0; i < 20; i++ {
			select {
			case <-g.closing:
				g.log.Warn("hand-back abandoned at shutdown", "item", itemID, "user", userID, "order", orderID)
				return
			case <-time.After(delay):
			}
			if err := try(context.Background()); err == nil {
				return
			} else if i == 19 {
				g.log.Error("hand-back failed; the unit stays reserved until reconciled", "item", itemID, "user", userID, "order", orderID, "err", err)
			}
			delay = min(max(2*delay, 100*time.Millisecond), 5*time.Second)
		}
	})
	if !started {
		g.log.Warn("hand-back abandoned at shutdown", "item", itemID, "user", userID, "order", orderID)
	}
}

// goRetry runs f in the background unless Close has begun waiting for the
// retries (a call abandoned in the gate's pipeline hands back from the
// pipeline's goroutine, possibly while the service closes: a WaitGroup's
// Add must not race its Wait).
func (g *luaBuyer) goRetry(f func()) bool {
	g.bgMu.Lock()
	defer g.bgMu.Unlock()
	if g.closed {
		return false
	}
	g.retries.Add(1)
	go func() {
		defer g.retries.Done()
		f()
	}()
	return true
}

// resolve settles a reservation whose write may have committed although
// its caller heard 503 (the database stopped answering during the commit).
// It asks the database, as soon as it answers, whether the order is there:
// if it is, the unit is sold and the reservation stays (the user's retry,
// or a replay of the same Idempotency-Key, finds the order); if not, the
// unit is handed back. "Not there" must be heard twice, a second apart: a
// commit held in a stalled connection reaches the database when it heals,
// at about the moment the first question does.
func (g *luaBuyer) resolve(bk gate.Bucket, userID, orderID string) {
	itemID := bk.Item
	started := g.goRetry(func() {
		delay := 250 * time.Millisecond
		absent := 0
		for i := 0; i < 60; i++ {
			select {
			case <-g.closing:
				g.log.Warn("write outcome unknown at shutdown; the reservation stays until the orphan window or a reconcile", "item", itemID, "user", userID, "order", orderID)
				return
			case <-time.After(delay):
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := g.store.Order(ctx, orderID)
			cancel()
			switch {
			case err == nil:
				g.log.Info("write answered 503 had committed; the order stands", "item", itemID, "user", userID, "order", orderID)
				return
			case errors.Is(err, stock.ErrNotFound):
				if absent++; absent == 2 {
					g.handBack(context.Background(), bk, userID, orderID, "")
					return
				}
				delay = time.Second
				continue
			}
			absent = 0
			delay = min(2*delay, 2*time.Second)
		}
		g.log.Error("write outcome still unknown; the reservation stays until the orphan window or a reconcile", "item", itemID, "user", userID, "order", orderID)
	})
	if !started {
		g.log.Warn("write outcome unknown at shutdown; the reservation stays until the orphan window or a reconcile", "item", itemID, "user", userID, "order", orderID)
	}
}

// handBackNow runs the hand-back once and reports whether the unit went
// back to the gate.
func (g *luaBuyer) handBackNow(ctx context.Context, bk gate.Bucket, userID, orderID, soldOutAt string) (bool, error) {
	return g.gate.HandBack(ctx, bk, userID, orderID, soldOutAt)
}

// Close finishes queued writes, then stops hand-back retries and waits.
func (g *luaBuyer) Close() {
	g.writer.close()
	g.once.Do(func() { close(g.closing) })
	g.bgMu.Lock()
	g.closed = true
	g.bgMu.Unlock()
	g.building.Close()
	g.retries.Wait()
}
