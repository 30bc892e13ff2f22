package shop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
)

// What an earlier request with the same Idempotency-Key achieved.
const (
	claimNew  = "new"     // none: this is the first request with the key
	claimOpen = "pending" // it placed no order (yet)
	claimDone = "done"    // it placed an order
)

// claim binds an Idempotency-Key to a user in Redis and says what an
// earlier request with it achieved. The value is "<user id>|<order id>", the
// order id empty until known (user ids never contain '|'). One SET NX GET
// (Redis 7.0+) claims and reads at once. Redis may lose the binding; the
// database's UNIQUE(item_id, idempotency_key) still refuses a second order
// under one key.
func (s *Service) claim(ctx context.Context, it *stock.Item, req stock.OrderRequest) (state, orderID string, err error) {
	var cmd *redis.StatusCmd
	if err := s.pipe.Do(ctx, func(ctx context.Context, p redis.Pipeliner) {
		cmd = p.SetArgs(ctx, s.idemKey(it, req.IdempotencyKey), req.UserID+"|",
			redis.SetArgs{Mode: "NX", Get: true, TTL: s.cfg.IdempotencyTTL})
	}, nil); err != nil { // an abandoned claim leaves the key pending: its retry goes on
		return "", "", gate.Error("claim idempotency key", err)
	}
	return claimState(cmd.Val(), cmd.Err(), req.UserID)
}

// claimState reads the reply of the claim's SET NX GET.
func claimState(prev string, err error, userID string) (state, orderID string, _ error) {
	if errors.Is(err, redis.Nil) {
		return claimNew, "", nil
	}
	if err != nil {
		return "", "", gate.Error("claim idempotency key", err)
	}
	user, order, ok := strings.Cut(prev, "|")
	switch {
	case !ok || user != userID:
		return "", "", stock.ErrIdempotencyConflict
	case order != "":
		return claimDone, order, nil
	}
	return claimOpen, "", nil
}

