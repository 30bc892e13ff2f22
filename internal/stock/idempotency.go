package stock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/claim.lua
var claimSrc string

var claimScript = redis.NewScript(claimSrc)

// claim states, as the claim script names them.
const (
	claimNew      = "new"      // first request with this key
	claimPending  = "pending"  // an earlier request with this key has no order (yet)
	claimDone     = "done"     // an earlier request with this key placed an order
	claimConflict = "conflict" // the key belongs to another user
)

// claim binds an Idempotency-Key to a user in Redis and says what an
// earlier request with it achieved. Redis may lose the binding; the
// database's UNIQUE(item_id, idempotency_key) still refuses a second order
// under one key.
func (s *Service) claim(ctx context.Context, req OrderRequest) (state, orderID string, err error) {
	res, err := claimScript.Run(ctx, s.rdb, []string{s.keys.idem(req.ItemID, req.IdempotencyKey)},
		req.UserID, int64(s.cfg.IdempotencyTTL/time.Second)).StringSlice()
	if err != nil {
		return "", "", redisError("claim idempotency key", err)
	}
	if len(res) != 2 {
		return "", "", fmt.Errorf("redis: claim: unexpected reply %q", res)
	}
	if res[0] == claimConflict {
		return "", "", ErrIdempotencyConflict
	}
	return res[0], res[1], nil
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
