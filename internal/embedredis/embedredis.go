// Package embedredis runs the in-process Redis of the embedded default.
//
// miniredis keeps TTLs frozen until its owner moves its clock, so without
// help a lock whose release was lost would never expire. Server moves the
// clock with the wall clock, so TTLs behave as they do on a real Redis.
package embedredis

import (
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// tick is how often TTLs advance; expiry is at most this late.
const tick = 20 * time.Millisecond

// Server is a running miniredis with a real-time clock.
type Server struct {
	*miniredis.Miniredis
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// Start listens on a free loopback port.
func Start() (*Server, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	s := &Server{Miniredis: m, stop: make(chan struct{})}
	s.wg.Add(1)
	go s.clock()
	return s, nil
}

func (s *Server) clock() {
	defer s.wg.Done()
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Close stops the clock and the server.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.stop)
		s.wg.Wait()
		s.Miniredis.Close()
	})
}
