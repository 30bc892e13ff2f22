package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Record is one order attempt, as written to the -history JSONL file.
type Record struct {
	Seq         int       `json:"seq"`
	Strategy    string    `json:"strategy"`
	ItemID      int64     `json:"item_id"`
	User        string    `json:"user"`
	Key         string    `json:"key"`
	ReplayOf    int       `json:"replay_of"` // seq of the attempt this one replays, -1 if none
	Instance    int       `json:"instance"`  // index in Config.URLs of the instance it was sent to
	Intended    time.Time `json:"intended,omitzero"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	Status      int       `json:"status"`
	Code        string    `json:"code,omitempty"`
	Outcome     string    `json:"outcome"`
	OrderID     string    `json:"order_id,omitempty"`
	OrderStatus string    `json:"order_status,omitempty"`
	Err         string    `json:"error,omitempty"`
	// Probe names a room-mode attempt made to be refused (see roomProbes).
	Probe string `json:"probe,omitempty"`

	pass string // the Seckill-Pass header sent with the order, if any
	sent bool
}

// Latency is measured from the intended send time in open loop (so a slow
// server cannot hide queueing, i.e. no coordinated omission) and from the
// actual send time in closed loop.
func (r *Record) Latency() time.Duration {
	if !r.Intended.IsZero() {
		return r.End.Sub(r.Intended)
	}
	return r.End.Sub(r.Start)
}

// plan builds the attempts for one item: fresh users first, a RepeatShare of
// attempts by users who already tried (fresh key), and a RetryShare of exact
// replays (same user, same key) of an earlier attempt.
func plan(cfg Config, itemID int64, strategy string, salt uint64) []Record {
	rng := rand.New(rand.NewPCG(cfg.Seed, salt))
	recs := make([]Record, cfg.Attempts)
	users := 0
	for i := range recs {
		r := &recs[i]
		r.Seq, r.Strategy, r.ItemID, r.ReplayOf = i, strategy, itemID, -1
		x := rng.Float64()
		if i > 0 && x < cfg.RetryShare {
			// Prefer an original far enough back that it has likely finished;
			// the worker still waits for it before replaying.
			hi := i - cfg.Concurrency
			if hi <= 0 {
				hi = i
			}
			j := rng.IntN(hi)
			if recs[j].ReplayOf >= 0 {
				j = recs[j].ReplayOf
			}
			r.User, r.Key, r.ReplayOf = recs[j].User, recs[j].Key, j
			continue
		}
		var u int
		if users > 0 && (users >= cfg.Users || x < cfg.RetryShare+cfg.RepeatShare) {
			u = rng.IntN(users)
		} else {
			u = users
			users++
		}
		r.User = caseVariant(fmt.Sprintf("lt-%s-u%d", cfg.RunID, u/2), u)
		r.Key = caseVariant(fmt.Sprintf("lt-%s-i%d-k%d", cfg.RunID, itemID, i/2), i)
	}
	return recs
}

// caseVariant is base for even n and base in upper case for odd n: user
// ids and keys come in pairs that differ only in case, which the service
// must treat as distinct (they are byte-exact on every backend).
func caseVariant(base string, n int) string {
	if n%2 == 1 {
		return strings.ToUpper(base)
	}
	return base
}

type counters struct {
	attempts, acked, soldOut, dup, errors atomic.Int64
}

func (c *counters) add(r *Record) {
	c.attempts.Add(1)
	switch {
	case acked(r.Outcome):
		c.acked.Add(1)
	case r.Outcome == OutcomeSoldOut:
		c.soldOut.Add(1)
	case r.Outcome == OutcomeAlreadyPurchased:
		c.dup.Add(1)
	default:
		c.errors.Add(1)
	}
}

// progress prints a line about once per cfg.ProgressEvery until stop is closed.
func progress(cfg Config, label string, c *counters, stop <-chan struct{}, done chan<- struct{}) {
	start, last, lastN := time.Now(), time.Now(), int64(0)
	progressLoop(cfg, func(now time.Time) string {
		n := c.attempts.Load()
		rate := float64(n-lastN) / now.Sub(last).Seconds()
		last, lastN = now, n
		return fmt.Sprintf("[%s %5.1fs] attempts=%d ok=%d sold_out=%d already=%d errors=%d rate=%.0f/s",
			label, now.Sub(start).Seconds(), n, c.acked.Load(), c.soldOut.Load(), c.dup.Load(), c.errors.Load(), rate)
	}, stop, done)
}

// drive sends the planned attempts. Closed loop: Concurrency workers take the
// next attempt as soon as they are free. Open loop: attempt i is due at
// t0+i/Rate; up to Concurrency are in flight and a late send still counts
// from its due time. New sends stop at MaxDuration; requests in flight finish
// (they use ctx, not the capped context).
func drive(ctx context.Context, cfg Config, cl *client, recs []Record, c *counters) (start, end time.Time) {
	loadCtx, cancel := context.WithTimeout(ctx, cfg.MaxDuration)
	defer cancel()
	done := make([]chan struct{}, len(recs))
	for i := range done {
		done[i] = make(chan struct{})
	}
	var next atomic.Int64
	next.Store(-1)
	t0 := time.Now()
	period := time.Duration(float64(time.Second) / cfg.Rate)
	var wg sync.WaitGroup
	for range min(cfg.Concurrency, max(len(recs), 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i >= len(recs) {
					return
				}
				r := &recs[i]
				if !waitTurn(loadCtx, cfg, t0, period, r, done) {
					close(done[i])
					continue // drains the remaining indices without sending
				}
				rctx, rcancel := context.WithTimeout(ctx, cfg.RequestTimeout)
				cl.placeOrder(rctx, r)
				rcancel()
				r.sent = true
				c.add(r)
				close(done[i])
			}
		})
	}
	wg.Wait()
	return t0, time.Now()
}

// waitTurn blocks until attempt r may be sent; false means the load phase is over.
func waitTurn(ctx context.Context, cfg Config, t0 time.Time, period time.Duration, r *Record, done []chan struct{}) bool {
	if ctx.Err() != nil {
		return false
	}
	if cfg.Mode == ModeOpen {
		r.Intended = t0.Add(time.Duration(r.Seq) * period)
		if d := time.Until(r.Intended); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
		}
	}
	if r.ReplayOf >= 0 {
		select {
		case <-ctx.Done():
			return false
		case <-done[r.ReplayOf]:
		}
	}
	return ctx.Err() == nil
}

// Baseline is the /healthz ceiling measured with the same client and concurrency.
type Baseline struct {
	Requests  int           `json:"requests"`
	Errors    int           `json:"errors"`
	Duration  time.Duration `json:"duration_ns"`
	PerSecond float64       `json:"per_second"`
	Latency   LatencyStats  `json:"latency"`
}

func baseline(ctx context.Context, cfg Config, cl *client) Baseline {
	bctx, cancel := context.WithTimeout(ctx, cfg.BaselineDuration)
	defer cancel()
	capN := int64(max(cfg.Attempts, 1000) * 10) // count cap besides the time cap
	var n atomic.Int64
	var mu sync.Mutex
	var lats []time.Duration
	errs := 0
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(func() {
			var local []time.Duration
			localErr := 0
			for bctx.Err() == nil && n.Add(1) <= capN {
				rctx, rc := context.WithTimeout(ctx, cfg.RequestTimeout)
				t := time.Now()
				st, _, err := cl.do(rctx, http.MethodGet, "/healthz", nil, nil)
				rc()
				if err != nil || st != http.StatusOK {
					localErr++
					continue
				}
				local = append(local, time.Since(t))
			}
			mu.Lock()
			lats = append(lats, local...)
			errs += localErr
			mu.Unlock()
		})
	}
	wg.Wait()
	d := time.Since(start)
	return Baseline{Requests: len(lats) + errs, Errors: errs, Duration: d,
		PerSecond: float64(len(lats)) / d.Seconds(), Latency: latencyStats(lats)}
}

// Run executes the whole harness: baseline, then for each strategy setup,
// load, drain and verification. The error is for failures that prevent a
// verdict (service unreachable, item creation refused); invariant failures
// are reported in Report.Pass.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cl := newClient(cfg.BaseURL, cfg.AdminToken, cfg.Concurrency, cfg.RequestTimeout)
	cl.adminBase = cfg.AdminURL
	cl.orders = cfg.URLs
	defer cl.close()

	rep := &Report{Config: summarize(cfg), Pass: true}
	if st, b, err := cl.do(ctx, http.MethodGet, "/healthz", nil, nil); err != nil || st != http.StatusOK {
		if err == nil {
			err = httpErr("healthz", st, b)
		}
		return nil, fmt.Errorf("service at %s is not healthy: %w", cfg.BaseURL, err)
	}
	if cfg.BaselineDuration > 0 {
		b := baseline(ctx, cfg, cl)
		rep.Baseline = &b
	}
	var hist *json.Encoder
	if cfg.History != nil {
		hist = json.NewEncoder(cfg.History)
	}
	for si, strategy := range cfg.Strategies {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		var sr *StrategyReport
		if cfg.Mode == ModeRoom {
			sr, err = runRoomStrategy(ctx, cfg, cl, strategy)
		} else {
			sr, err = runStrategy(ctx, cfg, cl, strategy, uint64(si+1))
		}
		if err != nil {
			return rep, err
		}
		if hist != nil {
			if err := writeHistory(hist, sr.Records); err != nil {
				return rep, fmt.Errorf("history: %w", err)
			}
		}
		if rep.Baseline != nil && rep.Baseline.PerSecond > 0 {
			sr.BaselineRatio = sr.AttemptsPerSec / rep.Baseline.PerSecond
		}
		rep.Strategies = append(rep.Strategies, sr)
		if !sr.Pass {
			rep.Pass = false
		}
	}
	return rep, nil
}

func writeHistory(enc *json.Encoder, recs []Record) error {
	for i := range recs {
		if !recs[i].sent {
			continue
		}
		if err := enc.Encode(&recs[i]); err != nil {
			return err
		}
	}
	return nil
}

func runStrategy(ctx context.Context, cfg Config, cl *client, strategy string, salt uint64) (*StrategyReport, error) {
	label := strategy
	if label == "" {
		label = "default"
	}
	item, err := cl.createItem(ctx, fmt.Sprintf("loadtest-%s-%s", cfg.RunID, label), cfg.Stock, strategy, cfg.Buckets, nil)
	if err != nil {
		return nil, err
	}
	if strategy != "" && item.Strategy != "" && item.Strategy != strategy {
		return nil, fmt.Errorf("asked for strategy %q, service created item %d with %q", strategy, item.ID, item.Strategy)
	}
	if err := cl.awaitItemEverywhere(ctx, item.ID, 10*time.Second); err != nil {
		return nil, err
	}
	recs := plan(cfg, item.ID, strategy, salt)

	var c counters
	stop, pdone := make(chan struct{}), make(chan struct{})
	go progress(cfg, label, &c, stop, pdone)
	start, end := drive(ctx, cfg, cl, recs, &c)
	close(stop)
	<-pdone

	sent := recs[:0:0]
	for i := range recs {
		if recs[i].sent {
			sent = append(sent, recs[i])
		}
	}
	sr := newStrategyReport(label, item, cfg, sent, len(recs), start, end)
	sr.Drain = drain(ctx, cfg, cl, sent)
	if err := verify(ctx, cfg, cl, sr); err != nil {
		return nil, err
	}
	return sr, nil
}

// DrainResult summarises the wait for asynchronously accepted orders.
type DrainResult struct {
	Pending      int           `json:"pending"`       // distinct order ids answered 202/pending
	Persisted    int           `json:"persisted"`     // became "created"
	StillPending int           `json:"still_pending"` // still pending at the deadline
	Missing      int           `json:"missing"`       // 404 or another final status
	Took         time.Duration `json:"took_ns"`
}

// drain polls GET /api/v1/orders/{id} for every order answered as pending
// until it is no longer pending or DrainTimeout passes.
func drain(ctx context.Context, cfg Config, cl *client, recs []Record) DrainResult {
	ids := map[string]bool{}
	for i := range recs {
		if recs[i].Outcome == OutcomePending {
			ids[recs[i].OrderID] = true
		}
	}
	res := DrainResult{Pending: len(ids)}
	if len(ids) == 0 {
		return res
	}
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	defer cancel()
	work := make(chan string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(cfg.Concurrency, len(ids)) {
		wg.Go(func() {
			for id := range work {
				st := pollOrder(dctx, cl, cfg.RequestTimeout, id)
				mu.Lock()
				switch st {
				case "created":
					res.Persisted++
				case "pending", "":
					res.StillPending++
				default:
					res.Missing++
				}
				mu.Unlock()
			}
		})
	}
	for id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	res.Took = time.Since(start)
	return res
}

// pollOrder returns the final status of an order: "created", another final
// status, "not_found", or "pending"/"" when the deadline passed first.
func pollOrder(ctx context.Context, cl *client, timeout time.Duration, id string) string {
	backoff := 10 * time.Millisecond
	last := ""
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		o, err := cl.getOrder(rctx, id)
		cancel()
		switch {
		case err == errNotFound:
			// The contract shows an accepted order as pending until it is
			// persisted, so a 404 means the order was lost.
			return "not_found"
		case err != nil:
			last = ""
		case o.Status != "pending":
			return o.Status
		default:
			last = "pending"
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
	return last
}
