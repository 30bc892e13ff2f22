package shop

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
)

// placeAsync is the "lua-async" strategy: the queue admits the order and
// queues it in one script (see queue.Queue.Enqueue); writers persist it in
// batches. The answer is the order, pending: it will be in the database
// once a writer reaches it.
func (s *Service) placeAsync(ctx context.Context, it *stock.Item, req stock.OrderRequest) (*stock.Order, bool, error) {
	if s.soldOut.SoldOut(it.ID) {
		if req.IdempotencyKey == "" {
			return nil, false, stock.ErrSoldOut
		}
		return s.soldOutAsync(ctx, it, req)
	}
	if req.IdempotencyKey == "" && s.knownPurchased(it, req.UserID) {
		return nil, false, errKnownPurchased
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, false, fmt.Errorf("order id: %w", err)
	}
	orderID := id.String()
	// An item with several buckets keeps the key's claim in the bucket the
	// key picks, not in the home bucket the script runs on: it is claimed
	// first, naming the order id (claimAsync).
	claimed := it.Buckets > 1 && req.IdempotencyKey != ""
	rerun := false
	if claimed {
		var prev *stock.Order
		if orderID, rerun, prev, err = s.claimAsync(ctx, it, req, orderID); err != nil || prev != nil {
			return prev, prev != nil, err
		}
	}
	gen := s.soldOut.Generation(it.ID)
	o, replayOf, err := s.queue.Enqueue(ctx, it, req, orderID)
	if errors.Is(err, stock.ErrPassRequired) && s.staleRoomMark(ctx, it.ID) {
		o, replayOf, err = s.queue.Enqueue(ctx, it, req, orderID)
	}
	if req.IdempotencyKey == "" {
		s.notePurchase(it.ID, req.UserID, err)
	}
	var dup *gate.DupError
	switch {
	case err == nil && replayOf != "":
		return s.replayAsync(ctx, it.ID, replayOf)
	case err == nil:
		return o, rerun, nil
	case claimed && !errors.As(err, &dup):
		if errors.Is(err, stock.ErrSoldOut) {
			s.markSoldOut(ctx, it.ID, gen)
			// A twin with this key may have queued this very order: it
			// reruns the order id the claim names (claimAsync), and can
			// take the last unit moved to the home bucket after this
			// script found the bucket empty and before Rebalance found
			// the item sold out. Its 202 is this key's answer.
			if o, err := s.findOrderOf(ctx, it.ID, orderID); err == nil {
				return answerReplay(o)
			}
		}
		// Refused, with no order queued under the claim's id: the claim
		// is kept for the user with no order ("user|"), so a retry runs
		// again (as a lua claim left pending does).
		s.settle(ctx, it, req, "")
		return nil, false, err
	case errors.As(err, &dup) && req.IdempotencyKey != "":
		// The script found no claim of this key (a claim naming an order
		// is a replay). While the buyer's order is queued, its marker
		// names the key it was placed with: this key's order (its claim
		// lost: evicted, or part of Redis's state lost) replays, another
		// key is refused, at once and without the database, which may be
		// down while the queue admits.
		if key, known, kerr := s.queue.QueuedKey(ctx, it.ID, dup.OrderID); kerr == nil && known {
			if key == req.IdempotencyKey {
				if claimed {
					s.settle(ctx, it, req, dup.OrderID)
				}
				return s.replayAsync(ctx, it.ID, dup.OrderID)
			}
			if claimed {
				s.settle(ctx, it, req, "")
			}
			return nil, false, err
		}
		// Not queued (written, or its marker from before markers named
		// keys): the order row says which key placed it. It waits, within
		// ReplayWait and its own deadline, for a queued order to be
		// written (503 if it is not).
		prev, twinErr := s.replay(ctx, it, req, true)
		if prev != nil {
			if claimed {
				s.settle(ctx, it, req, prev.ID)
			}
			return prev, true, nil
		}
		if claimed && twinErr == nil {
			s.settle(ctx, it, req, "")
		}
		if twinErr != nil {
			// The database could not tell (down, or slow). While the
			// slot's claims are whole (their mark, claims.go), this key
			// has none because it never placed an order: the refusal
			// stands, so admission answers on without the database. Only
			// a claim evicted alone while the database is down is then
			// refused (as every such case was before replays waited).
			if whole, merr := s.rdb.Exists(ctx, s.claimsMark(it, req.IdempotencyKey)).Result(); merr == nil && whole == 1 {
				return nil, false, err
			}
			return nil, false, twinErr
		}
	case errors.Is(err, stock.ErrSoldOut):
		s.markSoldOut(ctx, it.ID, gen)
	}
	return nil, false, err
}

