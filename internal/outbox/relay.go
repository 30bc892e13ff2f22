// Package outbox relays the order events the store writes in each order
// change's transaction (order_events, the transactional outbox) to NATS
// JetStream, in order, at least once, deduplicated on the server by
// Nats-Msg-Id = the event's id (docs/DESIGN.md, "Order events").
//
// One relay runs per instance; of all instances on one database, the one
// holding the store's outbox lease publishes and marks, the others wait
// for it. A relay killed between a publish and its mark leaves the batch
// unmarked: the next holder publishes it again and JetStream drops the
// duplicates within the stream's Duplicates window. Without a publisher
// (no NATS configured) the relay only marks, which gives the events the
// delivery order the admin feed pages by.
package outbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill/seckill/internal/stock/store"
)

// Publisher delivers one event and returns once the server acknowledged
// it (a JetStream PubAck).
type Publisher interface {
	Publish(ctx context.Context, ev store.Event) error
}

// Observer receives the relay's figures (metrics); safe for concurrent use.
type Observer interface {
	// Backlog reports the unpublished events and the age of the oldest.
	Backlog(n int64, lag time.Duration)
	// Published reports events published and marked.
	Published(n int)
	// PublishFailed reports a failed publish (the batch is retried).
	PublishFailed()
}

// Config tunes a Relay.
type Config struct {
	// Publisher delivers the events; nil only marks them (the admin feed).
	Publisher Publisher
	// Batch is how many events one round reads. Default 256.
	Batch int
	// Poll is how often an idle relay looks for new events. Default 20ms.
	Poll time.Duration
	// LeaseRetry is how often a relay without the lease tries to take it,
	// and the wait after a failure. Default 1s.
	LeaseRetry time.Duration
	// PublishTimeout bounds one publish. Default 5s.
	PublishTimeout time.Duration
	Observer       Observer
	Logger         *slog.Logger

	// afterPublish, when set (tests), runs after a batch was published and
	// before it is marked.
	afterPublish func(evs []store.Event)
}

// Relay publishes the outbox.
type Relay struct {
	st  *store.Store
	cfg Config

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// New makes a relay on st; Start runs it.
func New(st *store.Store, cfg Config) *Relay {
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	if cfg.LeaseRetry <= 0 {
		cfg.LeaseRetry = time.Second
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{st: st, cfg: cfg, done: make(chan struct{})}
}

// Start runs the relay in a goroutine until Close.
func (r *Relay) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.Run(ctx)
	}()
}

// Close stops a started relay and waits for it.
func (r *Relay) Close() {
	r.once.Do(func() {
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
	})
}

// Run relays until ctx ends.
func (r *Relay) Run(ctx context.Context) {
	var warned time.Time
	warn := func(msg string, err error) {
		if ctx.Err() == nil && time.Since(warned) > 10*time.Second {
			warned = time.Now()
			r.cfg.Logger.Warn(msg, "err", err)
		}
	}
	for ctx.Err() == nil {
		lease, err := r.st.AcquireOutboxLease(ctx)
		if err != nil {
			if !errors.Is(err, store.ErrLeaseHeld) {
				warn("outbox relay: no lease, will retry", err)
			}
			r.report(ctx)
			sleep(ctx, r.cfg.LeaseRetry)
			continue
		}
		err = r.lead(ctx, lease)
		_ = lease.Close()
		if err != nil {
			warn("outbox relay: will retry", err)
			sleep(ctx, r.cfg.LeaseRetry)
		}
	}
}

// lead publishes while it holds lease; it returns on the first failure
// (the lease is then given up and taken again: a lost connection may have
// lost it).
func (r *Relay) lead(ctx context.Context, lease *store.OutboxLease) error {
	lastReport := time.Time{}
	failures := 0
	for ctx.Err() == nil {
		if time.Since(lastReport) >= time.Second {
			r.report(ctx)
			lastReport = time.Now()
		}
		if err := lease.Check(ctx); err != nil {
			return err
		}
		evs, err := r.st.UnpublishedEvents(ctx, r.cfg.Batch)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			sleep(ctx, r.cfg.Poll)
			continue
		}
		n, perr := r.publish(ctx, evs)
		if n > 0 {
			if r.cfg.afterPublish != nil {
				r.cfg.afterPublish(evs[:n])
			}
			if err := lease.MarkPublished(ctx, evs[:n], store.Now()); err != nil {
				return err
			}
			if r.cfg.Observer != nil {
				r.cfg.Observer.Published(n)
			}
		}
		if perr != nil {
			if r.cfg.Observer != nil {
				r.cfg.Observer.PublishFailed()
			}
			r.report(ctx)
			lastReport = time.Now()
			// The server is down or slow: back off (up to LeaseRetry), keep
			// the lease, publish the rest in order when it answers.
			failures++
			sleep(ctx, min(r.cfg.LeaseRetry, time.Duration(failures)*50*time.Millisecond))
			continue
		}
		failures = 0
	}
	return nil
}

// BatchPublisher is a Publisher that can have several publishes in flight
// (JetStream's asynchronous publish): one round trip for many events
// instead of one each.
type BatchPublisher interface {
	Publisher
	// PublishAll sends evs all at once and waits for their
	// acknowledgements: evs[:n] are on the server, in order, and err says
	// why evs[n] is not. A later one may be there too (it is sent again,
	// and dropped by the server's dedupe).
	PublishAll(ctx context.Context, evs []store.Event) (n int, err error)
}

// publish delivers evs in order and returns how many were acknowledged.
// A later event of an order must never overtake an earlier one, which a
// failed publish followed by a successful one could do: one acknowledged
// publish after another does that, and so does a BatchPublisher given
// runs in which no order has two events (a failure then stops before the
// order's next event is sent).
func (r *Relay) publish(ctx context.Context, evs []store.Event) (int, error) {
	if r.cfg.Publisher == nil {
		return len(evs), nil
	}
	if bp, ok := r.cfg.Publisher.(BatchPublisher); ok {
		done := 0
		for _, run := range distinctRuns(evs) {
			pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
			n, err := bp.PublishAll(pctx, run)
			cancel()
			done += n
			if err != nil {
				return done, err
			}
		}
		return done, nil
	}
	for i, e := range evs {
		pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
		err := r.cfg.Publisher.Publish(pctx, e)
		cancel()
		if err != nil {
			return i, err
		}
	}
	return len(evs), nil
}

// distinctRuns cuts evs, in order, into runs in which no order has two
// events.
func distinctRuns(evs []store.Event) [][]store.Event {
	var runs [][]store.Event
	start := 0
	seen := map[string]bool{}
	for i, e := range evs {
		if seen[e.OrderID] {
			runs = append(runs, evs[start:i])
			start = i
			clear(seen)
		}
		seen[e.OrderID] = true
	}
	if start < len(evs) {
		runs = append(runs, evs[start:])
	}
	return runs
}

// report reads the backlog for the Observer.
func (r *Relay) report(ctx context.Context) {
	if r.cfg.Observer == nil {
		return
	}
	n, oldest, err := r.st.OutboxBacklog(ctx)
	if err != nil {
		return
	}
	var lag time.Duration
	if !oldest.IsZero() {
		lag = max(0, time.Since(oldest))
	}
	r.cfg.Observer.Backlog(n, lag)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
