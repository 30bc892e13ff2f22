package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// asyncMetrics measure the lua-async writers.
type asyncMetrics struct {
	persisted     *prometheus.CounterVec
	batch         prometheus.Histogram
	deadLettered  prometheus.Counter
	writeFailures *prometheus.CounterVec
	lost          prometheus.Counter
}

func newAsyncMetrics(reg *prometheus.Registry) asyncMetrics {
	a := asyncMetrics{
		persisted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "async_orders_persisted_total",
			Help: "Queued lua-async orders a writer finished, by outcome: written, already (a redelivery found done) or failed (refused by the database, recorded).",
		}, []string{"outcome"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "async_batch_seconds",
			Help: "Duration of a lua-async writer's batch transaction.", Buckets: latencyBuckets,
		}),
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "async_dead_letters_total",
			Help: "Queued lua-async orders moved to a dead-letter stream.",
		}),
		writeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "async_write_failures_total",
			Help: "Failed attempts to persist a lua-async batch, by kind: outage (retried until it passes) or error.",
		}, []string{"kind"}),
	}
	a.lost = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "async_orders_lost_total",
		Help: "Queued lua-async orders not written because Redis lost their queue before their batch committed (the gate was rebuilt without them).",
	})
	reg.MustRegister(a.persisted, a.batch, a.deadLettered, a.writeFailures, a.lost)
	return a
}

// Persisted records one committed lua-async batch (shop.AsyncObserver).
func (m *Metrics) Persisted(written, already, failed int, took time.Duration) {
	if m == nil {
		return
	}
	m.async.persisted.WithLabelValues("written").Add(float64(written))
	m.async.persisted.WithLabelValues("already").Add(float64(already))
	m.async.persisted.WithLabelValues("failed").Add(float64(failed))
	m.async.batch.Observe(took.Seconds())
}

// DeadLettered records entries moved to a dead-letter stream.
func (m *Metrics) DeadLettered(n int) {
	if m != nil {
		m.async.deadLettered.Add(float64(n))
	}
}

// WriteFailed records a failed batch attempt.
func (m *Metrics) WriteFailed(outage bool) {
	if m == nil {
		return
	}
	kind := "error"
	if outage {
		kind = "outage"
	}
	m.async.writeFailures.WithLabelValues(kind).Inc()
}

// QueueLost records queued orders Redis lost before they were written.
func (m *Metrics) QueueLost(n int) {
	if m != nil {
		m.async.lost.Add(float64(n))
	}
}
