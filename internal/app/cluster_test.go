package app_test

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/stock/queue"
	"github.com/seckill/seckill/internal/testenv"
)

// SECKILL_REDIS_MODE is single or cluster; cluster needs a cluster URL of
// a real Redis, and each mistake says what to do.
func TestRedisModeIsValidated(t *testing.T) {
	t.Parallel()
	const clusterURL = "redis://127.0.0.1:7001?addr=127.0.0.1:7002&addr=127.0.0.1:7003"
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr []string // empty: valid
	}{
		{"single by default", nil, nil, nil},
		{"cluster with a cluster URL", map[string]string{"SECKILL_REDIS_MODE": "cluster", "SECKILL_REDIS_URL": clusterURL}, nil, nil},
		{"flag mirror", map[string]string{"SECKILL_REDIS_URL": clusterURL}, []string{"-redis-mode", "cluster"}, nil},
		{"cluster needs a URL, not the embedded Redis", map[string]string{"SECKILL_REDIS_MODE": "cluster"}, nil,
			[]string{"SECKILL_REDIS_MODE=cluster needs SECKILL_REDIS_URL"}},
		{"unknown mode", map[string]string{"SECKILL_REDIS_MODE": "sentinel"}, nil, []string{`SECKILL_REDIS_MODE="sentinel": want single or cluster`}},
		{"cluster URL without scheme", map[string]string{"SECKILL_REDIS_MODE": "cluster", "SECKILL_REDIS_URL": "127.0.0.1:7001"}, nil,
			[]string{`SECKILL_REDIS_URL="127.0.0.1:7001"`, "addr="}},
		{"cluster URL with a bad addr", map[string]string{"SECKILL_REDIS_MODE": "cluster", "SECKILL_REDIS_URL": "redis://127.0.0.1:7001?addr=nowhere"}, nil,
			[]string{"SECKILL_REDIS_URL", "nowhere"}},
		{"cluster URL with an unknown option", map[string]string{"SECKILL_REDIS_MODE": "cluster", "SECKILL_REDIS_URL": "redis://127.0.0.1:7001?adr=127.0.0.1:7002"}, nil,
			[]string{"SECKILL_REDIS_URL", "adr"}},
		{"a cluster has database 0 only", map[string]string{"SECKILL_REDIS_MODE": "cluster", "SECKILL_REDIS_URL": "redis://127.0.0.1:7001/3"}, nil,
			[]string{"database 0 only"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("seckill", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cfg, err := app.ParseConfig(fs, tc.args, env(tc.env))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("env %v args %v: got %v, want valid", tc.env, tc.args, err)
				}
				if tc.name != "single by default" && cfg.RedisMode != app.RedisModeCluster {
					t.Errorf("RedisMode: got %q, want cluster", cfg.RedisMode)
				}
				if tc.name == "single by default" && cfg.RedisMode != app.DefaultRedisMode {
					t.Errorf("RedisMode: got %q, want the default %q", cfg.RedisMode, app.DefaultRedisMode)
				}
				return
			}
			if err == nil {
				t.Fatalf("env %v args %v: got valid, want an error mentioning %q", tc.env, tc.args, tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("env %v: got %q, want it to mention %q", tc.env, err, w)
				}
			}
		})
	}
}

// The wrong mode for the Redis at hand is refused at start, saying which
// mode to use: a single-mode client on a Cluster node would answer MOVED
// (503) for most items, and a Cluster client cannot use a single Redis.
func TestRedisModeMustMatchTheServer(t *testing.T) {
	t.Parallel()
	cl := testenv.Cluster(t)
	single := testenv.Real(t)
	firstNode := strings.SplitN(strings.TrimPrefix(cl.RedisURL, "redis://"), "?", 2)[0]
	cases := []struct {
		name, mode, url, want string
	}{
		{"single mode on a cluster node", "", "redis://" + firstNode + "/0", "SECKILL_REDIS_MODE=cluster"},
		{"single mode with a cluster URL", "", cl.RedisURL, "SECKILL_REDIS_MODE=cluster"},
		{"cluster mode on a single Redis", app.RedisModeCluster, single.RedisURL, "SECKILL_REDIS_MODE=single"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := app.Config{RedisMode: tc.mode, RedisURL: tc.url, SQLitePath: filepath.Join(t.TempDir(), "seckill.db")}
			a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				_ = a.Close()
				t.Fatalf("start with mode %q on %s: got a running app, want a refusal", tc.mode, tc.url)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("start with mode %q on %s: got %q, want it to say %q", tc.mode, tc.url, err, tc.want)
			}
		})
	}
}

