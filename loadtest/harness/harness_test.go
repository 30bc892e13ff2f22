package harness

import (
	"strings"
	"testing"
	"time"
)

func TestPlanMixesNewUsersRepeatsAndReplays(t *testing.T) {
	cfg, err := Config{Attempts: 10000, Users: 4000, RepeatShare: 0.2, RetryShare: 0.1, Concurrency: 8, Seed: 3, RunID: "r"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	recs := plan(cfg, 7, "lua", 1)
	users, keys := map[string]bool{}, map[string]int{}
	replays := 0
	for i, r := range recs {
		if r.Seq != i || r.ItemID != 7 || r.Strategy != "lua" {
			t.Fatalf("record %d: %+v", i, r)
		}
		users[r.User] = true
		keys[r.Key]++
		if r.ReplayOf >= 0 {
			replays++
			o := recs[r.ReplayOf]
			if r.ReplayOf >= i || o.ReplayOf >= 0 || o.User != r.User || o.Key != r.Key {
				t.Fatalf("replay %d of %d does not copy an earlier original: %+v vs %+v", i, r.ReplayOf, r, o)
			}
		}
	}
	if len(users) != 4000 {
		t.Errorf("%d distinct users, want the whole pool of 4000", len(users))
	}
	// Ids come in pairs that differ only in case, distinct users to the service.
	pairs := 0
	for u := range users {
		if up := strings.ToUpper(u); up != u && users[up] {
			pairs++
		}
	}
	if pairs != 2000 {
		t.Errorf("%d pairs of users differing only in case, want 2000", pairs)
	}
	if replays < 800 || replays > 1200 {
		t.Errorf("%d replays for a 10%% share of 10000", replays)
	}
	if len(keys) != len(recs)-replays {
		t.Errorf("%d distinct keys, want one per non-replay attempt (%d)", len(keys), len(recs)-replays)
	}
	again := plan(cfg, 7, "lua", 1)
	for i := range recs {
		if recs[i].User != again[i].User || recs[i].Key != again[i].Key || recs[i].ReplayOf != again[i].ReplayOf {
			t.Fatalf("plan is not deterministic for a seed at %d", i)
		}
	}
}

func TestPlanWithoutRepeatsHasOneAttemptPerUser(t *testing.T) {
	cfg, _ := Config{Attempts: 500, Users: 1000, Seed: 1, RunID: "r"}.withDefaults()
	users := map[string]bool{}
	for _, r := range plan(cfg, 1, "", 1) {
		if users[r.User] || r.ReplayOf >= 0 {
			t.Fatalf("user %s repeated or replayed with zero shares", r.User)
		}
		users[r.User] = true
	}
}

func TestLatencyStatsNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	s := latencyStats(d)
	if s.Count != 100 || s.P50 != 50*time.Millisecond || s.P90 != 90*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Errorf("got %+v", s)
	}
	if d[0] != 100*time.Millisecond {
		t.Error("latencyStats reordered its input")
	}
	if (latencyStats(nil) != LatencyStats{}) {
		t.Error("empty input")
	}
}

func TestOnlyLoopback(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:80", "http://127.0.0.2"} {
		if err := checkLoopback(u); err != nil {
			t.Errorf("%s refused: %v", u, err)
		}
	}
	for _, u := range []string{"http://10.0.0.1:8080", "http://example.com", "ftp://127.0.0.1", "http://0.0.0.0:8080"} {
		if err := checkLoopback(u); err == nil {
			t.Errorf("%s accepted", u)
		}
	}
}

func TestConfigRejectsBadShares(t *testing.T) {
	for _, c := range []Config{{RepeatShare: 0.7, RetryShare: 0.4}, {RetryShare: -0.1}, {Mode: "burst"}, {Users: -1}} {
		if _, err := c.withDefaults(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
