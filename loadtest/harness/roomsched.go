package harness

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// scheduler hands due user steps to a bounded pool of workers: every
// simulated user is an entry in a timer heap, not a goroutine, so a
// hundred thousand users cost a few megabytes and Concurrency
// connections. A user has at most one entry at a time (its next step),
// so one worker at a time touches a user's state.
type scheduler struct {
	mu      sync.Mutex
	h       eventHeap
	pending int           // users not finished
	nudge   chan struct{} // a push may have made an earlier entry due
	work    chan int32
}

type event struct {
	due time.Time
	u   int32
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].due.Equal(h[j].due) {
		return h[i].u < h[j].u
	}
	return h[i].due.Before(h[j].due)
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newScheduler(users int) *scheduler {
	return &scheduler{pending: users, nudge: make(chan struct{}, 1), work: make(chan int32)}
}

// at schedules user u's next step.
func (s *scheduler) at(due time.Time, u int32) {
	s.mu.Lock()
	heap.Push(&s.h, event{due, u})
	s.mu.Unlock()
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

// finish marks user u done: it has no next step.
func (s *scheduler) finish() {
	s.mu.Lock()
	s.pending--
	s.mu.Unlock()
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

// remaining is the number of users not finished.
func (s *scheduler) remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// run dispatches due steps, earliest first, until every user finished or
// ctx ends; then it closes the work channel. A step that waits for a free
// worker is late, and the lag is the step's to measure (now - due).
func (s *scheduler) run(ctx context.Context) {
	defer close(s.work)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if s.pending == 0 {
			s.mu.Unlock()
			return
		}
		var wait time.Duration = -1
		var next int32 = -1
		if len(s.h) > 0 {
			if d := time.Until(s.h[0].due); d <= 0 {
				next = heap.Pop(&s.h).(event).u
			} else {
				wait = d
			}
		}
		s.mu.Unlock()
		if next >= 0 {
			select {
			case s.work <- next:
			case <-ctx.Done():
				s.at(time.Now(), next) // still due: due() lists it
				return
			}
			continue
		}
		var tc <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			tc = timer.C
		}
		select {
		case <-tc:
		case <-s.nudge:
		case <-ctx.Done():
			return
		}
		timer.Stop() // Go 1.23+: no stale tick is delivered after Stop
	}
}

// due returns the steps still scheduled (after run returned): the users
// the deadline cut off.
func (s *scheduler) due() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int32, len(s.h))
	for i, e := range s.h {
		out[i] = e.u
	}
	return out
}
