package shop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// The order lifecycle: created -> paid, or created -> cancelled (by its
// user, or by the sweeper or a late payment once its payment deadline has
// passed: "expired"). Exactly one transition wins, by a conditional UPDATE
// on the status. Cancelling returns the order's unit to stock exactly once:
// in the database in the cancelling transaction, in the Redis gate by a
// release that is idempotent per order and retried by the sweeper until
// the order records it (stock_returned_at).
//
// A cancelled order still counts as its user's one order for the item: the
// unit goes back to other buyers, not to the same user.

// LifecycleObserver receives order lifecycle events (metrics). It must be
// fast and safe for concurrent use.
type LifecycleObserver interface {
	// Transition reports an order this process moved to paid, cancelled or
	// expired (the Transition* names) on an item of strategy.
	Transition(strategy stock.StrategyName, to string)
	// StockReturned reports a cancelled order's unit recorded as back in
	// stock; retried means the sweeper finished a return left undone.
	StockReturned(strategy stock.StrategyName, retried bool)
}

// Transitions as reported to LifecycleObserver.
const (
	TransitionPaid      = "paid"
	TransitionCancelled = "cancelled"
	TransitionExpired   = "expired"
)

const (
	// sweepBatch bounds the orders one sweep expires, and the returns it
	// finishes.
	sweepBatch = 500
	// sweepTimeout bounds one sweep.
	sweepTimeout = 30 * time.Second
	// returnGrace is how old a cancellation must be before the sweeper
	// finishes its stock return: the cancelling request does it itself and
	// is normally done long before.
	returnGrace = 2 * time.Second
	// returnTimeout bounds a return to the gate after the cancellation has
	// committed; it does not depend on the request, whose client may be gone.
	returnTimeout = 5 * time.Second
)

type orderAction int

const (
	actionPay orderAction = iota
	actionCancel
)

// PayOrder records that userID paid for order id (as a payment provider's
// callback would). Paying a paid order answers it again. A cancelled order
// gives ErrOrderCancelled, or ErrOrderExpired when its deadline cancelled
// it; an order past its deadline is expired on the spot. A failed lua-async
// order gives ErrOrderFailed. Another user's order is ErrNotFound.
func (s *Service) PayOrder(ctx context.Context, id, userID string) (*stock.Order, error) {
	return s.settleOrder(ctx, id, userID, actionPay)
}

// CancelOrder cancels userID's order id and returns its unit to stock.
// Cancelling a cancelled order answers it again; a paid order gives
// ErrOrderPaid, a failed lua-async order ErrOrderFailed. Another user's
// order is ErrNotFound.
func (s *Service) CancelOrder(ctx context.Context, id, userID string) (*stock.Order, error) {
	return s.settleOrder(ctx, id, userID, actionCancel)
}

// settleOrder is the one way an order leaves "created" at a user's request.
// It reads the order through the service, so an order a strategy has not yet
// persisted (status pending) gives ErrOrderPending. Each attempt either
// wins its conditional update or finds the order changed by whoever won;
// a changed order is final, so two reads suffice.
func (s *Service) settleOrder(ctx context.Context, id, userID string, act orderAction) (*stock.Order, error) {
	if err := stock.ValidateUserID(userID); err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 3; attempt++ {
		o, err := s.Order(ctx, id)
		if err != nil {
			return nil, err
		}
		if o.UserID != userID {
			return nil, fmt.Errorf("order %s: %w", id, stock.ErrNotFound) // another user's order does not exist for this one
		}
		switch o.Status {
		case stock.StatusPending:
			return nil, stock.ErrOrderPending
		case stock.StatusFailed:
			// It never held a unit: there is nothing to pay for or give back.
			return nil, fmt.Errorf("order %s failed (%s): %w", id, o.Reason, stock.ErrOrderFailed)
		case stock.StatusPaid:
			if act == actionPay {
				return o, nil
			}
			return nil, stock.ErrOrderPaid
		case stock.StatusCancelled:
			switch {
			case act == actionCancel:
				return o, nil
			case o.Expired():
				return nil, stock.ErrOrderExpired
			}
			return nil, stock.ErrOrderCancelled
		case stock.StatusCreated:
		default:
			return nil, fmt.Errorf("order %s has unknown status %q", id, o.Status)
		}
		now := s.now()
		expire := o.Due(now)
		var won bool
		switch {
		case expire:
			won, err = s.cancel(ctx, o, now, true)
		case act == actionPay:
			won, err = s.pay(ctx, o, now)
		default:
			won, err = s.cancel(ctx, o, now, false)
		}
		if err != nil {
			return nil, err
		}
		if !won {
			continue // somebody else settled it: answer with what it is now
		}
		o.UpdatedAt = now
		switch {
		case expire && act == actionPay:
			return nil, stock.ErrOrderExpired
		case expire || act == actionCancel:
			o.Status = stock.StatusCancelled
		default:
			o.Status = stock.StatusPaid
		}
		return o, nil
	}
	return nil, fmt.Errorf("order %s kept changing while being settled: %w", id, stock.ErrUnavailable)
}

