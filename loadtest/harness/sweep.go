package harness

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"math"
	"time"
)

// SweepPoint is one open-loop run at one offered rate, for one strategy:
// the latency of the acknowledged orders (from their intended send time),
// what rate the service kept up with, and the run's verdict.
type SweepPoint struct {
	Strategy string        `json:"strategy"`
	Offered  float64       `json:"offered_per_sec"`
	Achieved float64       `json:"achieved_per_sec"` // attempts answered per second of load
	Acked    int           `json:"acked"`
	P50      time.Duration `json:"p50_ns"`
	P90      time.Duration `json:"p90_ns"`
	P99      time.Duration `json:"p99_ns"`
	Pass     bool          `json:"pass"`
}

// Sweep runs an open-loop load at each rate in turn, for every strategy of
// cfg, each for about seconds of load on a fresh item whose stock is never
// reached (the curve is of admissions, not of sold-out answers). Every run
// is verified like any other; a run that fails its invariants is reported
// with Pass false. progress, when set, gets one line per run.
func Sweep(ctx context.Context, cfg Config, rates []float64, seconds float64, progress io.Writer) ([]SweepPoint, error) {
	var points []SweepPoint
	for _, rate := range rates {
		c := cfg
		c.Mode = ModeOpen
		c.Rate = rate
		c.Attempts = max(1, int(rate*seconds))
		c.Stock = c.Attempts + 1
		c.Users = c.Attempts
		c.RepeatShare, c.RetryShare = 0, 0
		c.BaselineDuration = -1
		c.MaxDuration = time.Duration(2*seconds*float64(time.Second)) + 10*time.Second
		rep, err := Run(ctx, c)
		if err != nil {
			return points, fmt.Errorf("sweep at %.0f/s: %w", rate, err)
		}
		for _, s := range rep.Strategies {
			var lat []time.Duration
			for i := range s.Records {
				if acked(s.Records[i].Outcome) {
					lat = append(lat, s.Records[i].Latency())
				}
			}
			st := latencyStats(lat)
			p := SweepPoint{Strategy: s.Strategy, Offered: rate, Acked: st.Count, P50: st.P50, P90: st.P90, P99: st.P99, Pass: s.Pass}
			if s.Duration > 0 {
				p.Achieved = float64(s.Attempts) / s.Duration.Seconds()
			}
			points = append(points, p)
			if progress != nil {
				fmt.Fprintf(progress, "sweep %-9s offered %6.0f/s achieved %6.0f/s  p50 %7.1fms p90 %7.1fms p99 %7.1fms  %s\n",
					p.Strategy, p.Offered, p.Achieved, millis(p.P50), millis(p.P90), millis(p.P99), verdictWord(p.Pass))
			}
		}
	}
	return points, nil
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func verdictWord(pass bool) string {
	if pass {
		return "PASS"
	}
	return "FAIL"
}

// WriteSweepText writes the points as a Markdown table.
func WriteSweepText(w io.Writer, points []SweepPoint) {
	fmt.Fprintln(w, "| strategy | offered/s | achieved/s | acked | p50 ms | p90 ms | p99 ms | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, p := range points {
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %d | %.1f | %.1f | %.1f | %s |\n",
			p.Strategy, p.Offered, p.Achieved, p.Acked, millis(p.P50), millis(p.P90), millis(p.P99), verdictWord(p.Pass))
	}
}

// WriteSweepSVG draws latency percentiles (log scale) against the offered
// rate, one panel per strategy, so the knee of each curve shows.
func WriteSweepSVG(w io.Writer, title string, points []SweepPoint) error {
	var strategies []string
	byStrategy := map[string][]SweepPoint{}
	maxRate, maxMS := 0.0, 1.0
	for _, p := range points {
		if _, ok := byStrategy[p.Strategy]; !ok {
			strategies = append(strategies, p.Strategy)
		}
		byStrategy[p.Strategy] = append(byStrategy[p.Strategy], p)
		maxRate = math.Max(maxRate, p.Offered)
		maxMS = math.Max(maxMS, millis(p.P99))
	}
	const width, panelH, left, right, top, gap = 760, 260, 70, 150, 50, 80
	height := top + len(strategies)*(panelH+gap)
	logMax := math.Ceil(math.Log10(maxMS))
	logMin := -1.0 // 0.1 ms
	x := func(rate float64) float64 { return left + rate/maxRate*float64(width-left-right) }
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintln(&b, `<rect width="100%" height="100%" fill="white"/>`)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	series := []struct {
		name, color, dash string
		get               func(SweepPoint) time.Duration
	}{
		{"p50", "#1f77b4", "", func(p SweepPoint) time.Duration { return p.P50 }},
		{"p90", "#ff7f0e", "6 3", func(p SweepPoint) time.Duration { return p.P90 }},
		{"p99", "#d62728", "2 3", func(p SweepPoint) time.Duration { return p.P99 }},
	}
	for i, s := range strategies {
		y0 := float64(top + i*(panelH+gap))
		y := func(d time.Duration) float64 {
			v := math.Log10(math.Max(millis(d), 0.1))
			return y0 + float64(panelH) - (v-logMin)/(logMax-logMin)*float64(panelH)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s: latency of acknowledged orders vs offered rate (open loop)</text>`+"\n",
			left, y0-8, html.EscapeString(s))
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", left, y0, width-left-right, panelH)
		for e := logMin; e <= logMax; e++ {
			yy := y0 + float64(panelH) - (e-logMin)/(logMax-logMin)*float64(panelH)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%g ms</text>`+"\n",
				left, yy, width-right, yy, left-6, yy+4, math.Pow(10, e))
		}
		for k := 0; k <= 4; k++ {
			r := maxRate * float64(k) / 4
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%.0f/s</text>`+"\n", x(r), y0+float64(panelH)+16, r)
		}
		for j, se := range series {
			var path bytes.Buffer
			for k, p := range byStrategy[s] {
				cmd := "L"
				if k == 0 {
					cmd = "M"
				}
				fmt.Fprintf(&path, "%s%.1f %.1f ", cmd, x(p.Offered), y(se.get(p)))
			}
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`+"\n", path.String(), se.color, se.dash)
			for _, p := range byStrategy[s] {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s %s at %.0f/s: %.1f ms</title></circle>`+"\n",
					x(p.Offered), y(se.get(p)), se.color, html.EscapeString(s), se.name, p.Offered, millis(se.get(p)))
			}
			ly := y0 + 20 + float64(j)*18
			fmt.Fprintf(&b, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="%s" stroke-width="2" stroke-dasharray="%s"/><text x="%d" y="%.0f">%s</text>`+"\n",
				width-right+10, ly, width-right+40, ly, se.color, se.dash, width-right+46, ly+4, se.name)
		}
		// The p99 target of an order at 80 % of the peak rate (issue 12).
		ty := y(20 * time.Millisecond)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#555" stroke-dasharray="1 4"/><text x="%d" y="%.1f" fill="#555">20 ms</text>`+"\n",
			left, ty, width-right, ty, width-right+10, ty+4)
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="middle">offered rate (orders attempted per second)</text>`+"\n",
			left+(width-left-right)/2, y0+float64(panelH)+34)
		// Where the service stopped keeping up: achieved well under offered.
		for _, p := range byStrategy[s] {
			if p.Achieved < 0.9*p.Offered {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#d62728">behind</text>`+"\n", x(p.Offered), y0+12)
			}
		}
	}
	fmt.Fprintln(&b, `</svg>`)
	_, err := w.Write(b.Bytes())
	return err
}