// soldOutAsync answers a keyed request for an item this process knows is
// sold out with one GET: the key may name an order its user placed before.
func (s *Service) soldOutAsync(ctx context.Context, it *stock.Item, req stock.OrderRequest) (*stock.Order, bool, error) {
	var cmd *redis.StringCmd
	var marked *redis.IntCmd
	if err := s.pipe.Do(ctx, func(ctx context.Context, p redis.Pipeliner) {
		cmd = p.Get(ctx, s.idemKey(it, req.IdempotencyKey))
		marked = p.Exists(ctx, s.claimsMark(it, req.IdempotencyKey))
	}, nil); err != nil {
		return nil, false, gate.Error("read idempotency key", err)
	}
	prev, err := cmd.Result()
	if errors.Is(err, redis.Nil) && marked.Err() == nil && marked.Val() == 0 {
		// Redis lost the claims: the database may have this key's order.
		if prev, err = s.recoverClaim(ctx, it, req); err == nil && prev == "" {
			err = redis.Nil
		}
	}
	if errors.Is(err, redis.Nil) {
		return nil, false, stock.ErrSoldOut
	}
	if err != nil {
		return nil, false, gate.Error("read idempotency key", err)
	}
	user, orderID, _ := strings.Cut(prev, "|")
	switch {
	case user != req.UserID:
		return nil, false, stock.ErrIdempotencyConflict
	case orderID == "":
		return nil, false, stock.ErrSoldOut
	}
	o, replayed, err := s.replayAsync(ctx, it.ID, orderID)
	if it.Buckets > 1 && errors.Is(err, stock.ErrNotFound) {
		// A bucketed item's claim names its order before the order is
		// queued: this one never was (its request died in between).
		return nil, false, stock.ErrSoldOut
	}
	return o, replayed, err
}

// claimAsync claims req's Idempotency-Key for a lua-async item with
// several buckets, where the claim lives in the bucket the key picks and
// so cannot be bound inside the enqueue script (which runs on the buyer's
// home bucket): SET key "user|orderID" NX GET, the order id made first.
// It gives the order id to enqueue, or the earlier request's answer
// (prev, or its failure as err):
//   - no claim: orderID, claimed now;
//   - the claim names order X: X's answer if X is written, queued or
//     failed; if X is nowhere (its request died between the claim and
//     the enqueue, or is still between them), X is enqueued again
//     (rerun): the script answers ok for X once whoever runs first queued
//     it, never a second entry;
//   - the claim names no order (an earlier refusal): it is taken again
//     for orderID;
//   - another user's claim: stock.ErrIdempotencyConflict.
func (s *Service) claimAsync(ctx context.Context, it *stock.Item, req stock.OrderRequest, orderID string) (id string, rerun bool, prev *stock.Order, err error) {
	key := s.idemKey(it, req.IdempotencyKey)
	var cmd *redis.StatusCmd
	if err := s.pipe.Do(ctx, func(ctx context.Context, p redis.Pipeliner) {
		cmd = p.SetArgs(ctx, key, req.UserID+"|"+orderID, redis.SetArgs{Mode: "NX", Get: true, TTL: s.cfg.IdempotencyTTL})
	}, nil); err != nil {
		return "", false, nil, gate.Error("claim idempotency key", err)
	}
	state, held, err := claimState(cmd.Val(), cmd.Err(), req.UserID)
	switch {
	case err != nil:
		return "", false, nil, err
	case state == claimNew:
		return orderID, false, nil, nil
	case state == claimOpen:
		err := s.rdb.SetArgs(ctx, key, req.UserID+"|"+orderID, redis.SetArgs{Mode: "XX", KeepTTL: true}).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", false, nil, gate.Error("claim idempotency key", err)
		}
		return orderID, false, nil, nil
	}
	o, _, err := s.replayAsync(ctx, it.ID, held)
	switch {
	case err == nil:
		return "", false, o, nil
	case errors.Is(err, stock.ErrNotFound):
		return held, true, nil, nil
	}
	return "", false, nil, err
}

