package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill/seckill/internal/stock/store"
)

// Defaults of the stream.
const (
	DefaultStream        = "SECKILL_ORDERS"
	DefaultSubjectPrefix = "seckill.orders"
	// DefaultDuplicates is the stream's dedupe window: a re-publish of
	// an event within it (a relay killed before its mark, a publish whose
	// ack was lost) is dropped by the server.
	DefaultDuplicates = 2 * time.Minute
)

// StreamConfig names the stream the events go to.
type StreamConfig struct {
	Stream        string        // default DefaultStream
	SubjectPrefix string        // default DefaultSubjectPrefix; subject <prefix>.<item_id>
	Duplicates    time.Duration // default DefaultDuplicates
}

func (c *StreamConfig) defaults() {
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = DefaultSubjectPrefix
	}
	if c.Duplicates <= 0 {
		c.Duplicates = DefaultDuplicates
	}
}

// JetStream publishes events to a JetStream stream.
type JetStream struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg StreamConfig
}

// Connect dials url (reconnecting forever after a loss) and creates the
// stream if it is missing. The connection itself may be retried: a
// server down at start does not stop the service, the relay publishes
// once it answers.
func Connect(ctx context.Context, url string, cfg StreamConfig) (*JetStream, error) {
	cfg.defaults()
	nc, err := nats.Connect(url, nats.Name("seckill outbox relay"), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: %w", err)
	}
	p := &JetStream{nc: nc, js: js, cfg: cfg}
	if err := p.ensureStream(ctx); err != nil {
		// Not fatal: published events need it, so Publish makes it first.
		return p, err
	}
	return p, nil
}

func (p *JetStream) ensureStream(ctx context.Context) error {
	_, err := p.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       p.cfg.Stream,
		Subjects:   []string{p.cfg.SubjectPrefix + ".>"},
		Duplicates: p.cfg.Duplicates,
		Storage:    jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("nats: stream %s: %w", p.cfg.Stream, err)
	}
	return nil
}

// Subject is an event's subject.
func (p *JetStream) Subject(itemID int64) string {
	return p.cfg.SubjectPrefix + "." + strconv.FormatInt(itemID, 10)
}

// Publish sends ev with Nats-Msg-Id = its id and waits for the PubAck.
// A stream that does not exist (yet) is created, and the publish retried.
func (p *JetStream) Publish(ctx context.Context, ev store.Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: p.Subject(ev.ItemID), Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, ev.ID)
	_, err = p.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(p.cfg.Stream))
	if err != nil && (errorsIs(err, jetstream.ErrNoStreamResponse) || errorsIs(err, jetstream.ErrStreamNotFound)) {
		if serr := p.ensureStream(ctx); serr != nil {
			return serr
		}
		_, err = p.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(p.cfg.Stream))
	}
	if err != nil {
		return fmt.Errorf("nats: publish event %s: %w", ev.ID, err)
	}
	return nil
}

// PublishAll sends evs with asynchronous publishes (each with its
// Nats-Msg-Id) and waits for their PubAcks, in order: evs[:n] are in the
// stream. A missing stream is made for the next try.
func (p *JetStream) PublishAll(ctx context.Context, evs []store.Event) (int, error) {
	futs := make([]jetstream.PubAckFuture, 0, len(evs))
	var sendErr error
	for _, ev := range evs {
		body, err := json.Marshal(ev)
		if err != nil {
			sendErr = err
			break
		}
		msg := &nats.Msg{Subject: p.Subject(ev.ItemID), Data: body, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, ev.ID)
		f, err := p.js.PublishMsgAsync(msg, jetstream.WithExpectStream(p.cfg.Stream))
		if err != nil {
			sendErr = fmt.Errorf("nats: publish event %s: %w", ev.ID, err)
			break
		}
		futs = append(futs, f)
	}
	for i, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if errorsIs(err, jetstream.ErrNoStreamResponse) || errorsIs(err, jetstream.ErrStreamNotFound) {
				if serr := p.ensureStream(ctx); serr != nil {
					return i, serr
				}
			}
			return i, fmt.Errorf("nats: publish event %s: %w", evs[i].ID, err)
		case <-ctx.Done():
			return i, fmt.Errorf("nats: publish event %s: %w", evs[i].ID, ctx.Err())
		}
	}
	return len(futs), sendErr
}

// Close closes the connection.
func (p *JetStream) Close() { p.nc.Close() }

func errorsIs(err, target error) bool { return errors.Is(err, target) }
