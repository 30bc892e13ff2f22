package shop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/stock/store"
)

// settleRefused answers a batch that could not be written whole, in a few
// round trips however large it is. Buyers who already hold an order get
// ErrAlreadyPurchased; a user's second order in the batch gets what the
// first one got (the first with a pass counts as the user's first);
// orders without a pass get ErrPassRequired once the item is seen with a
// waiting room (the read of what is left says so; the UPDATE that takes
// the units checks it again); the rest are written in arrival order, as
// many at a time as there are units left, until they are all written or
// nothing is left.
// A chunk refused whole (a clash inside it) is written order by order.
func (w *orderWriter) settleRefused(ctx context.Context, watch *stallWatch, itemID int64, batch []*commitRequest, results []error, fence int64, now time.Time) {
	fail := func(idx []int, err error) {
		for _, i := range idx {
			results[i] = err
		}
	}
	users := make([]string, len(batch))
	for i, p := range batch {
		users[i] = p.o.UserID
	}
	bought, err := w.store.BuyersAmong(ctx, itemID, users)
	watch.progress()
	if err != nil {
		fail(allIndexes(len(batch)), err)
		return
	}
	first := map[string]int{} // user -> index of their first order in the batch
	var queue, repeats []int
	for i, p := range batch {
		u := p.o.UserID
		switch f, seen := first[u]; {
		case bought[u]:
			results[i] = stock.ErrAlreadyPurchased
		case seen && p.pass && !batch[f].pass:
			// The user's first order has no pass and this one has: this
			// one stands for the user (the first one would be refused
			// for want of a pass, and this one with it).
			first[u] = i
			queue[slices.Index(queue, f)] = i
			repeats = append(repeats, f)
		case seen:
			repeats = append(repeats, i)
		default:
			first[u] = i
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		left, roomed, err := w.store.Remaining(ctx, itemID)
		watch.progress()
		if err != nil {
			fail(queue, err)
			break
		}
		if roomed {
			queue = refuseWithoutPass(batch, queue, results)
			if len(queue) == 0 {
				break
			}
		}
		if left <= 0 {
			fail(queue, stock.ErrSoldOut)
			break
		}
		take := queue[:min(int(left), len(queue))]
		queue = queue[len(take):]
		w.writeChunk(ctx, watch, batch, take, results, fence, now)
		if err := results[take[len(take)-1]]; errors.Is(err, store.ErrFenceStale) {
			fail(queue, err) // the rest would be refused for the same fence
			break
		}
	}
	for _, i := range repeats {
		if f := results[first[batch[i].o.UserID]]; f == nil {
			results[i] = stock.ErrAlreadyPurchased
		} else {
			results[i] = f
		}
	}
}

// writeChunk writes the orders at idx as one batch, or one by one if the
// batch is refused.
func (w *orderWriter) writeChunk(ctx context.Context, watch *stallWatch, batch []*commitRequest, idx []int, results []error, fence int64, now time.Time) {
	sub := make([]*commitRequest, len(idx))
	for j, i := range idx {
		sub[j] = batch[i]
	}
	err := store.ErrBatchRefused
	if len(sub) > 1 {
		err = w.store.InsertBatch(ctx, writes(sub), now, fence, watch.progress)
	}
	for _, i := range idx {
		switch {
		case err == nil:
			w.store.Created(batch[i].o, now)
			results[i] = nil
		case errors.Is(err, store.ErrBatchRefused):
			results[i] = w.store.InsertOrder(ctx, batch[i].write(), fence)
			watch.progress()
			if errors.Is(results[i], stock.ErrUnavailable) && !errors.Is(results[i], store.ErrFenceStale) {
				// Where in the transaction the database stopped answering
				// is not known here: it may have been the commit. A stale
				// fence is the database's answer inside the transaction,
				// which rolled back: nothing was written.
				results[i] = fmt.Errorf("%w: %w", store.ErrMaybeCommitted, results[i])
			}
		default:
			results[i] = err
		}
	}
}

// refuseWithoutPass answers the orders at idx that carry no pass with
// ErrPassRequired (their item has a waiting room) and returns the others.
func refuseWithoutPass(batch []*commitRequest, idx []int, results []error) []int {
	var kept []int
	for _, i := range idx {
		if batch[i].pass {
			kept = append(kept, i)
		} else {
			results[i] = fmt.Errorf("item %d: %w", batch[i].o.ItemID, stock.ErrPassRequired)
		}
	}
	return kept
}

func allIndexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// write is p as the store writes it.
func (p *commitRequest) write() store.OrderWrite {
	return store.OrderWrite{Order: p.o, Key: p.key, Pass: p.pass, Buckets: p.buckets}
}

// writes is a batch as the store writes it.
func writes(batch []*commitRequest) []store.OrderWrite {
	out := make([]store.OrderWrite, len(batch))
	for i, p := range batch {
		out[i] = p.write()
	}
	return out
}
