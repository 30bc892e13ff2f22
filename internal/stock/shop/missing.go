package shop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/seckill/seckill/internal/stock"
)

// missingItems answers the public paths (an item's page, its orders) for
// item ids that do not exist without a database read each time: anyone can
// ask for any id, and each unknown one used to cost a read.
//
// Two memories, each trusted for ttl from when its read began:
//   - a ceiling, the highest item id (one MAX(id) read, shared by the
//     callers of this process): ids only grow and items are never deleted,
//     so an id above it does not exist; a scan of distinct unknown ids
//     costs one read per ttl, not one per id;
//   - the ids at or under the ceiling that the database said do not exist
//     (gaps an auto-increment leaves), at most maxMissingIDs of them.
//
// An item created in this process is known here at once (CreateItem stores
// its routing). One created in another process is unknown here for at most
// ttl after this process last read the ceiling or its id.
type missingItems struct {
	ttl   time.Duration // <= 0: off
	clock func() time.Time

	mu        sync.Mutex
	ids       map[int64]time.Time // id -> when the read that missed it began
	ceiling   int64
	ceilingAt time.Time // when the ceiling's read began; zero: never read
	reading   singleflight.Group
}

// maxMissingIDs bounds the unknown ids remembered under the ceiling. Only
// ids the database has skipped get there, so it is rarely approached; once
// full (after the expired ones are dropped), new misses are not
// remembered and cost a read each.
const maxMissingIDs = 4096

func newMissingItems(ttl time.Duration) *missingItems {
	return &missingItems{ttl: ttl, clock: time.Now, ids: map[int64]time.Time{}}
}

// known reports whether id is known not to exist, reading the ceiling
// (once for every concurrent caller) when id is above one older than ttl.
func (m *missingItems) known(ctx context.Context, id int64, maxID func(context.Context) (int64, error)) (bool, error) {
	if m.ttl <= 0 {
		return false, nil
	}
	now := m.clock()
	m.mu.Lock()
	at, missing := m.ids[id]
	fresh := !m.ceilingAt.IsZero() && now.Sub(m.ceilingAt) < m.ttl
	ceiling := m.ceiling
	m.mu.Unlock()
	switch {
	case missing && now.Sub(at) < m.ttl:
		return true, nil
	case id <= ceiling:
		return false, nil // at or under a ceiling of any age: it may exist
	case fresh:
		return true, nil
	}
	ch := m.reading.DoChan("ceiling", func() (any, error) {
		// Shared: it must not end because the first caller went away.
		start := m.clock()
		m.mu.Lock()
		fresh := !m.ceilingAt.IsZero() && start.Sub(m.ceilingAt) < m.ttl
		m.mu.Unlock()
		if fresh { // read by a flight that ended since this caller looked
			return nil, nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), viewReadTimeout)
		defer cancel()
		n, err := maxID(rctx)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		m.ceiling = max(m.ceiling, n)
		m.ceilingAt = start
		m.mu.Unlock()
		return nil, nil
	})
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return false, r.Err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return id > m.ceiling, nil
}

// learn remembers that the database did not find id in a read that began
// at start.
func (m *missingItems) learn(id int64, start time.Time) {
	if m.ttl <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.ids) >= maxMissingIDs {
		now := m.clock()
		for k, at := range m.ids {
			if now.Sub(at) >= m.ttl {
				delete(m.ids, k)
			}
		}
		if len(m.ids) >= maxMissingIDs {
			return
		}
	}
	m.ids[id] = start
}

// created forgets that id was missing: it exists now.
func (m *missingItems) created(id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ids, id)
	m.ceiling = max(m.ceiling, id)
}

// publicRouting is routing for the public paths: an id this process knows
// does not exist is answered not found from memory (see missingItems).
func (s *Service) publicRouting(ctx context.Context, id int64) (*stock.Item, error) {
	if v, ok := s.items.Load(id); ok {
		return v.(*stock.Item), nil
	}
	missing, err := s.missing.known(ctx, id, s.store.MaxItemID)
	if err != nil {
		return nil, err
	}
	if missing {
		return nil, fmt.Errorf("item %d: %w", id, stock.ErrNotFound)
	}
	start := s.missing.clock()
	it, err := s.routing(ctx, id)
	if errors.Is(err, stock.ErrNotFound) {
		s.missing.learn(id, start)
	}
	return it, err
}
