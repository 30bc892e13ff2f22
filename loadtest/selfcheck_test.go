package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/loadtest/harness"
)

// The harness must PASS a correct service and FAIL each deliberately broken
// fake, naming the violated invariant.

func fakeConfig(srv string, token string) harness.Config {
	return harness.Config{
		BaseURL:          srv,
		AdminToken:       token,
		Strategies:       []string{"lua", "lock"},
		Stock:            50,
		Attempts:         600,
		Users:            200,
		RepeatShare:      0.2,
		RetryShare:       0.1,
		Concurrency:      16,
		BaselineDuration: 200 * time.Millisecond,
		DrainTimeout:     10 * time.Second,
		MaxDuration:      30 * time.Second,
		Seed:             42,
	}
}

func runFake(t *testing.T, bugs fakeBugs, withDB bool, mutate func(*harness.Config)) *harness.Report {
	t.Helper()
	f, srv := newFake(t, bugs)
	cfg := fakeConfig(srv.URL, f.token)
	if withDB {
		cfg.Store = f
	}
	if mutate != nil {
		mutate(&cfg)
	}
	rep, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var buf bytes.Buffer
	rep.WriteText(&buf)
	t.Log("\n" + buf.String())
	return rep
}

// verdicts maps invariant name prefix ("1", "2", "3a", ...) to its verdict, per strategy.
func verdicts(rep *harness.Report) []map[string]string {
	var out []map[string]string
	for _, s := range rep.Strategies {
		m := map[string]string{}
		for _, inv := range s.Invariants {
			m[strings.Fields(inv.Name)[0]] = inv.Verdict()
		}
		out = append(out, m)
	}
	return out
}

func wantVerdict(t *testing.T, rep *harness.Report, inv, want string) {
	t.Helper()
	for i, m := range verdicts(rep) {
		if got := m[inv]; got != want {
			t.Errorf("strategy %s: invariant %s = %q, want %s", rep.Strategies[i].Strategy, inv, got, want)
		}
	}
}

func wantAllPass(t *testing.T, rep *harness.Report, skipped ...string) {
	t.Helper()
	if !rep.Pass {
		t.Errorf("report FAILs on a correct service")
	}
	if len(rep.Strategies) == 0 {
		t.Fatal("no strategy ran")
	}
	for i, m := range verdicts(rep) {
		for name, v := range m {
			want := "PASS"
			for _, s := range skipped {
				if s == name {
					want = "SKIP"
				}
			}
			if v != want {
				t.Errorf("strategy %s: invariant %s = %s, want %s", rep.Strategies[i].Strategy, name, v, want)
			}
		}
		if len(m) != 7 {
			t.Errorf("strategy %s: %d invariants, want 7: %v", rep.Strategies[i].Strategy, len(m), m)
		}
	}
}

func TestCorrectFakePasses(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{}, true, nil)
	wantAllPass(t, rep)
	for _, s := range rep.Strategies {
		if s.Successes != 50 || s.Outcomes["sold_out"] == 0 || s.Outcomes["already_purchased"] == 0 || s.Replays == 0 {
			t.Errorf("strategy %s: load did not exercise sell-out, repeat users and replays: %+v replays=%d", s.Strategy, s.Outcomes, s.Replays)
		}
		if s.SellOutAt < 0 {
			t.Errorf("strategy %s: sell-out not detected", s.Strategy)
		}
	}
	if rep.Baseline == nil || rep.Baseline.Requests == 0 {
		t.Errorf("no /healthz baseline: %+v", rep.Baseline)
	}
}

func TestCorrectFakePassesWithoutDB(t *testing.T) {
	t.Parallel()
	wantAllPass(t, runFake(t, fakeBugs{}, false, nil), "3b")
}

func TestCorrectFakePassesOpenLoop(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{}, true, func(c *harness.Config) {
		c.Mode = harness.ModeOpen
		c.Rate = 2000
	})
	wantAllPass(t, rep)
	// More users than stock: every unit must sell.
	for _, s := range rep.Strategies {
		if s.Final.Sold != 50 {
			t.Errorf("strategy %s sold %d, want 50", s.Strategy, s.Final.Sold)
		}
	}
}

func TestCorrectAsyncFakePassesAfterDrain(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{async: true, asyncDelay: 300 * time.Millisecond}, true, nil)
	wantAllPass(t, rep)
	for _, s := range rep.Strategies {
		if s.Drain.Pending != 50 || s.Drain.Persisted != 50 {
			t.Errorf("strategy %s: drain %+v, want 50 pending -> 50 persisted", s.Strategy, s.Drain)
		}
	}
}