// RecordPayment records a payment the provider reported
// (store.RecordPayment) and reports an order it paid as a transition. A
// payment for a lua-async order still queued (pending, not yet in the
// database) is not recorded: ErrOrderPending, so the provider retries
// once the order is written, rather than its payment being rejected as
// naming no order.
func (s *Service) RecordPayment(ctx context.Context, p stock.Payment, currency string) (stock.PaymentRecord, error) {
	if stock.ValidOrderID(p.OrderID) {
		if o, err := s.findOrder(ctx, p.OrderID); err == nil && o.Status == stock.StatusPending {
			return stock.PaymentRecord{}, fmt.Errorf("order %s is not written yet: %w", p.OrderID, stock.ErrOrderPending)
		}
		// Any other answer (written, unknown, unavailable) is the store's to judge.
	}
	rec, err := s.store.RecordPayment(ctx, p, currency)
	if err == nil && !rec.Duplicate && rec.Outcome == stock.PaymentPaid {
		s.observe(ctx, rec.ItemID, TransitionPaid)
	}
	return rec, err
}

func (s *Service) pay(ctx context.Context, o *stock.Order, now time.Time) (bool, error) {
	won, err := s.store.PayOrder(ctx, o.ID, now)
	if won {
		s.observe(ctx, o.ItemID, TransitionPaid)
	}
	return won, err
}

// observe reports a transition to the Lifecycle observer.
func (s *Service) observe(ctx context.Context, itemID int64, to string) {
	if s.cfg.Lifecycle == nil {
		return
	}
	if it, err := s.routing(ctx, itemID); err == nil {
		s.cfg.Lifecycle.Transition(it.Strategy, to)
	}
}

// cancel cancels o if it is still created (with expiry: and past its
// deadline at now) and, when this call won, returns its unit to stock. The
// database part is one transaction; the Redis part, for items with a gate,
// follows it and, should it fail, is finished by the sweeper.
func (s *Service) cancel(ctx context.Context, o *stock.Order, now time.Time, expiry bool) (bool, error) {
	it, err := s.routing(ctx, o.ItemID)
	if err != nil {
		return false, err
	}
	gated := s.strategy(it.Strategy).Gated()
	won, err := s.store.CancelOrder(ctx, o, now, expiry, !gated)
	if err != nil || !won {
		return false, err
	}
	if s.cfg.Lifecycle != nil {
		to := TransitionCancelled
		if expiry {
			to = TransitionExpired
		}
		s.cfg.Lifecycle.Transition(it.Strategy, to)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), returnTimeout)
	defer cancel()
	if !gated {
		if s.cfg.Lifecycle != nil {
			s.cfg.Lifecycle.StockReturned(it.Strategy, false)
		}
		s.restocked(rctx, it.ID)
		return true, nil
	}
	if err := s.returnStock(rctx, it, o.ID, false); err != nil {
		s.cfg.Logger.WarnContext(ctx, "order cancelled and its unit returned in the database; the sweeper will return it to the Redis gate",
			"order", o.ID, "item", it.ID, "err", err)
	}
	return true, nil
}

