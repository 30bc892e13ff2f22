package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is the result of Run.
type Report struct {
	Config     ConfigSummary     `json:"config"`
	Baseline   *Baseline         `json:"baseline,omitempty"`
	Strategies []*StrategyReport `json:"strategies"`
	Pass       bool              `json:"pass"`
}

// ConfigSummary is the part of Config worth printing.
type ConfigSummary struct {
	BaseURL     string   `json:"base_url"`
	URLs        []string `json:"urls"`
	Mode        string   `json:"mode"`
	Concurrency int      `json:"concurrency"`
	Rate        float64  `json:"rate,omitempty"`
	Stock       int      `json:"stock"`
	Attempts    int      `json:"attempts"`
	Users       int      `json:"users"`
	RepeatShare float64  `json:"repeat_share"`
	RetryShare  float64  `json:"retry_share"`
	Seed        uint64   `json:"seed"`
	RunID       string   `json:"run_id"`
	DB          bool     `json:"db"`
}

func summarize(c Config) ConfigSummary {
	s := ConfigSummary{BaseURL: c.BaseURL, URLs: c.URLs, Mode: c.Mode, Concurrency: c.Concurrency, Stock: c.Stock,
		Attempts: c.Attempts, Users: c.Users, RepeatShare: c.RepeatShare, RetryShare: c.RetryShare,
		Seed: c.Seed, RunID: c.RunID, DB: c.Store != nil}
	if c.Mode == ModeOpen {
		s.Rate = c.Rate
	}
	return s
}

// LatencyStats are exact percentiles over all samples.
type LatencyStats struct {
	Count int           `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
}

func latencyStats(d []time.Duration) LatencyStats {
	if len(d) == 0 {
		return LatencyStats{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	q := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1 // nearest rank
		return s[min(max(i, 0), len(s)-1)]
	}
	return LatencyStats{Count: len(s), P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: s[len(s)-1]}
}

// Bucket is one slice of the timeline.
type Bucket struct {
	At       time.Duration `json:"at_ns"` // start of the bucket, from the start of the load
	Attempts int           `json:"attempts"`
	Acked    int           `json:"acked"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
}

// InstanceCount is what one instance (one -url) was sent and answered.
type InstanceCount struct {
	URL      string `json:"url"`
	Attempts int    `json:"attempts"`
	Acked    int    `json:"acked"`   // 201 or 202
	Unknown  int    `json:"unknown"` // no answer, 5xx or a 2xx without an order
}

// StrategyReport is the outcome for one item/strategy.
type StrategyReport struct {
	Strategy       string                  `json:"strategy"`
	ItemID         int64                   `json:"item_id"`
	Stock          int                     `json:"stock"`
	Planned        int                     `json:"planned"`
	Attempts       int                     `json:"attempts"`
	Replays        int                     `json:"replays"`
	DistinctUsers  int                     `json:"distinct_users"`
	Successes      int                     `json:"successes"` // distinct acknowledged order ids
	Duration       time.Duration           `json:"duration_ns"`
	AttemptsPerSec float64                 `json:"attempts_per_sec"`
	SellOutAt      time.Duration           `json:"sell_out_at_ns"` // -1 if never sold out
	SuccessPerSec  float64                 `json:"success_per_sec"`
	BaselineRatio  float64                 `json:"baseline_ratio,omitempty"`
	Outcomes       map[string]int          `json:"outcomes"`
	Statuses       map[int]int             `json:"statuses"`
	Latency        map[string]LatencyStats `json:"latency"`
	Timeline       []Bucket                `json:"timeline"`
	BucketWidth    time.Duration           `json:"bucket_width_ns"`
	Instances      []InstanceCount         `json:"instances"` // per Config.URLs entry, in order
	Drain          DrainResult             `json:"drain"`
	Final          Item                    `json:"final_item"`
	DBChecked      bool                    `json:"db_checked"`
	Invariants     []Invariant             `json:"invariants"`
	Pass           bool                    `json:"pass"`
	Room           *RoomReport             `json:"room,omitempty"` // ModeRoom only

	Records []Record `json:"-"`
}