func TestUnderstockedUsersPass(t *testing.T) {
	t.Parallel()
	// Fewer users than stock: exactly one order per user, no sell-out.
	rep := runFake(t, fakeBugs{}, true, func(c *harness.Config) { c.Users = 30; c.Attempts = 200 })
	wantAllPass(t, rep)
	for _, s := range rep.Strategies {
		if s.Successes != 30 || s.SellOutAt >= 0 {
			t.Errorf("strategy %s: %d orders (want 30), sell-out at %v", s.Strategy, s.Successes, s.SellOutAt)
		}
	}
}

func TestOversellByOneFails(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{oversellBy: 1}, false, nil)
	if rep.Pass {
		t.Fatal("oversell by one passed")
	}
	wantVerdict(t, rep, "1", "FAIL")
	for _, s := range rep.Strategies {
		if s.Successes != 51 {
			t.Errorf("strategy %s: %d orders acknowledged, the fake sells 51", s.Strategy, s.Successes)
		}
	}
}

func TestLostAcknowledgedOrderFails(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{loseAckedNth: 7}, false, nil)
	if rep.Pass {
		t.Fatal("lost acknowledged order passed")
	}
	wantVerdict(t, rep, "3a", "FAIL")
	// With the DB it is seen there too, and sold no longer matches the rows.
	rep = runFake(t, fakeBugs{loseAckedNth: 7}, true, nil)
	wantVerdict(t, rep, "3a", "FAIL")
	wantVerdict(t, rep, "5", "FAIL")
}

// A created event lost (a relay that skips a row) or listed twice (one
// that re-publishes without dedupe) fails invariant 6, and only it.
func TestLostOrDoubledEventFails(t *testing.T) {
	t.Parallel()
	for name, bugs := range map[string]fakeBugs{"lost": {loseEventNth: 5}, "doubled": {doubleEvent: true}} {
		rep := runFake(t, bugs, true, func(c *harness.Config) { c.DrainTimeout = 2 * time.Second })
		if rep.Pass {
			t.Errorf("%s event passed", name)
		}
		wantVerdict(t, rep, "6", "FAIL")
		for _, inv := range []string{"1", "2", "3a", "3b", "4", "5"} {
			wantVerdict(t, rep, inv, "PASS")
		}
	}
}

func TestLostAsyncOrderFails(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{async: true, asyncDelay: 100 * time.Millisecond, asyncLoseNth: 3}, false, nil)
	if rep.Pass {
		t.Fatal("lost accepted (202) order passed")
	}
	wantVerdict(t, rep, "3a", "FAIL")
}

func TestOrderPendingForeverFails(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{async: true, asyncDelay: 50 * time.Millisecond, asyncStuckNth: 4}, true, func(c *harness.Config) {
		c.DrainTimeout = 500 * time.Millisecond
	})
	if rep.Pass {
		t.Fatal("an accepted order that never left pending passed")
	}
	wantVerdict(t, rep, "3a", "FAIL")
	for _, s := range rep.Strategies {
		if s.Drain.StillPending != 1 || s.Drain.Persisted != 49 {
			t.Errorf("strategy %s: drain %+v, want 49 persisted and 1 still pending", s.Strategy, s.Drain)
		}
	}
}

func TestTwoOrdersForOneUserFails(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{doubleUser: true}, false, nil)
	if rep.Pass {
		t.Fatal("two orders for one user passed")
	}
	wantVerdict(t, rep, "2", "FAIL")
	rep = runFake(t, fakeBugs{doubleUser: true}, true, nil)
	wantVerdict(t, rep, "2", "FAIL")
}

func TestIgnoredIdempotencyKeyFails(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{ignoreKeys: true}, false, nil)
	if rep.Pass {
		t.Fatal("replays answered differently and passed")
	}
	wantVerdict(t, rep, "4", "FAIL")
}

func TestUnacknowledgedOrderFailsWithDB(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{phantomNth: 5}, true, nil)
	if rep.Pass {
		t.Fatal("order stored behind a 409 passed")
	}
	wantVerdict(t, rep, "3b", "FAIL")
	// Without the DB the harness says it cannot tell, rather than PASS.
	rep = runFake(t, fakeBugs{phantomNth: 5}, false, nil)
	wantVerdict(t, rep, "3b", "SKIP")
}

