package stock

import (
	"sync"
	"time"
)

// soldOutFor is how long this process trusts a "sold out" without asking
// Redis or the database again. A stock change through this process clears
// it at once; through another instance, it is seen within this time.
const soldOutFor = time.Second

// soldOutMemo remembers which items were sold out recently, so the stampede
// after a sell-out is refused without a round trip. Each stock change starts
// a new generation, and a "sold out" learned by a request that began in an
// older generation is not remembered: it may predate the change.
type soldOutMemo struct {
	mu    sync.RWMutex
	items map[int64]soldOutEntry
}

type soldOutEntry struct {
	gen uint64
	at  time.Time // zero: not known to be sold out
}

// generation is what a request notes before it asks whether stock is left.
func (s *soldOutMemo) generation(id int64) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.items[id].gen
}

// mark remembers a "sold out" learned by a request that began at gen.
func (s *soldOutMemo) mark(id int64, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.items == nil {
		s.items = map[int64]soldOutEntry{}
	}
	if e := s.items[id]; e.gen == gen {
		s.items[id] = soldOutEntry{gen: gen, at: time.Now()}
	}
}

// forget starts a new generation after a stock change.
func (s *soldOutMemo) forget(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.items == nil {
		s.items = map[int64]soldOutEntry{}
	}
	s.items[id] = soldOutEntry{gen: s.items[id].gen + 1}
}

func (s *soldOutMemo) soldOut(id int64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.items[id]
	return ok && !e.at.IsZero() && time.Since(e.at) < soldOutFor
}
