package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTP counts and times the API's requests per operation ID and status class.
type HTTP struct {
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	bodyBytes prometheus.Counter
	ops       map[string]*operation // read-only once built: no lock on the hot path
	other     *operation            // requests outside the registered operations
}

// operation holds one operation's series per status class (1xx..5xx), resolved on first use.
type operation struct {
	name    string
	classes [5]atomic.Pointer[series]
}

type series struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// OtherOperation labels requests that match no operation of the API (/ready, 404s).
const OtherOperation = "other"

// NewHTTP registers the HTTP metrics on reg for the given operation IDs.
func NewHTTP(reg prometheus.Registerer, operationIDs []string) *HTTP {
	h := &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "http",
			Name: "requests_total", Help: "HTTP requests answered, by operation ID and status class."},
			[]string{"operation", "status_class"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "http",
			Name: "request_duration_seconds", Help: "Time from a request's routing to its answer, by operation ID and status class.",
			Buckets: latencyBuckets}, []string{"operation", "status_class"}),
		bodyBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "http",
			Name: "request_body_bytes_total", Help: "Bytes of request bodies received, as their Content-Length declared."}),
		ops:   make(map[string]*operation, len(operationIDs)),
		other: &operation{name: OtherOperation},
	}
	for _, id := range operationIDs {
		h.ops[id] = &operation{name: id}
	}
	reg.MustRegister(h.requests, h.durations, h.bodyBytes)
	return h
}

// Observe records one answered request. An operation ID not given to NewHTTP counts as
// OtherOperation, so the label set stays the API's.
func (h *HTTP) Observe(operationID string, status int, took time.Duration, bodyBytes int64) {
	if h == nil {
		return
	}
	op := h.ops[operationID]
	if op == nil {
		op = h.other
	}
	class := status/100 - 1
	if class < 0 || class > 4 {
		class = 4 // a handler that never wrote a status: the server answers 500
	}
	s := op.classes[class].Load()
	if s == nil {
		label := strconv.Itoa(class+1) + "xx"
		s = &series{count: h.requests.WithLabelValues(op.name, label), duration: h.durations.WithLabelValues(op.name, label)}
		op.classes[class].Store(s) // a racing first use stores an equal value
	}
	s.count.Inc()
	s.duration.Observe(took.Seconds())
	if bodyBytes > 0 {
		h.bodyBytes.Add(float64(bodyBytes))
	}
}
