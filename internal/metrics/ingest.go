package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Ingest holds the ingest tier's own counts beside its HTTP metrics.
type Ingest struct {
	waits       prometheus.Counter
	waitSeconds prometheus.Observer
	refusals    *prometheus.CounterVec
	refusedBy   map[string]prometheus.Counter
}

// Refusal scopes: what a 429 or a write refused for lack of room was counted against.
const (
	RefusedRateKey      = "rate_key"
	RefusedRateOrg      = "rate_organization"
	RefusedInFlightKey  = "in_flight_key"
	RefusedInFlightOrg  = "in_flight_organization"
	RefusedInFlightAll  = "in_flight_server"
	refusedOtherUnknown = "other"
)

// NewIngest registers the ingest tier's metrics on reg.
func NewIngest(reg prometheus.Registerer) *Ingest {
	waitHist := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "ingest",
		Name: "read_your_writes_wait_duration_seconds", Help: "How long reads waited for the organization's writes in flight (only reads that had some).",
		Buckets: latencyBuckets})
	m := &Ingest{
		waits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "ingest",
			Name: "read_your_writes_waits_total", Help: "Reads that waited for the organization's writes in flight."}),
		waitSeconds: waitHist,
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "ingest",
			Name: "refusals_total", Help: "Requests refused by the load limits (429, or 503 when the server has no room), by scope."},
			[]string{"scope"}),
		refusedBy: map[string]prometheus.Counter{},
	}
	for _, s := range []string{RefusedRateKey, RefusedRateOrg, RefusedInFlightKey, RefusedInFlightOrg, RefusedInFlightAll, refusedOtherUnknown} {
		m.refusedBy[s] = m.refusals.WithLabelValues(s)
	}
	reg.MustRegister(m.waits, waitHist, m.refusals)
	return m
}

// Waited records a read that waited took for writes in flight.
func (m *Ingest) Waited(took time.Duration) {
	if m == nil {
		return
	}
	m.waits.Inc()
	m.waitSeconds.Observe(took.Seconds())
}

// Refused records a request refused by a limit of the given scope (one of the Refused*
// constants).
func (m *Ingest) Refused(scope string) {
	if m == nil {
		return
	}
	c := m.refusedBy[scope]
	if c == nil {
		c = m.refusedBy[refusedOtherUnknown]
	}
	c.Inc()
}
