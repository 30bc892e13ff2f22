package stock

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// What an earlier request with the same Idempotency-Key achieved.
const (
	claimNew     = "new"     // none: this is the first request with the key
	claimPending = "pending" // it placed no order (yet)
	claimDone    = "done"    // it placed an order
)

// claim binds an Idempotency-Key to a user in Redis and says what an
// earlier request with it achieved. The value is "<user id>|<order id>", the
// order id empty until known (user ids never contain '|'). One SET NX GET
// (Redis 7.0+) claims and reads at once. Redis may lose the binding; the
// database's UNIQUE(item_id, idempotency_key) still refuses a second order
// under one key.
func (s *Service) claim(ctx context.Context, req OrderRequest) (state, orderID string, err error) {
	prev, err := s.rdb.SetArgs(ctx, s.keys.idem(req.ItemID, req.IdempotencyKey), req.UserID+"|",
		redis.SetArgs{Mode: "NX", Get: true, TTL: s.cfg.IdempotencyTTL}).Result()
	if errors.Is(err, redis.Nil) {
		return claimNew, "", nil
	}
	if err != nil {
		return "", "", redisError("claim idempotency key", err)
	}
	user, order, ok := strings.Cut(prev, "|")
	switch {
	case !ok || user != req.UserID:
		return "", "", ErrIdempotencyConflict
	case order != "":
		return claimDone, order, nil
	}
	return claimPending, "", nil
}

// settle records the order placed under a key, so replays are answered
// without running the strategy again. Losing it only makes replays slower.
func (s *Service) settle(ctx context.Context, req OrderRequest, orderID string) {
	err := s.rdb.SetArgs(ctx, s.keys.idem(req.ItemID, req.IdempotencyKey), req.UserID+"|"+orderID,
		redis.SetArgs{Mode: "XX", KeepTTL: true}).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		s.cfg.Logger.Warn("idempotency key not settled", "item", req.ItemID, "err", err)
	}
}

// twinOrder finds the order that another request with the same key placed,
// when the refusal err may be its doing: two requests with one key race and
// the other one wins.
func (s *Service) twinOrder(ctx context.Context, it *Item, req OrderRequest, err error) *Order {
	switch {
	case errors.Is(err, ErrAlreadyPurchased):
		// The user holds an order or a reservation: is it under this key?
		return s.replay(ctx, req, true)
	case errors.Is(err, ErrIdempotencyConflict):
		// The database may report the twin as a clash on the key itself.
		return s.replay(ctx, req, false)
	case errors.Is(err, ErrSoldOut):
		// A twin that got in before the sell-out has settled the key (the
		// strategies settle before anyone can see sold out) or, in the lua
		// gate, holds a reservation whose write may be in flight.
		if id := s.settled(ctx, req); id != "" {
			if o, err := s.store.Order(ctx, id); err == nil {
				return o
			}
		}
		if it.Strategy == StrategyLua && s.gate.reserved(ctx, it.ID, req.UserID) {
			return s.replay(ctx, req, true)
		}
	}
	return nil
}

// settled returns the order id recorded under the key, or "".
func (s *Service) settled(ctx context.Context, req OrderRequest) string {
	v, err := s.rdb.Get(ctx, s.keys.idem(req.ItemID, req.IdempotencyKey)).Result()
	if err != nil {
		return ""
	}
	user, order, _ := strings.Cut(v, "|")
	if user != req.UserID {
		return ""
	}
	return order
}

// replay finds the order that another request with the same key placed.
// With wait, that request may still be in flight, so it waits up to
// ReplayWait for its order to commit.
func (s *Service) replay(ctx context.Context, req OrderRequest, wait bool) *Order {
	deadline := time.Now()
	if wait {
		deadline = deadline.Add(s.cfg.ReplayWait)
	}
	for {
		o, key, err := s.store.OrderOf(ctx, req.ItemID, req.UserID)
		if err == nil {
			if key == req.IdempotencyKey {
				return o
			}
			return nil
		}
		if !errors.Is(err, ErrNotFound) || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(25 * time.Millisecond):
		}
	}
}
