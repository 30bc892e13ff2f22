package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/stock/store"
)

type options struct {
	nats, durable, stream, prefix string
	item                          int64
	onlyNew                       bool
	feed, token                   string
	after                         int64
	poll                          time.Duration
	n                             int
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("seckill-events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.nats, "nats", "", "NATS server URL (the service's SECKILL_NATS_URL)")
	fs.StringVar(&o.durable, "durable", "", "durable consumer name: acknowledge each event, go on from the last one when started again")
	fs.StringVar(&o.stream, "stream", outbox.DefaultStream, "JetStream stream")
	fs.StringVar(&o.prefix, "subject-prefix", outbox.DefaultSubjectPrefix, "subject prefix (events of item N are on <prefix>.N)")
	fs.Int64Var(&o.item, "item", 0, "only this item's events (0: every item)")
	fs.BoolVar(&o.onlyNew, "new", false, "only events published from now on (not with -durable, which goes on where it was)")
	fs.StringVar(&o.feed, "feed", "", "the service's base URL: read GET /api/v1/admin/events instead of NATS")
	fs.StringVar(&o.token, "token", "", "admin token for -feed")
	fs.Int64Var(&o.after, "after", 0, "-feed: start after this cursor (a page's next_after)")
	fs.DurationVar(&o.poll, "poll", time.Second, "-feed: how often to look for new events")
	fs.IntVar(&o.n, "n", 0, "stop after this many events (0: run until interrupted)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := o.check(fs.NArg()); err != nil {
		fmt.Fprintln(stderr, "seckill-events:", err)
		return 2
	}
	out := &printer{w: stdout, n: o.n}
	var err error
	if o.feed != "" {
		err = tailFeed(ctx, o, out)
	} else {
		err = consume(ctx, o, out)
	}
	if err != nil && !errors.Is(err, errEnough) && ctx.Err() == nil {
		fmt.Fprintln(stderr, "seckill-events:", err)
		return 1
	}
	return 0
}

func (o options) check(extra int) error {
	switch {
	case extra > 0:
		return errors.New("no arguments expected, only flags")
	case (o.nats == "") == (o.feed == ""):
		return errors.New("give one of -nats URL or -feed URL")
	case o.feed != "" && o.token == "":
		return errors.New("-feed needs -token (the admin token)")
	case o.onlyNew && o.durable != "":
		return errors.New("-new and -durable: a durable consumer goes on where it was")
	case o.item < 0 || o.after < 0 || o.n < 0 || o.poll <= 0:
		return errors.New("-item, -after and -n must not be negative, -poll must be positive")
	}
	return nil
}

// errEnough ends a run that printed its -n events.
var errEnough = errors.New("enough events")

// printer writes events as JSON lines and counts them against -n.
type printer struct {
	w    io.Writer
	n    int
	seen int
}

func (p *printer) print(body []byte) error {
	if _, err := fmt.Fprintf(p.w, "%s\n", strings.TrimSpace(string(body))); err != nil {
		return err
	}
	p.seen++
	if p.n > 0 && p.seen >= p.n {
		return errEnough
	}
	return nil
}

func consume(ctx context.Context, o options, out *printer) error {
	nc, err := nats.Connect(o.nats, nats.Name("seckill-events"), nats.Timeout(5*time.Second))
	if err != nil {
		return fmt.Errorf("nats %s: %w", o.nats, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	subject := o.prefix + ".>"
	if o.item > 0 {
		subject = o.prefix + "." + strconv.FormatInt(o.item, 10)
	}
	if o.durable != "" {
		cons, err := js.CreateOrUpdateConsumer(ctx, o.stream, jetstream.ConsumerConfig{
			Durable: o.durable, FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			return fmt.Errorf("stream %s: %w", o.stream, err)
		}
		return consumeDurable(ctx, cons, out)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}
	if o.onlyNew {
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	cons, err := js.OrderedConsumer(ctx, o.stream, cfg)
	if err != nil {
		return fmt.Errorf("stream %s: %w", o.stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	go func() { <-ctx.Done(); it.Stop() }()
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			return err
		}
		if err := out.print(msg.Data()); err != nil {
			return err
		}
	}
}

// consumeDurable takes one event at a time and acknowledges it once
// printed, so nothing is held unacknowledged when the command stops: the
// next run goes on from the first event not printed, at once rather than
// after the consumer's AckWait.
func consumeDurable(ctx context.Context, cons jetstream.Consumer, out *printer) error {
	for ctx.Err() == nil {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
			continue // nothing new within a second: look again
		}
		if err != nil {
			return err
		}
		perr := out.print(msg.Data())
		if perr != nil && !errors.Is(perr, errEnough) {
			return perr // not acknowledged: delivered again
		}
		if err := msg.DoubleAck(ctx); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		if perr != nil {
			return perr
		}
	}
	return ctx.Err()
}

type feedPage struct {
	Events    []json.RawMessage `json:"events"`
	NextAfter int64             `json:"next_after"`
}

func tailFeed(ctx context.Context, o options, out *printer) error {
	base := strings.TrimRight(o.feed, "/")
	after := o.after
	client := &http.Client{Timeout: 15 * time.Second}
	for {
		q := url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {"1000"}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/admin/events?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+o.token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /api/v1/admin/events: %s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		var p feedPage
		if err := json.Unmarshal(body, &p); err != nil {
			return fmt.Errorf("GET /api/v1/admin/events: %w", err)
		}
		for _, e := range p.Events {
			// The same body as a JetStream consumer's: the event without
			// its cursor.
			var ev store.Event
			if err := json.Unmarshal(e, &ev); err != nil {
				return fmt.Errorf("GET /api/v1/admin/events: %w", err)
			}
			if o.item > 0 && ev.ItemID != o.item {
				continue
			}
			line, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			if err := out.print(line); err != nil {
				return err
			}
		}
		after = p.NextAfter
		if len(p.Events) > 0 {
			continue // more may be waiting
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.poll):
		}
	}
}
