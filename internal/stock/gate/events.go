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
//	soldout <item> <last restock id known, or -> <unix µs the request noted its generation>
//	restock <item> <restock id>
//
// An instance that learns an item is sold out says so, and the others mark
// it too; a stock change or a returned unit is a restock, with a random id
// of its own (RestockID), and every instance forgets the item's "sold out".
// Nothing of this is kept in Redis, so Redis losing its data loses no
// restock.
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
	if len(f) < 3 {
		return
	}
	id, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return
	}
	switch {
	case f[0] == "restock" && len(f) == 3:
		e.memo.heard(id, RestockID(f[2]))
	case f[0] == "soldout" && len(f) == 4:
		noted, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return
		}
		last := RestockID(f[2])
		if last == noRestock {
			last = ""
		}
		e.memo.markRemote(id, last, time.UnixMicro(noted))
	}
}

// noRestock stands for RestockID "" in a message.
const noRestock = "-"

// SoldOut tells the other instances that item id is sold out, as learned by
// a request that noted g and knew last as the item's last restock.
func (e *Events) SoldOut(ctx context.Context, id int64, last RestockID, g MemoGen) error {
	if last == "" {
		last = noRestock
	}
	msg := fmt.Sprintf("soldout %d %s %d", id, last, g.at.UnixMicro())
	if err := e.rdb.Publish(ctx, e.keys.Events(), msg).Err(); err != nil {
		return Error("publish sold out", err)
	}
	return nil
}

// Restock announces restock r of item id (see NewRestockID) to every
// instance, this one included.
func (e *Events) Restock(ctx context.Context, id int64, r RestockID) error {
	if err := e.rdb.Publish(ctx, e.keys.Events(), fmt.Sprintf("restock %d %s", id, r)).Err(); err != nil {
		return Error("publish restock", err)
	}
	return nil
}
