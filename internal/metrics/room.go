package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// roomMetrics are the waiting rooms' (issue 21). Their item label is the
// one exception to "no label per item": the room metrics in docs/OPERATIONS.md ask for it, and an
// item has a room only when an admin set one up, so the label's values
// stay few; a room turned off drops its series (RoomForget).
type roomMetrics struct {
	waiting    *prometheus.GaugeVec
	admitted   *prometheus.CounterVec
	wait       prometheus.Histogram
	expired    *prometheus.CounterVec
	deferred   *prometheus.CounterVec
	rejections *prometheus.CounterVec
}

// waitBuckets span an admission at once to a long line (an hour).
var waitBuckets = []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

func newRoomMetrics(reg *prometheus.Registry) roomMetrics {
	m := roomMetrics{
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "room_waiting",
			Help: "Tickets of an item's waiting room not yet admitted, as this instance's admission loop last read them."}, []string{"item"}),
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "room_admitted_total",
			Help: "Tickets admitted (a pass issued) by this instance's admission loop, by item."}, []string{"item"}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "room_wait_seconds",
			Help: "Time from joining (or the opening, for those who joined before it) to admission, of the tickets this instance admitted " +
				"(a ticket joined on another instance counts only if it joined before the opening).", Buckets: waitBuckets}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "room_passes_expired_total",
			Help: "Passes found expired unused (abandoned) by this instance's admission loop, by item."}, []string{"item"}),
		deferred: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "room_tickets_deferred_total",
			Help: "Tickets set aside by this instance's admission loop, by item and reason: seen (polled lately but not very lately) " +
				"or unclaimed (a pass its page did not read within the claim window lapsed)."}, []string{"item", "reason"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "room_pass_rejections_total",
			Help: "Orders of roomed items refused for their pass, by reason (the API's error code)."}, []string{"reason"}),
	}
	reg.MustRegister(m.waiting, m.admitted, m.wait, m.expired, m.deferred, m.rejections)
	return m
}

func itemLabel(item int64) string { return strconv.FormatInt(item, 10) }

// RoomWaiting sets an item's waiting tickets.
func (m *Metrics) RoomWaiting(item, n int64) {
	if m == nil {
		return
	}
	m.room.waiting.WithLabelValues(itemLabel(item)).Set(float64(n))
}

// RoomAdmitted counts tickets admitted.
func (m *Metrics) RoomAdmitted(item int64, n int) {
	if m == nil {
		return
	}
	m.room.admitted.WithLabelValues(itemLabel(item)).Add(float64(n))
}

// RoomWait observes one admitted ticket's wait.
func (m *Metrics) RoomWait(d time.Duration) {
	if m == nil {
		return
	}
	m.room.wait.Observe(max(0, d.Seconds()))
}

// RoomPassesExpired counts passes that expired unused.
func (m *Metrics) RoomPassesExpired(item, n int64) {
	if m == nil {
		return
	}
	m.room.expired.WithLabelValues(itemLabel(item)).Add(float64(n))
}

// RoomDeferred counts tickets deferred, for reason "seen" or "unclaimed".
func (m *Metrics) RoomDeferred(item int64, reason string, n int64) {
	if m == nil {
		return
	}
	m.room.deferred.WithLabelValues(itemLabel(item), reason).Add(float64(n))
}

// RoomPassRejected counts an order refused for its pass.
func (m *Metrics) RoomPassRejected(reason string) {
	if m == nil {
		return
	}
	m.room.rejections.WithLabelValues(reason).Inc()
}

// RoomForget drops a room's series once it is turned off.
func (m *Metrics) RoomForget(item int64) {
	if m == nil {
		return
	}
	l := itemLabel(item)
	m.room.waiting.DeleteLabelValues(l)
	m.room.admitted.DeleteLabelValues(l)
	m.room.expired.DeleteLabelValues(l)
	m.room.deferred.DeletePartialMatch(prometheus.Labels{"item": l})
}