// soldOutKeyed answers a keyed request for an item this process knows is
// sold out, in one round trip: it reads the key's claim and, in the lua
// gate, asks whether the user holds a reservation. A twin that committed an
// order before the sell-out has settled the key by then (strategies settle
// before anyone can see sold out), so the claim shows its order; a lua twin
// still writing holds a reservation.
//
// It only reads, like lua-async's soldOutAsync: a refusal is not an answer
// a key keeps (a pending claim lets a retry run the strategy anyway, so
// after a restock the retry may buy, with or without one), and this path
// skips the per-user limit, so a claim written here would let one user
// store a 24 h key per distinct Idempotency-Key without bound.
func (s *Service) soldOutKeyed(ctx context.Context, it *stock.Item, req stock.OrderRequest) (*stock.Order, bool, error) {
	var c twinRead
	err := s.pipe.Do(ctx, func(ctx context.Context, p redis.Pipeliner) {
		c = s.readTwin(ctx, p, it, req)
	}, nil)
	if err == nil {
		err = c.err()
	}
	if err != nil {
		return nil, false, gate.Error("claim idempotency key", err)
	}
	claim, marked, reserved := c.claim, c.marked, c.reserved
	prev, prevErr := claim.Val(), claim.Err()
	if errors.Is(prevErr, redis.Nil) && marked.Val() == 0 {
		// No claim, and Redis lost the claims: the database may have
		// this key's order.
		if prev, prevErr = s.recoverClaim(ctx, it, req); prevErr == nil && prev == "" {
			prevErr = redis.Nil
		}
	}
	state, orderID, err := claimState(prev, prevErr, req.UserID)
	if err != nil {
		return nil, false, err
	}
	if state == claimDone {
		if o, err := s.store.Order(ctx, orderID); err == nil {
			return o, true, nil
		}
	}
	if state == claimOpen && s.mayBeUnsettled(c.age) {
		if o, err := s.replay(ctx, it, req, false); o != nil && err == nil {
			s.settle(ctx, it, req, o.ID)
			return o, true, nil
		}
	}
	if reserved != nil && reserved.Val() {
		o, err := s.replay(ctx, it, req, true)
		if o != nil {
			return o, true, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	return nil, false, stock.ErrSoldOut
}

// settle records the order placed under a key, so replays are answered
// without running the strategy again. Losing it only makes replays slower.
func (s *Service) settle(ctx context.Context, it *stock.Item, req stock.OrderRequest, orderID string) {
	err := s.rdb.SetArgs(ctx, s.idemKey(it, req.IdempotencyKey), req.UserID+"|"+orderID,
		redis.SetArgs{Mode: "XX", KeepTTL: true}).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		s.cfg.Logger.WarnContext(ctx, "idempotency key not settled", "item", req.ItemID, "err", err)
	}
}

// twinOrder finds the order that another request with the same key placed,
// when the refusal err may be its doing: two requests with one key race and
// the other one wins. It gives errTwinInFlight when that request may still
// be writing (see replay): the refusal must not stand then.
func (s *Service) twinOrder(ctx context.Context, it *stock.Item, req stock.OrderRequest, err error) (*stock.Order, error) {
	switch {
	case errors.Is(err, stock.ErrAlreadyPurchased):
		// The user holds an order or a reservation: is it under this key?
		return s.replay(ctx, it, req, true)
	case errors.Is(err, stock.ErrIdempotencyConflict):
		// The database may report the twin as a clash on the key itself.
		return s.replay(ctx, it, req, false)
	case errors.Is(err, stock.ErrSoldOut):
		// A twin that got in before the sell-out has settled the key (the
		// strategies settle before anyone can see sold out) or, in the lua
		// gate, holds a reservation whose write may be in flight. One round
		// trip asks both.
		pipe := s.rdb.Pipeline()
		c := s.readTwin(ctx, pipe, it, req)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil
		}
		prev := c.claim.Val()
		if _, id, _ := strings.Cut(prev, "|"); id == "" && c.marked.Val() == 0 {
			// Redis lost the claims: the database may have this key's order.
			if p, err := s.recoverClaim(ctx, it, req); err == nil {
				prev = p
			}
		}
		user, id, _ := strings.Cut(prev, "|")
		if user == req.UserID && id != "" {
			if o, err := s.store.Order(ctx, id); err == nil {
				return o, nil
			}
		}
		if user == req.UserID && id == "" && s.mayBeUnsettled(c.age) {
			return s.replay(ctx, it, req, false)
		}
		if reserved := c.reserved; reserved != nil && reserved.Val() {
			return s.replay(ctx, it, req, true)
		}
	}
	return nil, nil
}

// errTwinInFlight answers a keyed request refused (already purchased, or
// sold out while its user holds a reservation) because of a reservation
// whose order is not in the database: it may be this key's first request,
// still writing (a slow database, a write waiting for units moved between
// bucket rows), whose answer will be an order, or one whose write failed
// and handed the unit back. Refusing the replay could give one key two
// answers, so it is a 503: a retry with the same key finds the order once
// written, or buys if that write failed.
var errTwinInFlight = fmt.Errorf("an earlier request of this user, maybe with this Idempotency-Key, has not written its order; retry with the same key: %w", stock.ErrUnavailable)

