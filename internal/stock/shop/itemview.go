package shop

import (
	"context"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/seckill/seckill/internal/stock"
)

// ViewMaxAge is how long a public item view is served from memory before it
// is read again. A view counts from when its read began, and the read (one
// Redis round trip, or one database read for a lock item) is bounded by
// viewReadTimeout, so the remaining count it shows lags the gate by at most
// ViewMaxAge plus one read: about 250 ms on a healthy backend. A sell-out
// this process knows of (its sold-out memo) shows at once.
const ViewMaxAge = 200 * time.Millisecond

// viewReadTimeout bounds the read shared by the callers of one item's view.
const viewReadTimeout = 2 * time.Second

// itemViews caches each item's public view: while a crowd refreshes an
// item's page, one read every ViewMaxAge reaches Redis or the database.
type itemViews struct {
	m       sync.Map // int64 -> *viewEntry
	reading singleflight.Group
	clock   func() time.Time // time.Now; tests move it
}

type viewEntry struct {
	view *stock.ItemView
	at   time.Time // when the read that made it began
}

// ItemView is the public view of item id, at most ViewMaxAge old (see
// there). It never shows units left once this process knows the item is
// sold out.
func (s *Service) ItemView(ctx context.Context, id int64) (*stock.ItemView, error) {
	now := s.views.clock()
	if v, ok := s.views.m.Load(id); ok {
		if e := v.(*viewEntry); now.Sub(e.at) < ViewMaxAge {
			return s.knownSoldOut(id, e), nil
		}
	}
	ch := s.views.reading.DoChan(strconv.FormatInt(id, 10), func() (any, error) {
		// The read is shared: it must not end because the first caller
		// went away. Each caller still waits no longer than its own ctx.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), viewReadTimeout)
		defer cancel()
		return s.readView(rctx, id)
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return s.knownSoldOut(id, r.Val.(*viewEntry)), nil
	}
}

// FreshItemView is item id's view read now, neither from memory nor from a
// read another caller began earlier: the remaining count shows every sale
// taken before the call. The waiting room's admission loop needs that
// (rooms: a pass spent before its mark must show in the figure it reads
// after). The read refreshes the cached view too.
//
// For a lua item the count is the database's, stock less the orders
// committed, unless the gate already reads sold out: a lua order's unit
// leaves the gate before its write, and its pass is spent only after the
// commit, so while the write is in flight the gate's count would hold the
// unit twice against the passes, once taken and once as a live pass (the
// loop then admitted up to the orders in flight too few, for as long as
// buyers kept buying). The other strategies spend the pass one Redis call
// after the unit leaves their count (lua-async's gate, which counts the
// queued orders the database has not seen yet; lock's database).
func (s *Service) FreshItemView(ctx context.Context, id int64) (*stock.ItemView, error) {
	rctx, cancel := context.WithTimeout(ctx, viewReadTimeout)
	defer cancel()
	e, err := s.readView(rctx, id)
	if err != nil {
		return nil, err
	}
	v := s.knownSoldOut(id, e)
	if v.Remaining == 0 {
		return v, nil
	}
	it, err := s.publicRouting(rctx, id)
	if err != nil || it.Strategy != stock.StrategyLua {
		return v, err
	}
	db, err := s.store.Item(rctx, id)
	if err != nil {
		return nil, err
	}
	c := *v
	c.Remaining = max(0, db.Remaining())
	return &c, nil
}

// knownSoldOut is e's view, with nothing left when the memo says the item
// is sold out (the cached entry is replaced, so later calls share it).
func (s *Service) knownSoldOut(id int64, e *viewEntry) *stock.ItemView {
	if e.view.Remaining == 0 || !s.soldOut.SoldOut(id) {
		return e.view
	}
	v := *e.view
	v.Remaining = 0
	s.views.m.CompareAndSwap(id, e, &viewEntry{view: &v, at: e.at})
	return &v
}

// readView reads item id's view: its fixed fields from the routing cache,
// what is left from the gate when the item has one and it is in Redis,
// else from the database.
func (s *Service) readView(ctx context.Context, id int64) (*viewEntry, error) {
	start := s.views.clock()
	it, err := s.publicRouting(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &stock.ItemView{ID: it.ID, Name: it.Name, PriceCents: it.PriceCents, StartsAt: it.StartsAt, EndsAt: it.EndsAt}
	found := false
	if s.strategy(it.Strategy).Gated() {
		// A Redis failure falls back to the database: the page stays up
		// while orders answer 503 (no gate lets anything be sold then).
		if it.Buckets > 1 {
			if bv, err := s.gate.ReadBuckets(ctx, id, it.Buckets, false); err == nil && bv.Present {
				v.Remaining, found = bv.Free, true
			}
		} else if left, ok, err := s.gate.Remaining(ctx, id); err == nil && ok {
			v.Remaining, found = left, true
		}
	}
	if !found {
		db, err := s.store.Item(ctx, id)
		if err != nil {
			return nil, err
		}
		v.Remaining = max(0, db.Remaining())
	}
	e := &viewEntry{view: v, at: start}
	s.views.m.Store(id, e)
	return e, nil
}
