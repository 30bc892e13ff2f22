package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The events channel (<prefix>:events) carries two messages:
//
//	soldout <item> <restock number known> <unix µs the request noted its generation>
//	restock <item> <restock number>
//
// An instance that learns an item is sold out says so, and the others mark
// it too; a stock change or a returned unit is a restock, numbered per item,
// and every instance forgets the item's "sold out".
const (
	// eventsIdle is how long the subscription may be silent before it is
	// pinged; a ping unanswered for as long again means it is dead.
	eventsIdle = 3 * time.Second
	// eventsRetryMax caps the wait between attempts to subscribe.
	eventsRetryMax = 2 * time.Second
)

// Events keeps this process's sold-out memo in step with the other
// instances through Redis pub/sub. Its goroutine is stopped by close.
type Events struct {
	rdb  redis.UniversalClient
	keys Keys
	memo *Memo
	log  *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	ps     *redis.PubSub // the current subscription, owned by listen
	closed bool
}

// StartEvents subscribes to the events channel and applies it to memo
// until Close.
func StartEvents(rdb redis.UniversalClient, keys Keys, memo *Memo, log *slog.Logger) *Events {
	ctx, cancel := context.WithCancel(context.Background())
	e := &Events{rdb: rdb, keys: keys, memo: memo, log: log, cancel: cancel, done: make(chan struct{})}
	go e.listen(ctx)
	return e
}

// Close stops the subscription and waits for its goroutine.
func (e *Events) Close() {
	e.cancel() // aborts a dial in progress
	e.mu.Lock()
	e.closed = true
	if e.ps != nil {
		_ = e.ps.Close() // unblocks a read in progress
	}
	e.mu.Unlock()
	<-e.done
}

// open starts a new subscription (it connects on first use), or returns nil
// once closed.
func (e *Events) open(ctx context.Context) *redis.PubSub {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.ps = e.rdb.Subscribe(ctx) // no channel yet: no I/O under the lock
	return e.ps
}

// listen applies the channel's messages to the memo. go-redis reconnects
// and resubscribes after an error; every confirmed subscription clears the
// memo, since messages may have been lost before it. A subscription that
// stops answering pings is replaced.
func (e *Events) listen(ctx context.Context) {
	defer close(e.done)
	defer e.memo.unsubscribe()
	var ps *redis.PubSub
	pinged := false
	retry := 50 * time.Millisecond
	for {
		if ps == nil {
			if ps = e.open(ctx); ps == nil {
				return
			}
			if err := ps.Subscribe(ctx, e.keys.Events()); err != nil && ctx.Err() == nil {
				e.log.Debug("events: subscribe", "err", err)
			}
		}
		msg, err := ps.ReceiveTimeout(ctx, eventsIdle)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				pinged = true
				if ps.Ping(ctx) == nil {
					continue
				}
			}
			e.memo.unsubscribe()
			e.log.Debug("events: subscription down", "err", err)
			if pinged { // silent: the connection may be dead without an error
				_ = ps.Close()
				ps = nil
			}
			pinged = false
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
			retry = min(2*retry, eventsRetryMax)
			continue
		}
		pinged = false
		retry = 50 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == e.keys.Events() {
				e.memo.subscribe()
			}
		case *redis.Message:
			e.apply(m.Payload)
		}
	}
}

// apply updates the memo from one message; malformed ones are ignored.
func (e *Events) apply(payload string) {
	f := strings.Fields(payload)
	num := func(i int) (int64, bool) {
		if i >= len(f) {
			return 0, false
		}
		n, err := strconv.ParseInt(f[i], 10, 64)
		return n, err == nil
	}
	id, ok1 := num(1)
	seq, ok2 := num(2)
	if len(f) == 0 || !ok1 || !ok2 {
		return
	}
	switch f[0] {
	case "restock":
		e.memo.Restocked(id, seq)
	case "soldout":
		if noted, ok := num(3); ok {
			e.memo.markRemote(id, seq, time.UnixMicro(noted))
		}
	}
}

// SoldOut tells the other instances that item id is sold out, as learned by
// a request that noted g and knew restock number seq.
func (e *Events) SoldOut(ctx context.Context, id, seq int64, g MemoGen) error {
	msg := fmt.Sprintf("soldout %d %d %d", id, seq, g.at.UnixMicro())
	if err := e.rdb.Publish(ctx, e.keys.Events(), msg).Err(); err != nil {
		return Error("publish sold out", err)
	}
	return nil
}

// Restock numbers and publishes a restock of item id, and returns its number.
func (e *Events) Restock(ctx context.Context, id int64) (int64, error) {
	res, err := restockScript.Run(ctx, e.rdb, []string{e.keys.restocks(id)}, e.keys.Events(), id).Slice()
	if err != nil {
		return 0, Error("publish restock", err)
	}
	_, data, err := Reply(res)
	if err != nil {
		return 0, err
	}
	if len(data) != 1 {
		return 0, fmt.Errorf("redis: publish restock: unexpected reply %v", res)
	}
	n, ok := data[0].(int64)
	if !ok {
		return 0, fmt.Errorf("redis: publish restock: unexpected reply %v", res)
	}
	return n, nil
}
