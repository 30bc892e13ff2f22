package app_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// The admin endpoint and `seckill reconcile` report drift, repair it, and
// refuse bad input; on a single Redis and on a Redis Cluster.
func TestReconcileOverHTTPAndCLI(t *testing.T) {
	t.Parallel()
	t.Run("mariadb", func(t *testing.T) { reconcileOverHTTPAndCLI(t, testenv.Real(t)) })
	t.Run("cluster", func(t *testing.T) { reconcileOverHTTPAndCLI(t, testenv.Cluster(t)) })
}

func reconcileOverHTTPAndCLI(t *testing.T, b testenv.Backend) {
	_, c := apptest.Start(t, b)
	it := c.CreateItem(t, 10, "lua-async")
	if r, err := c.PlaceOrder(it.ID, "alice", ""); err != nil || r.Status != http.StatusAccepted {
		t.Fatalf("order: %v %d %s", err, r.Status, r.Body)
	}
	path := "/api/v1/admin/items/" + itoa(it.ID) + "/reconcile"
	type report struct {
		Drift    []string `json:"drift"`
		Repaired bool     `json:"repaired"`
		Redis    struct {
			Taken int64 `json:"taken"`
		} `json:"redis"`
	}
	var rep report
	r := c.Must(t, "POST", path+"?dry_run=true", nil, true, nil)
	r.JSON(t, &rep)
	if r.Status != http.StatusOK || len(rep.Drift) != 0 {
		t.Fatalf("clean item: got %d %s, want 200 and no drift", r.Status, r.Body)
	}
	if r := c.Must(t, "POST", path+"?dry_run=maybe", nil, true, nil); r.Status != http.StatusBadRequest {
		t.Errorf("dry_run=maybe: got %d, want 400", r.Status)
	}
	if r := c.Must(t, "POST", path, nil, false, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("without the admin token: got %d, want 401", r.Status)
	}

	rdb := b.Universal(t)
	meta := b.KeyPrefix + ":{item:" + itoa(it.ID) + "}:meta"
	damage := func() {
		if err := rdb.HSet(context.Background(), meta, "taken", 9).Err(); err != nil {
			t.Fatal(err)
		}
	}
	damage()
	cli := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := app.Main(append([]string{"reconcile", "-item", itoa(it.ID)}, args...), env(map[string]string{
			"SECKILL_REDIS_URL": b.RedisURL, "SECKILL_REDIS_MODE": b.RedisMode, "SECKILL_MYSQL_DSN": b.MySQLDSN, "SECKILL_KEY_PREFIX": b.KeyPrefix,
			"SECKILL_ADMIN_TOKEN": apptest.Token, "SECKILL_LOG_LEVEL": "error"}), &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := cli("-dry-run"); code != 1 || !strings.Contains(out, "drift: gate has taken 9 units, expected 1") || !strings.Contains(out, "not repaired (dry run)") {
		t.Errorf("seckill reconcile -dry-run on a damaged gate: exit %d\n%s\nwant exit 1 naming the drift", code, out)
	}
	if code, out := cli(); code != 0 || !strings.Contains(out, "repaired: gate rewritten from the database") {
		t.Errorf("seckill reconcile: exit %d\n%s\nwant exit 0 and a repair", code, out)
	}
	if code, out := cli(); code != 0 || !strings.Contains(out, "ok: Redis agrees with the database") {
		t.Errorf("seckill reconcile after the repair: exit %d\n%s", code, out)
	}

	damage()
	r = c.Must(t, "POST", path, nil, true, nil)
	rep = report{}
	r.JSON(t, &rep)
	if r.Status != http.StatusOK || !rep.Repaired || rep.Redis.Taken != 9 {
		t.Errorf("POST reconcile on a damaged gate: got %d %s, want 200, repaired, taken 9 as found", r.Status, r.Body)
	}
	if taken, _ := rdb.HGet(context.Background(), meta, "taken").Int64(); taken != 1 {
		t.Errorf("taken after the repair: got %d, want 1", taken)
	}
	if code, out := (func() (int, string) {
		var out bytes.Buffer
		code := app.Main([]string{"reconcile"}, env(nil), &out, &out)
		return code, out.String()
	})(); code != 2 || !strings.Contains(out, "needs SECKILL_REDIS_URL") {
		t.Errorf("seckill reconcile on the embedded Redis: exit %d %s, want 2", code, out)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