// On a Cluster every master is checked at start: one master that may evict
// any key is refused (it could drop the lua-async streams of its slots),
// named in the error.
func TestClusterRefusesAnEvictingMaster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3, 0)
	bad := c.Nodes[2]
	setConfig(t, bad.Addr(), "maxmemory-policy", "allkeys-lru")
	cfg := app.Config{RedisMode: app.RedisModeCluster, RedisURL: c.URL(), SQLitePath: filepath.Join(t.TempDir(), "seckill.db")}
	a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		_ = a.Close()
		t.Fatal("start on a cluster with an allkeys-lru master: got a running app, want a refusal")
	}
	if !strings.Contains(err.Error(), "maxmemory-policy") || !strings.Contains(err.Error(), bad.Addr()) {
		t.Errorf("start on a cluster whose master %s is allkeys-lru: got %q, want a refusal naming it and maxmemory-policy", bad.Addr(), err)
	}

	setConfig(t, bad.Addr(), "maxmemory-policy", "noeviction")
	a, err = app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start on the same cluster, all noeviction: %v", err)
	}
	defer a.Close()
	if got := strings.Join(a.Backends(), "; "); !strings.Contains(got, "redis cluster, 3 masters") {
		t.Errorf("backends: got %q, want it to name the cluster's 3 masters", got)
	}
}

// SECKILL_ASYNC_DURABILITY=fsync needs every master to fsync every write:
// one that does not is named at start, for the service and the worker.
func TestClusterFsyncChecksEveryMaster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3, 0, "--appendonly", "yes", "--appendfsync", "always")
	real := testenv.Real(t) // the worker's database
	bad := c.Nodes[1]
	setConfig(t, bad.Addr(), "appendfsync", "everysec")
	cfg := app.Config{RedisMode: app.RedisModeCluster, RedisURL: c.URL(), SQLitePath: filepath.Join(t.TempDir(), "seckill.db"),
		AsyncDurability: queue.DurabilityFsync}
	a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		_ = a.Close()
		t.Fatal("fsync durability on a cluster with an everysec master: got a running app, want a refusal")
	}
	if !strings.Contains(err.Error(), "appendfsync") || !strings.Contains(err.Error(), bad.Addr()) {
		t.Errorf("start: got %q, want a refusal naming %s and appendfsync", err, bad.Addr())
	}
	wcfg := cfg
	wcfg.MySQLDSN, wcfg.AdminToken, wcfg.KeyPrefix = real.MySQLDSN, apptest.Token, real.KeyPrefix
	if _, closeAll, err := app.StartWorker(context.Background(), wcfg, slog.New(slog.DiscardHandler), io.Discard); err == nil {
		closeAll()
		t.Error("worker with fsync durability on a cluster with an everysec master: started, want a refusal")
	} else if !strings.Contains(err.Error(), bad.Addr()) {
		t.Errorf("worker: got %q, want a refusal naming %s", err, bad.Addr())
	}

	setConfig(t, bad.Addr(), "appendfsync", "always")
	a, err = app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start on the same cluster, every master fsyncing: %v", err)
	}
	_ = a.Close()
}