// replayAsync answers a request whose Idempotency-Key names the lua-async
// order orderID. An order that failed is answered with its failure, as an
// error: a 2xx would promise an order the database refused.
func (s *Service) replayAsync(ctx context.Context, itemID int64, orderID string) (*stock.Order, bool, error) {
	o, err := s.findOrderOf(ctx, itemID, orderID)
	if err != nil {
		return nil, false, fmt.Errorf("order %s of this Idempotency-Key: %w", orderID, err)
	}
	return answerReplay(o)
}

// answerReplay is a replay's answer when its key names o.
func answerReplay(o *stock.Order) (*stock.Order, bool, error) {
	if o.Status == stock.StatusFailed {
		return nil, false, failedOrderError(o)
	}
	return o, true, nil
}

// failedOrderError is what a failed order's reason means to its buyer.
func failedOrderError(o *stock.Order) error {
	cause := stock.ErrOrderFailed
	switch o.Reason {
	case "sold_out":
		cause = stock.ErrSoldOut
	case "already_purchased":
		cause = stock.ErrAlreadyPurchased
	}
	return fmt.Errorf("order %s of this Idempotency-Key failed (%s): %w", o.ID, o.Reason, cause)
}

// findOrder reads an order of any strategy: written, pending in a stream,
// or recorded as failed. The pending marker is read between two database
// reads, so an order written meanwhile is never reported missing.
func (s *Service) findOrder(ctx context.Context, id string) (*stock.Order, error) {
	return s.findOrderOf(ctx, 0, id)
}

// findOrderOf is findOrder for an order known to be of item itemID (0:
// not known), whose queued marker is then read without its index.
func (s *Service) findOrderOf(ctx context.Context, itemID int64, id string) (*stock.Order, error) {
	o, err := s.store.Order(ctx, id)
	if !errors.Is(err, stock.ErrNotFound) {
		return o, err
	}
	queued := s.queue.QueuedOrder
	if itemID != 0 {
		queued = func(ctx context.Context, id string) (*stock.Order, error) {
			return s.queue.QueuedOrderOf(ctx, itemID, id)
		}
	}
	if o, err := queued(ctx, id); err == nil || !errors.Is(err, stock.ErrNotFound) {
		return o, err
	}
	if o, err := s.store.Order(ctx, id); !errors.Is(err, stock.ErrNotFound) {
		return o, err
	}
	return s.store.FailedOrder(ctx, id)
}

// AsyncStats reads the queue of a lua-async item.
func (s *Service) AsyncStats(ctx context.Context, id int64) (stock.AsyncStats, error) {
	return s.queue.Stats(ctx, id)
}

// Backlog sums the queues of every lua-async item: orders admitted and not
// yet written, and the age of the oldest.
func (s *Service) Backlog(ctx context.Context) (stock.AsyncStats, error) { return s.queue.Backlog(ctx) }

// DrainQueues waits until every lua-async queue is empty (each order
// written, or recorded as failed) or ctx ends, and returns the backlog as
// last read. A process whose Redis closes with it (the embedded one) calls
// it before closing: no other writer can reach that queue, and it would
// be lost.
func (s *Service) DrainQueues(ctx context.Context) (stock.AsyncStats, error) {
	return s.queue.Drain(ctx)
}

// DeadLetters lists up to limit entries of an item's dead-letter stream.
func (s *Service) DeadLetters(ctx context.Context, id int64, limit int64) ([]stock.DeadLetter, error) {
	return s.queue.DeadLetters(ctx, id, limit)
}

// RequeueDeadLetters moves every entry of an item's dead-letter stream back
// to its order stream, once the cause is fixed, and returns how many moved.
func (s *Service) RequeueDeadLetters(ctx context.Context, id int64) (int, error) {
	return s.queue.Requeue(ctx, id)
}
