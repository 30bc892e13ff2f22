package shop

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
)

// Redis may lose the Idempotency-Key claims (a restart without
// persistence, a failover before they reached the replica). Before the
// sell-out that costs nothing: a replay runs the strategy, which meets its
// own order in the database. After it, the sold-out paths answer from the
// claims alone, so a replay whose claim was lost would hear sold_out
// instead of its order. Each slot that holds claims therefore holds a mark
// too, set when the item is created: a sold-out path that finds no claim
// reads the mark in the same round trip, and where it is gone, the claims
// are written back from the database once (restoreClaims) before the
// answer. A flood of new keys costs nothing more while the mark is there.

// restoreTimeout bounds a restore, which a request waits for.
const restoreTimeout = 5 * time.Second

// claimsMark is the mark of the slot that holds key's claim for it.
func (s *Service) claimsMark(it *stock.Item, key string) string {
	if it.Buckets <= 1 {
		return s.keys.ClaimsMark(it.ID)
	}
	return s.keys.Bucket(gate.PickBucket(it.ID, it.Buckets, key)).ClaimsMark
}

// markClaims sets the marks of every slot that holds it's claims.
func (s *Service) markClaims(ctx context.Context, it *stock.Item) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if it.Buckets <= 1 {
			p.Set(ctx, s.keys.ClaimsMark(it.ID), 1, 0)
			return nil
		}
		for _, bk := range gate.AllBuckets(it.ID, it.Buckets) {
			p.Set(ctx, s.keys.Bucket(bk).ClaimsMark, 1, 0)
		}
		return nil
	})
	if err != nil {
		return gate.Error("mark idempotency claims", err)
	}
	return nil
}

// restoreClaims writes back the claim of every order of it placed under an
// Idempotency-Key within the claims' lifetime, as the database has it (the
// order under a key is the truth, whatever a claim made since the loss
// says), then the marks. Concurrent callers in this process share one
// restore.
func (s *Service) restoreClaims(ctx context.Context, it *stock.Item) error {
	ch := s.restoring.DoChan(strconv.FormatInt(it.ID, 10), func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
		defer cancel()
		now := store.Now()
		keyed, err := s.store.KeyedOrders(ctx, it.ID, now.Add(-s.cfg.IdempotencyTTL))
		if err != nil {
			return nil, err
		}
		for len(keyed) > 0 {
			n := min(len(keyed), 1000)
			_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, o := range keyed[:n] {
					if ttl := s.cfg.IdempotencyTTL - now.Sub(o.CreatedAt); ttl >= time.Second {
						p.Set(ctx, s.idemKey(it, o.Key), o.UserID+"|"+o.ID, ttl)
					}
				}
				return nil
			})
			if err != nil {
				return nil, gate.Error("restore idempotency claims", err)
			}
			keyed = keyed[n:]
		}
		if err := s.markClaims(ctx, it); err != nil {
			return nil, err
		}
		s.cfg.Logger.WarnContext(ctx, "idempotency claims restored from the database (Redis lost them)", "item", it.ID)
		return nil, nil
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recoverClaim restores it's claims and reads req's claim again: what a
// sold-out path does when it found none and no mark either. "" when there
// is none.
func (s *Service) recoverClaim(ctx context.Context, it *stock.Item, req stock.OrderRequest) (string, error) {
	if err := s.restoreClaims(ctx, it); err != nil {
		return "", err
	}
	prev, err := s.rdb.Get(ctx, s.idemKey(it, req.IdempotencyKey)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", gate.Error("read idempotency key", err)
	}
	return prev, nil
}
