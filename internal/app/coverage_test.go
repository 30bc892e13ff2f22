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

// With cluster-require-full-coverage yes (Redis's default) one failed
// master makes every master refuse every slot until its replica takes
// over: items on healthy masters answer 503 too. The service starts on
// such a cluster, with a warning that names the setting; with no, it
// starts quietly.
func TestFullCoverageClusterWarns(t *testing.T) {
	t.Parallel()
	for _, coverage := range []string{"yes", "no"} {
		t.Run("cluster-require-full-coverage "+coverage, func(t *testing.T) {
			cluster := testenv.StartCluster(t, 3, 0, "--cluster-require-full-coverage", coverage)
			var logs testenv.SyncBuffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			cfg := app.Config{RedisMode: app.RedisModeCluster, RedisURL: cluster.URL(), RateUser: "0",
				SQLitePath: filepath.Join(t.TempDir(), "seckill.db")}
			a, err := app.New(context.Background(), cfg, log)
			if err != nil {
				t.Fatalf("start on a cluster with cluster-require-full-coverage %s: %v", coverage, err)
			}
			defer a.Close()
			warned := strings.Count(logs.String(), "cluster-require-full-coverage is yes")
			if want := map[string]int{"yes": 3, "no": 0}[coverage]; warned != want {
				t.Errorf("cluster-require-full-coverage %s: %d warnings naming it, want %d (one per master): %q",
					coverage, warned, want, logs.String())
			}
		})
	}
}
