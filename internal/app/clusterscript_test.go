package app_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
)

// scripts/redis-cluster.sh, on ports and a dir of this test's own: start
// brings up 3 masters with cluster_state:ok and prints the URL that url
// prints; a second start just succeeds; a master that died rejoins on the
// next start; stop stops every node and removes its files; status then
// fails.
func TestRedisClusterScript(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			if testenv.InCI() {
				t.Fatalf("CI=true but %s is not installed", bin)
			}
			t.Skipf("%s not installed", bin)
		}
	}
	base := testenv.FreeClusterBase(t, 3)
	dir := filepath.Join(t.TempDir(), "cluster")
	run := func(args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{"../../scripts/redis-cluster.sh"}, args...)...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("SECKILL_CLUSTER_PORT_BASE=%d", base), "SECKILL_CLUSTER_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil && args[0] == "start" {
			// The script names a node's log; the test's dir is gone after it.
			for p := base + 1; p <= base+3; p++ {
				if b, rerr := os.ReadFile(filepath.Join(dir, fmt.Sprint(p), "redis.log")); rerr == nil {
					out = append(out, fmt.Sprintf("---- %d/redis.log ----\n%s", p, b)...)
				}
			}
		}
		return string(out), err
	}
	t.Cleanup(func() { _, _ = run("stop") })

	url, err := run("url")
	url = strings.TrimSpace(url)
	want := fmt.Sprintf("redis://127.0.0.1:%d?addr=127.0.0.1:%d&addr=127.0.0.1:%d", base+1, base+2, base+3)
	if err != nil || url != want {
		t.Fatalf("url: got %q %v, want %q", url, err, want)
	}
	if out, err := run("start"); err != nil || !strings.Contains(out, url) {
		t.Fatalf("start: %v\n%s", err, out)
	}
	if out, err := run("status"); err != nil || strings.Count(out, "cluster_state:ok") != 3 {
		t.Fatalf("status after start: %v\n%s", err, out)
	}
	if out, err := run("start"); err != nil || !strings.Contains(out, "already up") {
		t.Errorf("second start: %v\n%s; want success saying it is already up", err, out)
	}

	opt, err := redis.ParseClusterURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClusterClient(opt)
	ctx := context.Background()
	var masters atomic.Int32
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "server").Result()
		if err == nil && !strings.Contains(info, "redis_mode:cluster") {
			err = fmt.Errorf("%s is not in cluster mode", m.Options().Addr)
		}
		// A master down must stop only its own slots (docs/OPERATIONS.md).
		if err == nil {
			cov, cerr := m.ConfigGet(ctx, "cluster-require-full-coverage").Result()
			if err = cerr; err == nil && cov["cluster-require-full-coverage"] != "no" {
				err = fmt.Errorf("%s: cluster-require-full-coverage %q, want no", m.Options().Addr, cov["cluster-require-full-coverage"])
			}
		}
		masters.Add(1)
		return err
	})
	if err != nil || masters.Load() != 3 {
		t.Fatalf("masters: got %d, %v; want 3 in cluster mode", masters.Load(), err)
	}
	if err := rdb.Set(ctx, "{a}x", 1, 0).Err(); err != nil {
		t.Errorf("write through the cluster URL: %v", err)
	}
	_ = rdb.Close() // before a node goes: it would log its redials

	// A master dies (its data with it); the next start brings it back.
	lost := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", base+2), MaxRetries: -1})
	_ = lost.Shutdown(ctx).Err() // answers with the connection closing
	_ = lost.Close()
	if out, err := run("start"); err != nil {
		t.Fatalf("start with a master down: %v\n%s", err, out)
	}
	if out, err := run("status"); err != nil || strings.Count(out, "cluster_state:ok") != 3 {
		t.Errorf("status after the restart of a master: %v\n%s", err, out)
	}

	if out, err := run("stop"); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	if out, err := run("status"); err == nil {
		t.Errorf("status after stop: succeeded\n%s; want a failure", out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s after stop: %v, want it removed", dir, err)
	}
}
