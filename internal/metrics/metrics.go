// Package metrics exposes the service's Prometheus metrics. It owns its own
// registry (no global state) and adapts each source to it: HTTP requests,
// order outcomes, the lock library's Observer, rate-limit rejections and the
// database and Redis connection pools.
//
// No label takes a value per user or per item: routes are gin's route
// patterns, and the rest are small closed sets.
package metrics

import (
	"database/sql"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
	"github.com/seckill/seckill/internal/stock"
)

const namespace = "seckill"

// Metrics records the service's measurements. A nil *Metrics records nothing.
type Metrics struct {
	reg *prometheus.Registry

	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	orders      *prometheus.CounterVec
	rateLimited *prometheus.CounterVec
	rateOpen    *prometheus.CounterVec
	transitions *prometheus.CounterVec
	returns     *prometheus.CounterVec
	webhooks    *prometheus.CounterVec

	lockObtain    *prometheus.HistogramVec
	lockWait      prometheus.Histogram
	lockHold      prometheus.Histogram
	lockRefresh   *prometheus.CounterVec
	lockLeaseLost prometheus.Counter

	async  asyncMetrics
	room   roomMetrics
	outbox outboxMetrics

	// code names an error by its API code, so order outcomes use the
	// handler's one error table.
	code func(error) string
}

