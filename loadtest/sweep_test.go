package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/seckill/seckill/loadtest/harness"
)

// TestSweep: every rate gives one point per strategy with the latency of
// its acknowledged orders, a correct service passes, one that loses an
// acknowledged order fails, and the chart draws a curve per percentile.
func TestSweep(t *testing.T) {
	t.Parallel()
	// CPU-heavy: never beside another package's latency-bound test.
	f, srv := newFake(t, fakeBugs{})
	cfg := fakeConfig(srv.URL, f.token)
	cfg.Store = f
	cfg.Concurrency = 64
	points, err := harness.Sweep(context.Background(), cfg, []float64{200, 400}, 1, nil)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if len(points) != 4 {
		t.Fatalf("got %d points, want 2 rates x 2 strategies", len(points))
	}
	for _, p := range points {
		if !p.Pass || p.Acked != int(p.Offered) || p.P50 <= 0 || p.P99 < p.P50 {
			t.Errorf("point %+v: want a pass with every attempt acknowledged (stock is never reached) and p99 >= p50 > 0", p)
		}
	}
	var svg bytes.Buffer
	if err := harness.WriteSweepSVG(&svg, "test <sweep>", points); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(svg.String(), "<path "); n != 6 {
		t.Errorf("chart has %d curves, want 3 percentiles x 2 strategies", n)
	}
	if strings.Contains(svg.String(), "<sweep>") {
		t.Error("the chart's title is not escaped")
	}

	f, srv = newFake(t, fakeBugs{loseAckedNth: 7})
	cfg = fakeConfig(srv.URL, f.token)
	cfg.Store = f
	points, err = harness.Sweep(context.Background(), cfg, []float64{200}, 1, nil)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	failed := false
	for _, p := range points {
		failed = failed || !p.Pass
	}
	if !failed {
		t.Error("a service that lost an acknowledged order passed the sweep")
	}
}
