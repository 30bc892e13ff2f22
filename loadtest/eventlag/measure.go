package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type config struct {
	url, token, nats, prefix, stream, strategy string
	rate, inflight                             int
	duration, wait                             time.Duration
}

func (c config) check() error {
	u, err := url.Parse(c.url)
	if err != nil || u.Hostname() == "" {
		return fmt.Errorf("-url %q: not a URL", c.url)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-url %q: load tests only target loopback", c.url)
	}
	switch {
	case c.token == "":
		return errors.New("-token is required (the admin token: the item is created through the API)")
	case c.strategy != "lua" && c.strategy != "lock" && c.strategy != "lua-async":
		return fmt.Errorf("-strategy %q: want lua, lock or lua-async", c.strategy)
	case c.rate < 1 || c.inflight < 1 || c.duration <= 0 || c.wait <= 0:
		return errors.New("-rate, -inflight, -duration and -wait must be positive")
	case c.duration > 10*time.Minute:
		return errors.New("-duration: at most 10m (load tests stop by themselves)")
	}
	return nil
}

// result is one run's figures.
type result struct {
	sent, acked, refused, failed int
	lags                         []time.Duration
	missing                      int
	elapsed                      time.Duration
}

func (r result) print(w io.Writer, c config) {
	fmt.Fprintf(w, "strategy %s: %d orders sent in %s (%.0f/s asked %d/s), %d acknowledged, %d refused, %d failed\n",
		c.strategy, r.sent, r.elapsed.Round(time.Millisecond), float64(r.sent)/r.elapsed.Seconds(), c.rate, r.acked, r.refused, r.failed)
	if len(r.lags) > 0 {
		fmt.Fprintf(w, "lag from the 2xx to the created event at a JetStream consumer: p50 %s, p99 %s, max %s (%d events)\n",
			pct(r.lags, 50), pct(r.lags, 99), pct(r.lags, 100), len(r.lags))
	}
	if r.missing > 0 {
		fmt.Fprintf(w, "MISSING: %d acknowledged orders had no created event within %s of the last order\n", r.missing, c.wait)
	}
}

// pct is the p-th percentile of ds (sorted in place).
func pct(ds []time.Duration, p int) time.Duration {
	slices.Sort(ds)
	i := (len(ds)*p + 99) / 100
	return ds[max(0, min(len(ds)-1, i-1))].Round(10 * time.Microsecond)
}

// tracker pairs each acknowledged order with its event, in either order:
// a relay may publish before the HTTP answer is read.
type tracker struct {
	mu     sync.Mutex
	acked  map[string]time.Time
	events map[string]time.Time
	lags   []time.Duration
}

func (t *tracker) ack(id string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ev, ok := t.events[id]; ok {
		t.lags = append(t.lags, max(0, ev.Sub(at)))
		delete(t.events, id)
		return
	}
	t.acked[id] = at
}

func (t *tracker) event(id string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.acked[id]; ok {
		t.lags = append(t.lags, at.Sub(a))
		delete(t.acked, id)
		return
	}
	t.events[id] = at
}

func (t *tracker) waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.acked)
}

func measure(ctx context.Context, c config, progress io.Writer) (result, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: c.inflight, MaxConnsPerHost: c.inflight}}
	item, err := createItem(ctx, client, c)
	if err != nil {
		return result{}, err
	}
	nc, err := nats.Connect(c.nats, nats.Name("eventlag"), nats.Timeout(5*time.Second))
	if err != nil {
		return result{}, fmt.Errorf("nats %s: %w", c.nats, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return result{}, err
	}
	cons, err := js.OrderedConsumer(ctx, c.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.prefix + "." + strconv.FormatInt(item, 10)}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return result{}, fmt.Errorf("stream %s: %w (is the service running with SECKILL_NATS_URL?)", c.stream, err)
	}
	tr := &tracker{acked: map[string]time.Time{}, events: map[string]time.Time{}}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		at := time.Now()
		var body struct {
			Type    string `json:"type"`
			OrderID string `json:"order_id"`
		}
		if json.Unmarshal(m.Data(), &body) == nil && body.Type == "created" {
			tr.event(body.OrderID, at)
		}
	})
	if err != nil {
		return result{}, err
	}
	defer cc.Stop()

	var res result
	var mu sync.Mutex
	slots := make(chan struct{}, c.inflight)
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(c.rate)
	start := time.Now()
	next := start
	lastReport := start
	for n := 0; time.Since(start) < c.duration && ctx.Err() == nil; n++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		res.sent++
		wg.Add(1)
		go func(user string) {
			defer wg.Done()
			defer func() { <-slots }()
			id, status, err := order(ctx, client, c, item, user)
			at := time.Now()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				res.failed++
			case status == http.StatusCreated || status == http.StatusAccepted:
				res.acked++
				tr.ack(id, at)
			default:
				res.refused++
			}
		}(fmt.Sprintf("lag-%d", n))
		if time.Since(lastReport) >= 2*time.Second {
			lastReport = time.Now()
			mu.Lock()
			fmt.Fprintf(progress, "eventlag: %s: %d sent, %d acknowledged, %d events pending\n", time.Since(start).Round(time.Second), res.sent, res.acked, tr.waiting())
			mu.Unlock()
		}
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	for deadline := time.Now().Add(c.wait); tr.waiting() > 0 && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(50 * time.Millisecond)
	}
	tr.mu.Lock()
	res.lags, res.missing = tr.lags, len(tr.acked)
	tr.mu.Unlock()
	return res, nil
}

func createItem(ctx context.Context, client *http.Client, c config) (int64, error) {
	body, _ := json.Marshal(map[string]any{"name": "eventlag " + c.strategy, "stock": int64(c.rate) * int64(c.duration/time.Second+1) * 2, "strategy": c.strategy})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/api/v1/admin/items", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("create item: %s: %s", resp.Status, b)
	}
	var it struct{ ID int64 }
	if err := json.Unmarshal(b, &it); err != nil {
		return 0, err
	}
	return it.ID, nil
}

func order(ctx context.Context, client *http.Client, c config, item int64, user string) (string, int, error) {
	body, _ := json.Marshal(map[string]string{"user_id": user})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/api/v1/items/"+strconv.FormatInt(item, 10)+"/orders", bytes.NewReader(body))
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var o struct{ ID string }
	_ = json.Unmarshal(b, &o)
	return o.ID, resp.StatusCode, nil
}
