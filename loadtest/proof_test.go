package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/stock"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/loadtest/harness"
)

// proofStrategies is every strategy the service offers.
var proofStrategies = func() []string {
	names := make([]string, len(stock.Strategies))
	for i, n := range stock.Strategies {
		names[i] = string(n)
	}
	return names
}()

// TestProof runs the harness against the real service, started in-process
// with app.New, on the embedded backends and on MariaDB+Redis (testenv: a
// fresh database and key prefix; under CI=true a missing service fails),
// for every strategy, and requires every invariant to PASS, including the
// DB-side ones.
func TestProof(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("proof runs thousands of requests; skipped with -short")
	}
	// The backends side by side, each with its own database and key prefix.
	testenv.ForEachParallel(t, func(t *testing.T, b testenv.Backend) { // each its own database and key prefix
		const token = "loadtest-proof-token-0123456789"
		a, err := app.New(context.Background(), app.Config{RedisURL: b.RedisURL, MySQLDSN: b.MySQLDSN,
			SQLitePath: b.SQLitePath, KeyPrefix: b.KeyPrefix, AdminToken: token},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatalf("app.New on %s: %v", b.Name, err)
		}
		srv := httptest.NewServer(a.Handler())
		t.Cleanup(func() {
			srv.Close()
			_ = a.Close()
		})
		var store *harness.SQLStore
		if b.MySQLDSN != "" {
			store, err = harness.OpenMySQL(b.MySQLDSN)
		} else {
			store, err = harness.OpenSQLite(b.SQLitePath)
		}
		if err != nil {
			t.Fatalf("open %s database: %v", b.Name, err)
		}
		t.Cleanup(func() { store.Close() })

		cfg := harness.Config{
			BaseURL:          srv.URL,
			AdminToken:       token,
			Strategies:       proofStrategies,
			Stock:            100,
			Attempts:         900, // four buyers a unit; the app's proofs send the big stampedes
			Users:            400,
			RepeatShare:      0.15,
			RetryShare:       0.05,
			Concurrency:      64,
			MaxDuration:      20 * time.Second,
			DrainTimeout:     10 * time.Second,
			BaselineDuration: 200 * time.Millisecond,
			Store:            store,
		}
		rep, err := harness.Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		var buf bytes.Buffer
		rep.WriteText(&buf)
		t.Log("\n" + buf.String())
		if len(rep.Strategies) != len(proofStrategies) {
			t.Fatalf("%d strategies ran, want %d", len(rep.Strategies), len(proofStrategies))
		}
		for _, s := range rep.Strategies {
			if s.Attempts != cfg.Attempts {
				t.Errorf("%s: %d of %d attempts sent", s.Strategy, s.Attempts, cfg.Attempts)
			}
			if s.Final.Sold != cfg.Stock {
				t.Errorf("%s: sold %d, want the whole stock %d (%d users for 100 units)", s.Strategy, s.Final.Sold, cfg.Stock, cfg.Users)
			}
			if !s.DBChecked {
				t.Errorf("%s: DB-side checks did not run", s.Strategy)
			}
			for _, inv := range s.Invariants {
				if inv.Verdict() != "PASS" {
					t.Errorf("%s on %s: %s %s: %s", s.Strategy, b.Name, inv.Verdict(), inv.Name, inv.Detail)
				}
			}
		}
		if !rep.Pass {
			t.Errorf("harness verdict FAIL on %s", b.Name)
		}
	})
}

// The command's -embedded mode starts the whole service with nothing installed.
func TestCommandEmbedded(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts the service; skipped with -short")
	}
	var out, errb bytes.Buffer
	code := run([]string{"-embedded", "-stock", "30", "-n", "300", "-users", "120", "-c", "8", "-retry", "0", "-baseline", "100ms", "-q"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"RESULT: PASS", "== strategy lua", "== strategy lock", "== strategy lua-async", "PASS  3b"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