// latencyBuckets span a cached rejection (tens of µs) to the request bound.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// New builds the metrics on a fresh registry, with Go runtime and process
// collectors. code names an order error by its API code ("" for success is
// never asked); nil names every error "error".
func New(code func(error) string) *Metrics {
	if code == nil {
		code = func(error) string { return "error" }
	}
	m := &Metrics{reg: prometheus.NewRegistry(), code: code}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "http_requests_total",
		Help: "HTTP requests by route pattern, method and status.",
	}, []string{"route", "method", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "http_request_duration_seconds",
		Help: "HTTP request latency by route pattern and method.", Buckets: latencyBuckets,
	}, []string{"route", "method"})
	m.orders = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "orders_total",
		Help: "Order attempts that reached a strategy or the sold-out memo, by strategy and outcome code (created, sold_out, ...).",
	}, []string{"strategy", "code"})
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "rate_limited_total",
		Help: "Requests refused by a rate limit, by limit (user or ip).",
	}, []string{"limit"})
	m.rateOpen = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "rate_limit_failed_open_total",
		Help: "Requests a rate limit admitted unchecked because Redis did not answer (the limits fail open), by limit (user or ip).",
	}, []string{"limit"})
	m.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "order_transitions_total",
		Help: "Orders moved out of created by this instance, by strategy and new state (paid, cancelled, expired).",
	}, []string{"strategy", "to"})
	m.returns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "stock_returns_total",
		Help: "Units of cancelled or expired orders recorded back in stock, by strategy and by whom (cancellation, or sweeper when it finished a return left undone).",
	}, []string{"strategy", "via"})
	m.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "payment_webhooks_total",
		Help: "Payment provider webhook events by outcome: paid, refund_due, rejected (recorded, the order untouched), duplicate (a redelivery), ignored (another event type), signature_invalid, invalid, pending (a lua-async order not written yet) and error (not recorded: the provider retries).",
	}, []string{"outcome"})
	m.lockObtain = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "lock_obtain_seconds",
		Help: "Duration of lock Obtain calls by outcome (obtained, not_obtained).", Buckets: latencyBuckets,
	}, []string{"outcome"})
	m.lockWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "lock_wait_seconds",
		Help: "Time an Obtain call spent waiting for the lock.", Buckets: latencyBuckets,
	})
	m.lockHold = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "lock_hold_seconds",
		Help: "Time a lock was held, from acquire to release.", Buckets: latencyBuckets,
	})
	m.lockRefresh = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "lock_refresh_failures_total",
		Help: "Failed lock refreshes, by source (watchdog or call).",
	}, []string{"source"})
	m.lockLeaseLost = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "lock_leases_lost_total",
		Help: "Locks whose lease was lost before release.",
	})
	m.reg.MustRegister(m.requests, m.latency, m.orders, m.rateLimited, m.rateOpen, m.transitions, m.returns, m.webhooks,
		m.lockObtain, m.lockWait, m.lockHold, m.lockRefresh, m.lockLeaseLost,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.async = newAsyncMetrics(m.reg)
	m.room = newRoomMetrics(m.reg)
	m.outbox = newOutboxMetrics(m.reg)
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is where the metrics live, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// WatchDB adds the database pool's statistics (sql.DBStats).
func (m *Metrics) WatchDB(db *sql.DB) {
	if m != nil && db != nil {
		m.reg.MustRegister(collectors.NewDBStatsCollector(db, "main"))
	}
}

// WatchRedis adds the Redis pool's statistics (go-redis PoolStats).
func (m *Metrics) WatchRedis(p Pooler) {
	if m != nil && p != nil {
		m.reg.MustRegister(newRedisPoolCollector(p))
	}
}

// Request records one HTTP request. route is the route pattern ("" for no
// route, recorded as "unmatched").
func (m *Metrics) Request(route, method string, status int, d time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	method = methodLabel(method)
	m.requests.WithLabelValues(route, method, statusLabel(status)).Inc()
	m.latency.WithLabelValues(route, method).Observe(d.Seconds())
}

// Order records the outcome of an order on a strategy; err nil is "created".
func (m *Metrics) Order(strategy stock.StrategyName, err error) {
	if m == nil {
		return
	}
	code := "created"
	if err != nil {
		code = m.code(err)
	}
	m.orders.WithLabelValues(string(strategy), code).Inc()
}

// Transition records an order moved to paid, cancelled or expired on an
// item of strategy (shop.LifecycleObserver).
func (m *Metrics) Transition(strategy stock.StrategyName, to string) {
	if m != nil {
		m.transitions.WithLabelValues(string(strategy), to).Inc()
	}
}

// StockReturned records a cancelled order's unit back in stock; retried
// means the sweeper finished it (shop.LifecycleObserver).
func (m *Metrics) StockReturned(strategy stock.StrategyName, retried bool) {
	if m == nil {
		return
	}
	via := "cancellation"
	if retried {
		via = "sweeper"
	}
	m.returns.WithLabelValues(string(strategy), via).Inc()
}

// PaymentWebhook records one payment webhook event's outcome.
func (m *Metrics) PaymentWebhook(outcome string) {
	if m != nil {
		m.webhooks.WithLabelValues(outcome).Inc()
	}
}

// RateLimited records a refusal by the named limit ("user" or "ip").
func (m *Metrics) RateLimited(limit string) {
	if m != nil {
		m.rateLimited.WithLabelValues(limit).Inc()
	}
}

// RateLimitFailedOpen records a request the named limit ("user" or "ip")
// admitted unchecked because Redis did not answer.
func (m *Metrics) RateLimitFailedOpen(limit string) {
	if m != nil {
		m.rateOpen.WithLabelValues(limit).Inc()
	}
}

// LockObserver feeds lock events into the metrics; nil when m is nil.
func (m *Metrics) LockObserver() lock.Observer {
	if m == nil {
		return nil
	}
	return lockObserver{m}
}

// lockObserver implements lock.Observer. It ignores keys: they name items.
type lockObserver struct{ m *Metrics }

var _ lock.Observer = lockObserver{}

func (o lockObserver) Obtained(e lock.ObtainEvent) {
	outcome := "obtained"
	if e.Err != nil {
		outcome = "not_obtained"
	}
	o.m.lockObtain.WithLabelValues(outcome).Observe(e.Latency.Seconds())
	o.m.lockWait.Observe(e.Waited.Seconds())
}

func (o lockObserver) Released(e lock.ReleaseEvent) { o.m.lockHold.Observe(e.Held.Seconds()) }

func (o lockObserver) RefreshFailed(e lock.RefreshEvent) {
	source := "call"
	if e.Watchdog {
		source = "watchdog"
	}
	o.m.lockRefresh.WithLabelValues(source).Inc()
}

func (o lockObserver) LeaseLost(lock.LeaseEvent) { o.m.lockLeaseLost.Inc() }

// methodLabel bounds the method label: a client can send any token as a
// method, and each would otherwise become a series.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// statusLabel avoids an allocation for the common statuses.
func statusLabel(s int) string {
	switch s {
	case 200:
		return "200"
	case 201:
		return "201"
	case 202:
		return "202"
	case 400:
		return "400"
	case 404:
		return "404"
	case 409:
		return "409"
	case 429:
		return "429"
	case 503:
		return "503"
	}
	return strconv.Itoa(s)
}

// Pooler is the part of a go-redis client that reports pool statistics.
type Pooler interface {
	PoolStats() *redis.PoolStats
}

var _ Pooler = (redis.UniversalClient)(nil)

// redisPoolCollector reads PoolStats at scrape time.
type redisPoolCollector struct {
	p                                          Pooler
	hits, misses, timeouts, total, idle, stale *prometheus.Desc
}

func newRedisPoolCollector(p Pooler) *redisPoolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "redis_pool", name), help, nil, nil)
	}
	return &redisPoolCollector{p: p,
		hits:     d("hits_total", "Times a free connection was found in the pool."),
		misses:   d("misses_total", "Times a free connection was not found in the pool."),
		timeouts: d("timeouts_total", "Times a wait for a connection timed out."),
		total:    d("connections", "Connections in the pool."),
		idle:     d("idle_connections", "Idle connections in the pool."),
		stale:    d("stale_connections_total", "Stale connections removed from the pool."),
	}
}

func (c *redisPoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hits
	ch <- c.misses
	ch <- c.timeouts
	ch <- c.total
	ch <- c.idle
	ch <- c.stale
}

func (c *redisPoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.PoolStats()
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(s.Misses))
	ch <- prometheus.MustNewConstMetric(c.timeouts, prometheus.CounterValue, float64(s.Timeouts))
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.TotalConns))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.IdleConns))
	ch <- prometheus.MustNewConstMetric(c.stale, prometheus.CounterValue, float64(s.StaleConns))
}

// PaymentWebhookCounter is the counter of one webhook outcome (tests).
func (m *Metrics) PaymentWebhookCounter(outcome string) prometheus.Counter {
	return m.webhooks.WithLabelValues(outcome)
}
