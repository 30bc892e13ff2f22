package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// outboxMetrics measure the order events' relay (outbox.Observer).
type outboxMetrics struct {
	backlog       prometheus.Gauge
	lag           prometheus.Gauge
	published     prometheus.Counter
	publishErrors prometheus.Counter
}

func newOutboxMetrics(reg *prometheus.Registry) outboxMetrics {
	o := outboxMetrics{
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "outbox_backlog",
			Help: "Order events written and not yet relayed (published to NATS, or marked for the admin feed), as this instance last read them (about every second).",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "outbox_lag_seconds",
			Help: "Age of the oldest order event not yet relayed (0: none waiting).",
		}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "outbox_published_total",
			Help: "Order events this instance's relay published (or, without NATS, marked) and recorded as relayed.",
		}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "outbox_publish_errors_total",
			Help: "Failed publishes of a batch of order events to NATS (the batch is retried; nothing is lost).",
		}),
	}
	reg.MustRegister(o.backlog, o.lag, o.published, o.publishErrors)
	return o
}

// Backlog records the relay's backlog and its oldest event's age.
func (m *Metrics) Backlog(n int64, lag time.Duration) {
	if m != nil {
		m.outbox.backlog.Set(float64(n))
		m.outbox.lag.Set(lag.Seconds())
	}
}

// Published records events relayed.
func (m *Metrics) Published(n int) {
	if m != nil {
		m.outbox.published.Add(float64(n))
	}
}

// PublishFailed records a failed publish.
func (m *Metrics) PublishFailed() {
	if m != nil {
		m.outbox.publishErrors.Inc()
	}
}
