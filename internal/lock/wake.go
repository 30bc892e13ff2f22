package lock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// wakeHub shares one pub/sub connection per Client among all its waiters.
// Each lock's channel is subscribed while at least one local waiter waits on
// it. A release publishes once; the hub wakes one local waiter (the one that
// registered first and has no wake-up pending) or, for a fair hand-off, the
// waiter whose attempt id is in the message. That avoids a thundering herd:
// other waiters keep sleeping until the next release.
type wakeHub struct {
	rdb RedisClient

	subMu  sync.Mutex // serialises SUBSCRIBE/UNSUBSCRIBE with the ref counts
	ps     *redis.PubSub
	closed bool
	done   chan struct{} // closed when the dispatch goroutine returns

	mu       sync.Mutex // guards channels and the waiters in them
	channels map[string]*channelWaiters
}

type channelWaiters struct {
	ready   chan struct{} // closed when the server confirmed SUBSCRIBE
	isReady bool
	waiters []*waiter // in registration order
}

type waiter struct {
	id      string        // attempt id: target of fair hand-offs
	channel string        // lock's wake channel
	wake    chan struct{} // capacity 1: at most one pending wake-up
}

var errHubClosed = errors.New("lock: client closed")

func newWakeHub(rdb RedisClient) *wakeHub {
	return &wakeHub{rdb: rdb, channels: make(map[string]*channelWaiters)}
}

// register adds w and waits (at most maxWait) until its channel is subscribed,
// so that a release after register returns cannot go unnoticed. On error w is
// not registered. joined reports that the channel was already subscribed,
// with other waiters on it.
func (h *wakeHub) register(ctx context.Context, w *waiter, maxWait time.Duration) (joined bool, err error) {
	h.subMu.Lock()
	if h.closed {
		h.subMu.Unlock()
		return false, errHubClosed
	}
	if h.ps == nil {
		h.ps = h.rdb.Subscribe(context.Background())
		h.done = make(chan struct{})
		go h.dispatch(h.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)), h.done)
	}
	h.mu.Lock()
	cw, ok := h.channels[w.channel]
	if !ok {
		cw = &channelWaiters{ready: make(chan struct{})}
		h.channels[w.channel] = cw
	}
	cw.waiters = append(cw.waiters, w)
	joined = ok && cw.isReady
	h.mu.Unlock()
	if !ok {
		err = h.ps.Subscribe(ctx, w.channel)
	}
	h.subMu.Unlock()
	if err != nil {
		h.unregister(w, false)
		return false, err
	}
	if joined {
		return true, nil
	}

	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	select {
	case <-cw.ready:
	case <-ctx.Done():
	case <-timer.C:
	}
	return false, nil
}

// unregister removes w. A wake-up it received but did not use (it gave up
// instead of obtaining) is passed on to another waiter.
func (h *wakeHub) unregister(w *waiter, obtained bool) {
	h.mu.Lock()
	cw := h.channels[w.channel]
	if cw == nil {
		h.mu.Unlock()
		return
	}
	for i, other := range cw.waiters {
		if other == w {
			cw.waiters = append(cw.waiters[:i], cw.waiters[i+1:]...)
			break
		}
	}
	select {
	case <-w.wake:
		if !obtained {
			wakeFirstIdle(cw.waiters)
		}
	default:
	}
	last := len(cw.waiters) == 0
	if last {
		delete(h.channels, w.channel)
	}
	h.mu.Unlock()
	if !last {
		return
	}

	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	_, again := h.channels[w.channel]
	h.mu.Unlock()
	if again || h.closed || h.ps == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = h.ps.Unsubscribe(ctx, w.channel) // best effort: a stale subscription only costs ignored messages
}

func (h *wakeHub) dispatch(msgs <-chan any, done chan struct{}) {
	defer close(done)
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			h.mu.Lock()
			if cw := h.channels[m.Channel]; cw != nil && !cw.isReady {
				cw.isReady = true
				close(cw.ready)
			}
			h.mu.Unlock()
		case *redis.Message:
			h.mu.Lock()
			if cw := h.channels[m.Channel]; cw != nil {
				if m.Payload == "" {
					wakeFirstIdle(cw.waiters)
				} else {
					for _, w := range cw.waiters {
						if w.id == m.Payload {
							notify(w)
							break
						}
					}
				}
			}
			h.mu.Unlock()
		}
	}
}

// wakeFirstIdle wakes the longest-registered waiter without a pending wake-up.
func wakeFirstIdle(waiters []*waiter) {
	for _, w := range waiters {
		if notify(w) {
			return
		}
	}
}

func notify(w *waiter) bool {
	select {
	case w.wake <- struct{}{}:
		return true
	default:
		return false
	}
}

func (h *wakeHub) close() error {
	h.subMu.Lock()
	if h.closed {
		h.subMu.Unlock()
		return nil
	}
	h.closed = true
	ps, done := h.ps, h.done
	h.subMu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}
