// Package embedredis runs the in-process Redis of the embedded default.
//
// It listens on loopback, where any local process could connect and rewrite
// the gate; so every connection must AUTH with a random password made at
// start, which only URL tells.
//
// miniredis keeps TTLs frozen until its owner moves its clock, so without
// help a lock whose release was lost would never expire. Server moves the
// clock with the wall clock, so TTLs behave as they do on a real Redis.
package embedredis

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// tick is how often TTLs advance; expiry is at most this late.
const tick = 20 * time.Millisecond

// Server is a running miniredis with a real-time clock.
type Server struct {
	*miniredis.Miniredis
	password string
	stop     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
}

// Start listens on a free loopback port, with a random password.
func Start() (*Server, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	pw := hex.EncodeToString(b)
	m := miniredis.NewMiniRedis()
	m.RequireAuth(pw)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	s := &Server{Miniredis: m, password: pw, stop: make(chan struct{})}
	s.wg.Add(1)
	go s.clock()
	return s, nil
}

// URL is the address to connect to, with the password (redis://:pw@host:port/0).
// It is a secret: do not log it.
func (s *Server) URL() string { return "redis://:" + s.password + "@" + s.Addr() + "/0" }

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
