package app_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testenv"
)

// A Redis that may evict any key (allkeys-*) can drop a lua-async stream
// while the gate survives, losing queued 202s without a trace: the service
// refuses it at start. volatile-* evicts only keys with a TTL (markers,
// idempotency keys, locks, rate limits: answers degrade, nothing is lost)
// and a Redis that will not say (CONFIG refused, as on managed services)
// start with a warning; noeviction starts quietly.
func TestEvictingRedisIsRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		args     []string
		refused  bool
		warnings []string
	}{
		{"allkeys-lru", []string{"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"}, true, nil},
		{"allkeys-random without a memory limit yet", []string{"--maxmemory-policy", "allkeys-random"}, true, nil},
		{"volatile-lru", []string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"}, false, []string{"maxmemory-policy", "volatile-lru"}},
		{"CONFIG refused", []string{"--rename-command", "CONFIG", ""}, false, []string{"maxmemory-policy", "could not be read"}},
		{"noeviction", []string{"--maxmemory-policy", "noeviction"}, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := testenv.PrivateRedis(t, tc.args...)
			var logs testenv.SyncBuffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			cfg := app.Config{RedisURL: url, SQLitePath: filepath.Join(t.TempDir(), "seckill.db")}
			a, err := app.New(context.Background(), cfg, log)
			if err == nil {
				defer a.Close()
			}
			switch {
			case tc.refused && (err == nil || !strings.Contains(err.Error(), "maxmemory-policy")):
				t.Fatalf("start on a Redis with %v: got %v, want a refusal naming maxmemory-policy", tc.args, err)
			case !tc.refused && err != nil:
				t.Fatalf("start on a Redis with %v: %v", tc.args, err)
			}
			for _, w := range tc.warnings {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("start on a Redis with %v: log %q, want a warning mentioning %q", tc.args, logs.String(), w)
				}
			}
			if len(tc.warnings) == 0 && !tc.refused && strings.Contains(logs.String(), "maxmemory") {
				t.Errorf("start on a Redis with %v: unexpected warning %q", tc.args, logs.String())
			}
		})
	}
}

// A start that fails after the App is partly built releases what it opened
// and returns the error (it used to call Close on a nil *App and panic).
func TestStartFailureIsAnError(t *testing.T) {
	t.Parallel()
	cfg := app.Config{RedisURL: "redis://127.0.0.1:1/0", SQLitePath: filepath.Join(t.TempDir(), "seckill.db")}
	a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		_ = a.Close()
		t.Fatal("start with Redis on a closed port: got a running app, want an error")
	}
	if a != nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("start with Redis on a closed port: got %v, %v; want nil and an error saying Redis does not answer", a, err)
	}
}