func TestCounterDriftFails(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{remainingLies: true}, false, nil)
	wantVerdict(t, rep, "5", "FAIL")
	rep = runFake(t, fakeBugs{soldDriftBy: -1}, false, nil)
	wantVerdict(t, rep, "5", "FAIL")
	wantVerdict(t, rep, "1", "FAIL")
}

// A request whose answer is lost (connection cut after the order was stored)
// is an unknown outcome: the client must see it (no hidden transport retry),
// its order is excused in 3b unless a replay recovers it, and the verdict
// stays PASS.
func TestUnknownOutcomeIsExcused(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{dropNth: 3}, true, nil)
	wantAllPass(t, rep)
	for _, s := range rep.Strategies {
		if s.Outcomes["transport_error"] == 0 {
			t.Errorf("strategy %s: the cut connection was not seen: %v", s.Strategy, s.Outcomes)
		}
	}
	wantAllPass(t, runFake(t, fakeBugs{dropNth: 3}, false, nil), "3b")
}

// The time cap stops new sends; what was sent is still verified.
func TestTimeCapStopsLoad(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fakeBugs{orderDelay: 5 * time.Millisecond}, true, func(c *harness.Config) {
		c.Concurrency = 2
		c.MaxDuration = 300 * time.Millisecond
		c.Users = 600
		c.Stock = 500
	})
	wantAllPass(t, rep)
	for _, s := range rep.Strategies {
		if s.Attempts == 0 || s.Attempts >= s.Planned {
			t.Errorf("strategy %s: %d of %d attempts sent under a 300ms cap", s.Strategy, s.Attempts, s.Planned)
		}
	}
}

// The command wires flags to the harness, writes its files and exits 1 on FAIL.
func TestCommandExitCodesAndFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := func(url, token string, extra ...string) []string {
		return append([]string{"-url", url, "-token", token, "-strategies", "lua,lock", "-stock", "20", "-n", "300", "-users", "100",
			"-c", "8", "-baseline", "100ms", "-seed", "7"}, extra...)
	}

	f, srv := newFake(t, fakeBugs{})
	hist, svg, js := filepath.Join(dir, "h.jsonl"), filepath.Join(dir, "r.svg"), filepath.Join(dir, "r.json")
	var out, errb bytes.Buffer
	if code := run(args(srv.URL, f.token, "-history", hist, "-report", svg, "-json", js), &out, &errb); code != 0 {
		t.Fatalf("correct fake: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "RESULT: PASS") {
		t.Errorf("no PASS line:\n%s", out.String())
	}
	if !strings.Contains(errb.String(), "attempts=") {
		t.Errorf("no progress line on stderr: %q", errb.String())
	}
	// History: one JSON line per sent request, two strategies.
	hf, err := os.Open(hist)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	n := 0
	sc := bufio.NewScanner(hf)
	for sc.Scan() {
		var r harness.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("history line %d: %v", n, err)
		}
		if r.User == "" || r.Key == "" || r.Start.IsZero() || r.End.Before(r.Start) || r.Outcome == "" {
			t.Fatalf("history line %d incomplete: %s", n, sc.Text())
		}
		n++
	}
	if n != 600 {
		t.Errorf("history has %d lines, want 600", n)
	}
	b, err := os.ReadFile(svg)
	if err != nil || !bytes.HasPrefix(b, []byte("<svg")) || !bytes.Contains(b, []byte("sold out")) {
		t.Errorf("svg report missing or without sell-out mark (%v)", err)
	}
	b, err = os.ReadFile(js)
	var rep harness.Report
	if err != nil || json.Unmarshal(b, &rep) != nil || !rep.Pass || len(rep.Strategies) != 2 {
		t.Errorf("json report unreadable or wrong (%v)", err)
	}

	bf, bsrv := newFake(t, fakeBugs{oversellBy: 1})
	out.Reset()
	if code := run(args(bsrv.URL, bf.token, "-q"), &out, &errb); code != 1 {
		t.Errorf("oversell fake: exit %d, want 1\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "RESULT: FAIL") {
		t.Errorf("no FAIL line:\n%s", out.String())
	}
	if code := run(args(srv.URL, "wrong-token", "-q"), &out, &errb); code != 1 {
		t.Errorf("bad token: exit %d, want 1", code)
	}
	if code := run([]string{"-url", "http://192.0.2.1:8080", "-token", "x", "-q"}, &out, &errb); code != 1 {
		t.Errorf("non-loopback URL: exit %d, want 1", code)
	}
}