// replay finds the order that another request with the same key placed:
// the order, or nil when the user's order is under another key (or, without
// wait, when there is none). With wait, that request may still be in
// flight: it waits for the user's order as long as a request can still
// write one (ReplayWait, the request timeout by default), within its own
// deadline, and gives errTwinInFlight if none is there by then, or the
// database cannot tell, or (lua) the user's reservation is gone without an
// order: its write failed.
func (s *Service) replay(ctx context.Context, it *stock.Item, req stock.OrderRequest, wait bool) (*stock.Order, error) {
	deadline := time.Now()
	if wait {
		deadline = deadline.Add(s.cfg.ReplayWait)
		if d, ok := ctx.Deadline(); ok && d.Add(-answerMargin).Before(deadline) {
			deadline = d.Add(-answerMargin) // time to answer the 503
		}
	}
	reserves := wait && s.strategy(it.Strategy).reservesFirst()
	pause := 25 * time.Millisecond
	for {
		o, key, err := s.store.OrderOf(ctx, req.ItemID, req.UserID)
		switch {
		case err == nil && key == req.IdempotencyKey:
			return o, nil
		case err == nil:
			return nil, nil
		case !wait:
			return nil, nil
		case !errors.Is(err, stock.ErrNotFound) || time.Now().After(deadline):
			return nil, errTwinInFlight
		}
		if reserves {
			// A reservation stays once its order is written, and goes only
			// when its write failed (handed back): nothing left to wait for.
			held, err := s.rdb.HExists(ctx, s.buyersKey(it, req.UserID), req.UserID).Result()
			if err == nil && !held {
				if o, key, err := s.store.OrderOf(ctx, req.ItemID, req.UserID); err == nil {
					if key == req.IdempotencyKey {
						return o, nil
					}
					return nil, nil
				}
				return nil, errTwinInFlight
			}
		}
		select {
		case <-ctx.Done():
			return nil, errTwinInFlight
		case <-time.After(min(pause, time.Until(deadline)+time.Millisecond)):
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// buyersKey is the buyers hash that holds userID's reservation of it: its
// home bucket's.
func (s *Service) buyersKey(it *stock.Item, userID string) string {
	if it.Buckets <= 1 {
		return s.keys.Buyers(it.ID)
	}
	return s.keys.Bucket(gate.HomeBucket(it.ID, it.Buckets, userID)).Buyers
}

// idemKey is the Redis key of an Idempotency-Key of it. On an item with
// several buckets it lives in the bucket the key picks (the same for every
// user, so a key reused by another user is still found), which spreads the
// claims over the buckets' slots.
func (s *Service) idemKey(it *stock.Item, key string) string {
	if it.Buckets <= 1 {
		return s.keys.Idem(it.ID, key)
	}
	return s.keys.Bucket(gate.PickBucket(it.ID, it.Buckets, key)).Idem(key)
}

// twinRead is what a keyed request refused as sold out reads, in one round
// trip, of an earlier request with its key: the key's claim, whether
// Redis still has the item's claims (claimsMark), and the user's
// reservation (strategies that reserve first) or the claim's remaining
// lifetime (lock, see mayBeUnsettled).
type twinRead struct {
	claim    *redis.StringCmd
	marked   *redis.IntCmd
	reserved *redis.BoolCmd     // nil unless the strategy reserves first
	age      *redis.DurationCmd // the claim's PTTL; nil unless lock
}

func (s *Service) readTwin(ctx context.Context, p redis.Pipeliner, it *stock.Item, req stock.OrderRequest) twinRead {
	key := s.idemKey(it, req.IdempotencyKey)
	c := twinRead{claim: p.Get(ctx, key), marked: p.Exists(ctx, s.claimsMark(it, req.IdempotencyKey))}
	if s.strategy(it.Strategy).reservesFirst() {
		c.reserved = p.HExists(ctx, s.buyersKey(it, req.UserID), req.UserID)
	}
	if it.Strategy == stock.StrategyLock {
		c.age = p.PTTL(ctx, key)
	}
	return c
}

// err is the first failure among the reads, the claim's absence aside.
func (c twinRead) err() error {
	err := c.marked.Err()
	if err == nil && c.reserved != nil {
		err = c.reserved.Err()
	}
	if err == nil && c.age != nil {
		err = c.age.Err()
	}
	return err
}

// mayBeUnsettled reports whether a pending claim (age: its PTTL, nil
// when not read) may belong to a lock order committed but not settled yet.
// A lock order leaves no trace in Redis before its writer settles the key,
// right after the commit, and by then another writer (another bucket's,
// another instance's) may have met the sell-out: the replay reads the
// claim pending and the item sold out, and its twin's 201 is in the
// database. Only a claim made within the request timeout (plus a second)
// can be that; an older pending claim is a request long over, refused or
// gone, so a flood of refused keys retried after the sell-out costs no
// database read.
func (s *Service) mayBeUnsettled(age *redis.DurationCmd) bool {
	if age == nil || age.Err() != nil || age.Val() < 0 {
		return false
	}
	made := s.cfg.IdempotencyTTL - age.Val()
	return made < s.cfg.RequestTimeout+time.Second
}