// /readyz pings every master: with one master down, the items of its
// slots cannot sell, so the instance is not ready; back, it is.
func TestClusterReadyzSeesEveryMaster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3, 0)
	real := testenv.Real(t)
	b := testenv.Backend{Name: "private-cluster", RedisURL: c.URL(), RedisMode: testenv.ModeCluster,
		MySQLDSN: real.MySQLDSN, KeyPrefix: real.KeyPrefix}
	// The answer is cached for a test-sized 100 ms (a second by default),
	// so the checks below, each past the cache, need not be seconds apart.
	const readyzTTL = 100 * time.Millisecond
	_, cl := apptest.Start(t, b, func(cfg *app.Config) {
		cfg.RedisTimeout = 500 * time.Millisecond
		cfg.ReadyzTTL = readyzTTL
	})
	if got := awaitReadyz(t, cl, http.StatusOK); got != http.StatusOK {
		t.Fatalf("readyz on a whole cluster: got %d, want 200", got)
	}
	for _, i := range []int{0, 2} { // a seed node of the URL and another
		node := c.Nodes[i]
		node.Kill()
		if got := awaitReadyz(t, cl, http.StatusServiceUnavailable); got != http.StatusServiceUnavailable {
			t.Errorf("readyz with master %s down: got %d, want 503", node.Addr(), got)
		}
		// Every check, not by chance: a PING of one node at random would
		// pass two checks in three.
		for range 4 {
			time.Sleep(readyzTTL + 100*time.Millisecond) // past the cached answer
			if r := cl.Must(t, "GET", "/readyz", nil, false, nil); r.Status != http.StatusServiceUnavailable {
				t.Errorf("readyz with master %s down: got %d %s, want 503 on every check", node.Addr(), r.Status, r.Body)
			}
		}
		node.Start()
		c.AwaitOK(15 * time.Second)
		if got := awaitReadyzFor(t, cl, http.StatusOK, 10*time.Second); got != http.StatusOK {
			t.Errorf("readyz with master %s back: got %d, want 200", node.Addr(), got)
		}
	}
}

// awaitReadyzFor is awaitReadyz with a longer wait, for a cluster whose
// client must first learn that a node is back.
func awaitReadyzFor(t *testing.T, c *apptest.Client, want int, d time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r := c.Must(t, "GET", "/readyz", nil, false, nil)
		if r.Status == want || time.Now().After(deadline) {
			return r.Status
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setConfig sets one setting of one private node.
func setConfig(t *testing.T, addr, key, value string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.ConfigSet(context.Background(), key, value).Err(); err != nil {
		t.Fatalf("CONFIG SET %s %s on %s: %v", key, value, addr, err)
	}
}

// `seckill worker` takes the same Redis settings: a worker on the cluster
// writes the lua-async orders of a service that runs no writers.
func TestWorkerOnCluster(t *testing.T) {
	t.Parallel()
	b := testenv.Cluster(t)
	_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.Writers = queue.NoWriters })
	cfg := app.Config{RedisMode: b.RedisMode, RedisURL: b.RedisURL, MySQLDSN: b.MySQLDSN, KeyPrefix: b.KeyPrefix,
		AdminToken: apptest.Token, Writers: 2}
	var out testenv.SyncBuffer
	_, closeAll, err := app.StartWorker(context.Background(), cfg, slog.New(slog.DiscardHandler), &out)
	if err != nil {
		t.Fatalf("worker on the cluster: %v", err)
	}
	defer closeAll()
	if !strings.Contains(out.String(), "redis cluster, 3 masters") {
		t.Errorf("worker banner: got %q, want it to name the cluster's masters", out.String())
	}
	var ids []string
	for _, strategy := range []string{"lua-async", "lua-async"} { // two items: streams on two slots at least sometimes
		it := c.CreateItem(t, 5, strategy)
		for i := range 3 {
			r, err := c.PlaceOrder(it.ID, "worker-user-"+strconv.Itoa(i), "")
			if err != nil || r.Status != http.StatusAccepted {
				t.Fatalf("order: %v %d %s, want 202", err, r.Status, r.Body)
			}
			var o apptest.Order
			r.JSON(t, &o)
			ids = append(ids, o.ID)
		}
	}
	for _, id := range ids {
		if o := c.AwaitOrder(t, id, 20*time.Second); o.Status != "created" {
			t.Errorf("order %s: status %q after 20s, want created (written by the worker)", id, o.Status)
		}
	}
}
