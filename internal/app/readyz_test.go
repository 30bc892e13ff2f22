package app_test

import (
	"flag"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// /readyz is public: a flood of it must not cost a Redis round trip per call
// (a PING, and a pipeline per lua-async item). The embedded Redis counts
// the commands it serves: 100 concurrent calls must cost about one check
// (six commands for one lua-async item), not a hundred (600).
func TestReadyzFloodCostsOneCheck(t *testing.T) {
	t.Parallel()
	b := testenv.Embedded(t)
	_, c := apptest.Start(t, b)
	c.CreateItem(t, 10, "lua-async")
	if r := c.Must(t, "GET", "/readyz", nil, false, nil); r.Status != http.StatusOK {
		t.Fatalf("readyz: got %d %s, want 200", r.Status, r.Body)
	}

	const calls = 100
	before := b.Mini.CommandCount()
	var wg sync.WaitGroup
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.Do("GET", "/readyz", nil, false, nil)
			if err != nil || r.Status != http.StatusOK {
				t.Errorf("readyz: got %d %s %v, want 200", r.Status, r.Body, err)
			}
		}()
	}
	wg.Wait()
	// The writers and the claimer poll Redis meanwhile: allow for them,
	// far below what a check per call costs.
	n := b.Mini.CommandCount() - before
	t.Logf("%d concurrent /readyz: %d Redis commands", calls, n)
	if n > 100 {
		t.Errorf("%d concurrent /readyz cost %d Redis commands, want at most a few checks' worth (<= 100)", calls, n)
	}
}

// awaitReadyz reads /readyz until it answers want, for as long as a cached
// answer may live (a second) and some slack, and returns the last status.
func awaitReadyz(t *testing.T, c *apptest.Client, want int) int {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		r := c.Must(t, "GET", "/readyz", nil, false, nil)
		if r.Status == want || time.Now().After(deadline) {
			return r.Status
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SECKILL_READYZ_TTL: a duration up to a minute; unset, 0 (the default
// TTL, a second); a negative or longer one is refused.
func TestReadyzTTLSetting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		env     map[string]string
		want    time.Duration
		wantErr string
	}{
		{"default", nil, 0, ""},
		{"set", map[string]string{"SECKILL_READYZ_TTL": "250ms"}, 250 * time.Millisecond, ""},
		{"negative", map[string]string{"SECKILL_READYZ_TTL": "-1s"}, 0, "SECKILL_READYZ_TTL=-1s: must be from 0 (the default, 1s) to 1m0s"},
		{"too long", map[string]string{"SECKILL_READYZ_TTL": "2m"}, 0, "SECKILL_READYZ_TTL=2m0s: must be from 0 (the default, 1s) to 1m0s"},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, err := app.ParseConfig(fs, nil, env(tc.env))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: got error %v, want it to mention %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || cfg.ReadyzTTL != tc.want {
			t.Errorf("%s: got %s, %v; want %s", tc.name, cfg.ReadyzTTL, err, tc.want)
		}
	}
}
