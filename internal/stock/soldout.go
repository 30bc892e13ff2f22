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
// after a sell-out is refused without a round trip.
type soldOutMemo struct {
	m sync.Map // int64 -> time.Time (when it was seen sold out)
}

func (s *soldOutMemo) mark(id int64) { s.m.Store(id, time.Now()) }

func (s *soldOutMemo) forget(id int64) { s.m.Delete(id) }

func (s *soldOutMemo) soldOut(id int64) bool {
	v, ok := s.m.Load(id)
	return ok && time.Since(v.(time.Time)) < soldOutFor
}