// returnStock returns a cancelled order's unit to the item's gate (a no-op
// if it was returned before, or counted by a gate rebuilt since), records
// that in the order, and announces the restock.
func (s *Service) returnStock(ctx context.Context, it *stock.Item, orderID string, retried bool) error {
	if err := s.strategy(it.Strategy).Release(ctx, it.ID, orderID); err != nil {
		return err
	}
	marked, err := s.store.MarkStockReturned(ctx, orderID, store.Now())
	if err != nil {
		return err
	}
	if marked {
		if s.cfg.Lifecycle != nil {
			s.cfg.Lifecycle.StockReturned(it.Strategy, retried)
		}
		s.restocked(ctx, it.ID)
	}
	return nil
}

// ExpireDue cancels up to one batch (500) of created orders whose payment
// deadline has passed at now, and returns their units. Any number of
// instances may run it on the same orders: each order is expired once. It
// returns how many orders this call expired.
func (s *Service) ExpireDue(ctx context.Context, now time.Time) (int, error) {
	now = now.UTC().Truncate(time.Microsecond)
	due, err := s.store.DueOrders(ctx, now, sweepBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	err = eachOrder(due, func(r store.OrderRef) error {
		won, err := s.cancel(ctx, &stock.Order{ID: r.ID, ItemID: r.ItemID}, now, true)
		if won {
			n++
		}
		return err
	})
	return n, err
}

// ReturnStock finishes up to one batch (500) of stock returns left undone
// (a Redis failure or a crash after the cancellation committed), for orders
// cancelled at or before before. It returns how many it finished.
func (s *Service) ReturnStock(ctx context.Context, before time.Time) (int, error) {
	refs, err := s.store.UnreturnedOrders(ctx, before.UTC(), sweepBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	err = eachOrder(refs, func(r store.OrderRef) error {
		it, err := s.routing(ctx, r.ItemID)
		if err != nil {
			return err
		}
		if err := s.returnStock(ctx, it, r.ID, true); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// eachOrder runs fn on every order, past failures but not past an outage.
func eachOrder(refs []store.OrderRef, fn func(store.OrderRef) error) error {
	failed := 0
	var first error
	for _, r := range refs {
		err := fn(r)
		if err == nil {
			continue
		}
		failed++
		if first == nil {
			first = fmt.Errorf("order %s: %w", r.ID, err)
		}
		if errors.Is(err, stock.ErrUnavailable) {
			break // the next sweep retries
		}
	}
	if first != nil {
		return fmt.Errorf("%d of %d orders failed, the first: %w", failed, len(refs), first)
	}
	return nil
}

// now is Config.Now at the precision DATETIME(6) keeps (as store.Now).
func (s *Service) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }

// startSweeper runs ExpireDue and ReturnStock every SweepInterval until
// Close.
func (s *Service) startSweeper() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopSweep = cancel
	if s.cfg.SweepInterval < 0 {
		return
	}
	s.sweeper.Add(1)
	go func() {
		defer s.sweeper.Done()
		t := time.NewTicker(s.cfg.SweepInterval)
		defer t.Stop()
		var warned time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := s.sweep(ctx)
			if err != nil && ctx.Err() == nil && time.Since(warned) > 10*time.Second {
				warned = time.Now()
				s.cfg.Logger.Warn("sweeper: will retry", "err", err)
			}
		}
	}()
}

func (s *Service) sweep(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	// Deadlines go by Config.Now; the grace periods of unfinished work
	// (returns, moves) by the real clock.
	_, err1 := s.ExpireDue(ctx, s.cfg.Now())
	now := time.Now()
	_, err2 := s.ReturnStock(ctx, now.Add(-returnGrace))
	_, err3 := s.FinishMoves(ctx, now.Add(-moveGrace))
	return errors.Join(err1, err2, err3)
}