func newStrategyReport(label string, item Item, cfg Config, recs []Record, planned int, start, end time.Time) *StrategyReport {
	sr := &StrategyReport{Strategy: label, ItemID: item.ID, Stock: cfg.Stock, Planned: planned, Attempts: len(recs),
		Outcomes: map[string]int{}, Statuses: map[int]int{}, Latency: map[string]LatencyStats{}, SellOutAt: -1, Records: recs}
	sr.Instances = make([]InstanceCount, len(cfg.URLs))
	for i, u := range cfg.URLs {
		sr.Instances[i].URL = u
	}
	var first, last time.Time
	byOutcome := map[string][]time.Duration{}
	var all []time.Duration
	firstAck := map[string]time.Time{} // order id -> when it was first acknowledged
	for i := range recs {
		r := &recs[i]
		if r.ReplayOf >= 0 {
			sr.Replays++
		}
		sr.Outcomes[r.Outcome]++
		sr.Statuses[r.Status]++
		if r.Instance >= 0 && r.Instance < len(sr.Instances) {
			in := &sr.Instances[r.Instance]
			in.Attempts++
			switch {
			case acked(r.Outcome):
				in.Acked++
			case unknownOutcome(r.Outcome):
				in.Unknown++
			}
		}
		l := r.Latency()
		byOutcome[r.Outcome] = append(byOutcome[r.Outcome], l)
		all = append(all, l)
		s := r.Start
		if !r.Intended.IsZero() {
			s = r.Intended
		}
		if first.IsZero() || s.Before(first) {
			first = s
		}
		if r.End.After(last) {
			last = r.End
		}
		if acked(r.Outcome) {
			if t, ok := firstAck[r.OrderID]; !ok || r.End.Before(t) {
				firstAck[r.OrderID] = r.End
			}
		}
		if r.Outcome == OutcomeSoldOut {
			if at := r.End.Sub(start); sr.SellOutAt < 0 || at < sr.SellOutAt {
				sr.SellOutAt = at
			}
		}
	}
	for k, v := range byOutcome {
		sr.Latency[k] = latencyStats(v)
	}
	sr.Latency["all"] = latencyStats(all)
	if len(recs) > 0 {
		sr.Duration = last.Sub(first)
		if sr.Duration > 0 {
			sr.AttemptsPerSec = float64(len(recs)) / sr.Duration.Seconds()
		}
		// Orders per second up to the sell-out: distinct orders over the
		// time until the last new order was acknowledged (replays of an
		// old order later on do not stretch the window).
		ackWindow := sr.Duration
		if sr.SellOutAt >= 0 && len(firstAck) > 0 {
			var lastNew time.Time
			for _, t := range firstAck {
				if t.After(lastNew) {
					lastNew = t
				}
			}
			ackWindow = lastNew.Sub(first)
		}
		if ackWindow > 0 {
			sr.SuccessPerSec = float64(len(firstAck)) / ackWindow.Seconds()
		}
	}
	sr.Timeline, sr.BucketWidth = timeline(recs, start, end)
	return sr
}

