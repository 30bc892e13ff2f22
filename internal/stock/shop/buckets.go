package shop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/gate"
	"github.com/seckill/seckill/internal/stock/store"
)

// Items with several gate buckets (stock.Item.Buckets > 1, lua only): the
// parts of the Service that differ from an item with one gate. The gate
// package has the buckets themselves (gate/buckets.go, gate/rebalance.go).

// moveGrace is how old an unfinished move between buckets must be before
// the sweeper finishes it: the buyer that started it finishes it within
// milliseconds unless its process died between the two steps.
const moveGrace = 3 * time.Second

// setStockBuckets is SetStock for an item with several buckets. Under the
// item's row lock, a raise is spread evenly over the buckets and a cut is
// taken from their free units only: if they have fewer free units than
// the cut, what was taken is put back and the change is refused
// (stock.ErrStockBelowSold), as units reserved are promised to buyers
// whose orders are being written. Should the change fail after the
// buckets were changed, they are changed back, unless the database shows
// that the change committed after all.
func (s *Service) setStockBuckets(ctx context.Context, it *stock.Item, n int64) (before, after *stock.Item, err error) {
	var changed []int64
	old, updated, err := s.store.SetStock(ctx, it.ID, n, func(old *stock.Item) error {
		var err error
		delta := n - old.Stock
		changed, err = s.gate.AdjustStock(ctx, it.ID, it.Buckets, delta)
		if err == nil && sum(changed) != delta {
			err = fmt.Errorf("stock %d: only %d units of the %d to take off are free in the gate (the rest are sold or reserved): %w",
				n, -sum(changed), -delta, stock.ErrStockBelowSold)
		}
		if err != nil && changed != nil {
			// Undone now if Redis answers; what is left is undone below.
			if rerr := s.gate.RestoreStock(ctx, it.ID, changed); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		return err
	})
	if err != nil {
		if hasNonZero(changed) {
			s.undoBucketStock(ctx, it, n, changed)
		}
		return nil, nil, err
	}
	s.restocked(ctx, it.ID)
	return old, updated, nil
}

// undoBucketStock changes the buckets back after a stock change whose
// commit failed, if the database (read under a new row lock) does not
// have the new stock.
func (s *Service) undoBucketStock(ctx context.Context, it *stock.Item, n int64, changed []int64) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), returnTimeout)
	defer cancel()
	err := s.store.WithItemLocked(rctx, it.ID, func(ctx context.Context, locked *store.LockedItem) error {
		units, err := locked.Stock(ctx)
		if err != nil || units == n {
			return err
		}
		return s.gate.RestoreStock(ctx, it.ID, changed)
	})
	if err != nil {
		s.soldOut.Forget(it.ID)
		s.cfg.Logger.WarnContext(ctx, "gate buckets not set back after a failed stock change; reconcile the item", "item", it.ID, "err", err)
	}
}

func hasNonZero(v []int64) bool {
	for _, x := range v {
		if x != 0 {
			return true
		}
	}
	return false
}

func sum(v []int64) int64 {
	t := int64(0)
	for _, x := range v {
		t += x
	}
	return t
}

// bucketItems remembers the items with several buckets this process has
// routed, for the sweeper to finish their moves.
type bucketItems struct {
	mu  sync.Mutex
	ids map[int64]int // id -> buckets
}

func (b *bucketItems) add(it *stock.Item) {
	if it.Buckets <= 1 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ids == nil {
		b.ids = map[int64]int{}
	}
	b.ids[it.ID] = it.Buckets
}

func (b *bucketItems) list() map[int64]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[int64]int, len(b.ids))
	for id, k := range b.ids {
		out[id] = k
	}
	return out
}

// FinishMoves finishes the moves between buckets that were started before
// before and never finished (their process died between the two steps),
// for every item with several buckets this process has sold or been asked
// about, and returns how many it finished. The sweeper runs it; a buyer
// who finds an item empty finishes every move under way itself.
func (s *Service) FinishMoves(ctx context.Context, before time.Time) (int, error) {
	n := 0
	var errs []error
	for id, k := range s.bucketed.list() {
		m, err := s.gate.FinishMoves(ctx, id, k, before)
		n += m
		if err != nil && !errors.Is(err, gate.ErrMissing) {
			errs = append(errs, fmt.Errorf("item %d: %w", id, err))
		}
		if m > 0 {
			s.cfg.Logger.WarnContext(ctx, "unfinished moves between buckets finished", "item", id, "moves", m)
			s.restocked(ctx, id)
		}
	}
	return n, errors.Join(errs...)
}
