package app_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/app/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

// TestMetrics drives orders on both strategies, a rate-limit refusal and an
// unknown route, then scrapes /metrics: the series are there, and no label
// carries an item id, a user or a raw path.
func TestMetrics(t *testing.T) {
	t.Parallel()
	testenv.ForEach(t, func(t *testing.T, b testenv.Backend) {
		_, c := apptest.Start(t, b, func(cfg *app.Config) { cfg.RateUser = "1/m:2" })
		users := []string{"metrics-user-alpha", "metrics-user-bravo"}
		var ids []string
		for _, strategy := range []string{"lua", "lock"} {
			it := c.CreateItem(t, 1, strategy)
			ids = append(ids, strconv.FormatInt(it.ID, 10))
			for i, u := range users { // one sale, one sold out
				r, err := c.PlaceOrder(it.ID, u, "")
				if err != nil {
					t.Fatal(err)
				}
				if want := []int{201, 409}[i]; r.Status != want {
					t.Fatalf("%s order by %s: got %d %s, want %d", strategy, u, r.Status, r.Body, want)
				}
			}
			c.Must(t, "GET", "/api/v1/items/"+ids[len(ids)-1], nil, false, nil)
		}
		// users[1] has used its burst of 2: the third attempt is refused (on
		// an item that can still sell; sold-out items skip the limiter).
		open := c.CreateItem(t, 5, "lua")
		ids = append(ids, strconv.FormatInt(open.ID, 10))
		if r, _ := c.PlaceOrder(open.ID, users[1], ""); r.Status != http.StatusTooManyRequests {
			t.Fatalf("third order of a user with burst 2: got %d %s, want 429", r.Status, r.Body)
		}
		c.Must(t, "GET", "/no/such/route/"+users[0], nil, false, nil)

		r := c.Must(t, "GET", "/metrics", nil, false, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET /metrics: got %d, want 200", r.Status)
		}
		series := parseMetrics(t, string(r.Body))
		for _, want := range []string{
			`seckill_http_requests_total{method="POST",route="/api/v1/items/:id/orders",status="201"}`,
			`seckill_http_requests_total{method="POST",route="/api/v1/items/:id/orders",status="409"}`,
			`seckill_http_requests_total{method="POST",route="/api/v1/items/:id/orders",status="429"}`,
			`seckill_http_requests_total{method="GET",route="/api/v1/items/:id",status="200"}`,
			`seckill_http_requests_total{method="GET",route="unmatched",status="404"}`,
			`seckill_http_request_duration_seconds_count{method="POST",route="/api/v1/items/:id/orders"}`,
			`seckill_orders_total{code="created",strategy="lua"}`,
			`seckill_orders_total{code="sold_out",strategy="lua"}`,
			`seckill_orders_total{code="created",strategy="lock"}`,
			`seckill_orders_total{code="sold_out",strategy="lock"}`,
			`seckill_rate_limited_total{limit="user"}`,
			`seckill_lock_obtain_seconds_count{outcome="obtained"}`,
			`seckill_lock_wait_seconds_count`,
			`seckill_lock_hold_seconds_count`,
			`go_sql_max_open_connections{db_name="main"}`,
			`seckill_redis_pool_connections`,
			`seckill_redis_pool_hits_total`,
		} {
			if _, ok := series[want]; !ok {
				t.Errorf("/metrics has no series %s", want)
			}
		}
		// Each order route outcome above happened exactly so often.
		for s, want := range map[string]float64{
			`seckill_orders_total{code="created",strategy="lua"}`:                                      1,
			`seckill_orders_total{code="sold_out",strategy="lock"}`:                                    1,
			`seckill_rate_limited_total{limit="user"}`:                                                 1,
			`seckill_http_requests_total{method="POST",route="/api/v1/items/:id/orders",status="201"}`: 2,
		} {
			if got := series[s]; got != want {
				t.Errorf("%s: got %v, want %v", s, got, want)
			}
		}
		// No label value names a user, an item id or a raw path.
		for s := range series {
			for _, lv := range labelValues(s) {
				if lv.name == "le" || lv.name == "quantile" || lv.name == "version" {
					continue
				}
				for _, id := range ids {
					if lv.value == id || strings.Contains(lv.value, "/"+id) {
						t.Errorf("series %s has label %s=%q naming item %s", s, lv.name, lv.value, id)
					}
				}
				for _, u := range users {
					if strings.Contains(lv.value, u) {
						t.Errorf("series %s has label %s=%q naming user %s", s, lv.name, lv.value, u)
					}
				}
			}
		}
	})
}

// parseMetrics maps each sample line's series (name and labels, as printed)
// to its value.
func parseMetrics(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

type labelValue struct{ name, value string }

var labelPattern = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

func labelValues(series string) []labelValue {
	var out []labelValue
	for _, m := range labelPattern.FindAllStringSubmatch(series, -1) {
		out = append(out, labelValue{m[1], m[2]})
	}
	return out
}