// timeline groups completions into about 60 buckets (at least 100 ms wide).
func timeline(recs []Record, start, end time.Time) ([]Bucket, time.Duration) {
	total := end.Sub(start)
	w := max(100*time.Millisecond, (total / 60).Round(100*time.Millisecond))
	n := int(total/w) + 1
	lat := make([][]time.Duration, n)
	bs := make([]Bucket, n)
	for i := range bs {
		bs[i].At = time.Duration(i) * w
	}
	for i := range recs {
		k := min(max(int(recs[i].End.Sub(start)/w), 0), n-1)
		bs[k].Attempts++
		if acked(recs[i].Outcome) {
			bs[k].Acked++
		}
		lat[k] = append(lat[k], recs[i].Latency())
	}
	for i := range bs {
		s := latencyStats(lat[i])
		bs[i].P50, bs[i].P99 = s.P50, s.P99
	}
	return bs, w
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

// WriteText prints the human report.
func (rep *Report) WriteText(w io.Writer) {
	c := rep.Config
	urls := c.BaseURL
	if len(c.URLs) > 1 {
		urls = strings.Join(c.URLs, ",")
	}
	fmt.Fprintf(w, "seckill load test  run=%s  url=%s  mode=%s  concurrency=%d", c.RunID, urls, c.Mode, c.Concurrency)
	if c.Mode == ModeOpen {
		fmt.Fprintf(w, "  rate=%.0f/s", c.Rate)
	}
	fmt.Fprintf(w, "\nstock=%d attempts=%d users=%d repeat=%.2f retry=%.2f seed=%d db=%v\n", c.Stock, c.Attempts, c.Users, c.RepeatShare, c.RetryShare, c.Seed, c.DB)
	if b := rep.Baseline; b != nil {
		fmt.Fprintf(w, "\nbaseline GET /healthz: %d requests in %.2fs = %.0f req/s (errors %d)  p50 %s p90 %s p99 %s max %s\n",
			b.Requests, b.Duration.Seconds(), b.PerSecond, b.Errors, ms(b.Latency.P50), ms(b.Latency.P90), ms(b.Latency.P99), ms(b.Latency.Max))
	}
	for _, s := range rep.Strategies {
		fmt.Fprintf(w, "\n== strategy %s (item %d, stock %d) ==\n", s.Strategy, s.ItemID, s.Stock)
		fmt.Fprintf(w, "attempts %d of %d planned (%d replays), distinct users %d, in %.2fs\n", s.Attempts, s.Planned, s.Replays, s.DistinctUsers, s.Duration.Seconds())
		fmt.Fprintf(w, "throughput: %.0f attempts/s", s.AttemptsPerSec)
		if c.Mode == ModeOpen {
			fmt.Fprintf(w, " (offered %.0f/s)", c.Rate)
		}
		if s.BaselineRatio > 0 {
			fmt.Fprintf(w, " = %.1f%% of the /healthz ceiling", 100*s.BaselineRatio)
		}
		fmt.Fprintf(w, "; %d orders, %.0f orders/s", s.Successes, s.SuccessPerSec)
		if s.SellOutAt >= 0 {
			fmt.Fprintf(w, " up to sell-out at %.3fs", s.SellOutAt.Seconds())
		} else {
			fmt.Fprint(w, " (never sold out)")
		}
		fmt.Fprintln(w)
		statuses := make([]int, 0, len(s.Statuses))
		for k := range s.Statuses {
			statuses = append(statuses, k)
		}
		sort.Ints(statuses)
		var parts []string
		for _, k := range statuses {
			name := fmt.Sprint(k)
			if k == 0 {
				name = "no-response"
			}
			parts = append(parts, fmt.Sprintf("%s:%d", name, s.Statuses[k]))
		}
		fmt.Fprintf(w, "status: %s\n", strings.Join(parts, " "))
		if len(s.Instances) > 1 {
			for i, in := range s.Instances {
				fmt.Fprintf(w, "instance %d %s: %d attempts, %d acknowledged, %d unknown\n", i, in.URL, in.Attempts, in.Acked, in.Unknown)
			}
		}
		outs := make([]string, 0, len(s.Latency))
		for k := range s.Latency {
			if k != "all" {
				outs = append(outs, k)
			}
		}
		sort.Strings(outs)
		outs = append(outs, "all")
		fmt.Fprintf(w, "%-20s %7s %10s %10s %10s %10s\n", "latency by outcome", "count", "p50", "p90", "p99", "max")
		for _, k := range outs {
			l := s.Latency[k]
			fmt.Fprintf(w, "%-20s %7d %10s %10s %10s %10s\n", k, l.Count, ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max))
		}
		if s.Drain.Pending > 0 {
			fmt.Fprintf(w, "drain: %d pending -> %d persisted, %d still pending, %d missing, in %.2fs\n",
				s.Drain.Pending, s.Drain.Persisted, s.Drain.StillPending, s.Drain.Missing, s.Drain.Took.Seconds())
		}
		if s.Room != nil {
			writeRoomText(w, s.Room)
		}
		fmt.Fprintf(w, "item after: stock %d sold %d remaining %d\n", s.Final.Stock, s.Final.Sold, s.Final.Remaining)
		for _, inv := range s.Invariants {
			name := inv.Name
			if inv.Timing {
				name += " [timing]"
			}
			fmt.Fprintf(w, "  %s  %-45s %s\n", inv.Verdict(), name, inv.Detail)
		}
	}
	verdict := "PASS"
	if !rep.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\nRESULT: %s\n", verdict)
}

// WriteJSON writes the report (without the per-request records) as JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
