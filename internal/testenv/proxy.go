package testenv

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a target and plays its outages without
// stopping it for everyone else: Cut closes every connection and refuses
// new ones (a crash, fast failures), Stall accepts connections and holds
// every byte until Heal (a backend that hangs: the slow failure), and
// Latency delays every reply.
//
// Bytes held by a stall are delivered when it heals, in order, even when
// their sender closed the connection meanwhile: like a network that comes
// back, or a server that resumes with requests in its socket buffer, a
// command whose client gave up may still run after the heal.
type Proxy struct {
	t      *testing.T
	target string
	addr   string

	mu      sync.Mutex
	l       net.Listener
	conns   map[net.Conn]struct{}
	cut     chan struct{} // closed by Cut: held bytes are dropped
	resume  chan struct{} // nil unless stalled; closed by Heal
	latency time.Duration // added to each chunk from the target
	wg      sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{t: t, target: target, addr: l.Addr().String(), conns: map[net.Conn]struct{}{}, cut: make(chan struct{})}
	p.serve(l)
	t.Cleanup(func() { p.Cut(); p.wg.Wait() })
	return p
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.addr }

// Cut closes every connection and refuses new ones until Restore. Bytes a
// stall held are dropped, and a stall ends.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		_ = p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	close(p.cut)
	p.cut = make(chan struct{})
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

// Restore accepts connections again on the same address.
func (p *Proxy) Restore() {
	p.t.Helper()
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy relisten on %s: %v", p.addr, err)
	}
	p.serve(l)
}

// Stall holds every byte, both ways, on every connection, old and new,
// until Heal: connections are accepted and nothing is answered.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume == nil {
		p.resume = make(chan struct{})
	}
}

// Heal ends a stall: the held bytes go on, in order.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

// Latency delays every chunk of bytes from the target by d (0: none),
// counted from when the proxy read it, as a slow link or server would.
func (p *Proxy) Latency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

func (p *Proxy) serve(l net.Listener) {
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			cut, ok := p.track(c, up)
			if !ok {
				continue
			}
			p.wg.Add(2)
			go p.pipe(c, up, true, cut) // the target's replies
			go p.pipe(up, c, false, cut)
		}
	}()
}

// track records conns as open, unless the proxy is cut, and returns the
// channel the next Cut closes: the connections' own, so bytes they read
// just before a cut are dropped by it, not held by a later stall or
// latency (a pipe that read the new channel after the cut waited out an
// hour's latency: the proxy test hung).
func (p *Proxy) track(conns ...net.Conn) (cut chan struct{}, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l == nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return nil, false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return p.cut, true
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst through a queue, so a stall or a latency delays
// the bytes without stopping them being read (their arrival times count).
// reply marks the direction from the target, which latency applies to.
func (p *Proxy) pipe(dst, src net.Conn, reply bool, cut <-chan struct{}) {
	defer p.wg.Done()
	queue := make(chan chunk, 1024)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(queue)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				queue <- chunk{b: buf[:n], at: time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		for range queue { // let the reader finish
		}
	}()
	for c := range queue {
		if !p.hold(c, reply, cut) {
			return
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

// hold waits until c may be delivered: no stall, and its latency passed.
// It reports false once cut, its connection's, is closed.
func (p *Proxy) hold(c chunk, reply bool, cut <-chan struct{}) bool {
	for {
		select {
		case <-cut:
			return false
		default:
		}
		p.mu.Lock()
		resume, latency := p.resume, p.latency
		p.mu.Unlock()
		if resume != nil {
			select {
			case <-resume:
				continue
			case <-cut:
				return false
			}
		}
		if wait := time.Until(c.at.Add(latency)); reply && wait > 0 {
			select {
			case <-time.After(wait):
			case <-cut:
				return false
			}
		}
		return true
	}
}
