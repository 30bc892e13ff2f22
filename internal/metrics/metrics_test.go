package metrics_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/metrics"
)

// TestLabelsAreBounded: odd methods and statuses fold into bounded label
// values, and lock events never carry their key.
func TestLabelsAreBounded(t *testing.T) {
	m := metrics.New(func(error) string { return "sold_out" })
	m.Request("/x/:id", "BREW", 418, time.Millisecond)
	m.Request("", "GET", 404, time.Millisecond)
	m.Order("lua", errors.New("x"))
	m.Transition("lua", "expired")
	m.StockReturned("lock", true)
	m.StockReturned("lua", false)
	obs := m.LockObserver()
	obs.Obtained(lock.ObtainEvent{Key: "seckill:{item:4242}:lock", Latency: time.Millisecond})
	obs.LeaseLost(lock.LeaseEvent{Key: "seckill:{item:4242}:lock"})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`seckill_http_requests_total{method="other",route="/x/:id",status="418"} 1`,
		`seckill_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`seckill_orders_total{code="sold_out",strategy="lua"} 1`,
		`seckill_lock_obtain_seconds_count{outcome="obtained"} 1`,
		`seckill_lock_leases_lost_total 1`,
		`seckill_order_transitions_total{strategy="lua",to="expired"} 1`,
		`seckill_stock_returns_total{strategy="lock",via="sweeper"} 1`,
		`seckill_stock_returns_total{strategy="lua",via="cancellation"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Only label values are checked: a sample value (a heap size, say) may
	// well contain the digits 4242.
	for _, line := range strings.Split(body, "\n") {
		open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
		if strings.HasPrefix(line, "#") || open < 0 || end < open {
			continue
		}
		if labels := line[open:end]; strings.Contains(labels, "BREW") || strings.Contains(labels, "4242") {
			t.Errorf("a label carries a client method or a lock key: %s", line)
		}
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *metrics.Metrics
	m.Request("/", "GET", 200, time.Millisecond)
	m.Order("lua", nil)
	m.RateLimited("user")
	m.Transition("lua", "paid")
	m.StockReturned("lua", false)
	if m.LockObserver() != nil {
		t.Errorf("nil Metrics: got a lock observer, want nil")
	}
}
