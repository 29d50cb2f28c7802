package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// Outcomes of a notification delivery.
const (
	OutcomeDelivered  = "delivered"
	OutcomeFailed     = "failed" // one attempt failed; it may be retried
	OutcomeDeadLetter = "dead_letter"
)

// Notify counts the notify tier's deliveries and its plugins' restarts.
type Notify struct {
	deliveries  *prometheus.CounterVec
	deadLetters *prometheus.CounterVec
	restarts    *prometheus.CounterVec
	retrying    prometheus.Gauge
}

// NewNotify registers the notify tier's metrics on reg.
func NewNotify(reg prometheus.Registerer) *Notify {
	n := &Notify{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "notify",
			Name: "deliveries_total", Help: "Delivery attempts' outcomes, by notifier (target type), outcome and the failure reason the SDK classified (empty when delivered)."},
			[]string{"notifier", "outcome", "reason"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "notify",
			Name: "dead_letters_total", Help: "Notifications kept as dead letters, by notifier."}, []string{"notifier"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "notify",
			Name: "plugin_restarts_total", Help: "Plugin processes started again after theirs exited, by notifier."}, []string{"notifier"}),
	}
	n.retrying = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "notify",
		Name: "retry_waiting_deliveries", Help: "Deliveries waiting for their next attempt (the retry queue's depth, this process)."})
	reg.MustRegister(n.deliveries, n.deadLetters, n.restarts, n.retrying)
	return n
}

// Delivery records one delivery attempt's outcome. The notifier is a catalog name and the
// reason one of the SDK's classes, both bounded sets; a delivery is a few per report, so the
// labels are resolved here.
func (n *Notify) Delivery(notifier, outcome, reason string) {
	if n == nil {
		return
	}
	if !knownReasons[reason] {
		reason = "other" // a plugin's own reason: the label set stays the SDK's
	}
	n.deliveries.WithLabelValues(notifier, outcome, reason).Inc()
	if outcome == OutcomeDeadLetter {
		n.deadLetters.WithLabelValues(notifier).Inc()
	}
}

// RetryWaiting moves the count of deliveries waiting to retry by delta (+1 as a wait starts,
// -1 as it ends).
func (n *Notify) RetryWaiting(delta int) {
	if n == nil {
		return
	}
	n.retrying.Add(float64(delta))
}

// PluginRestarted records a plugin's process started again.
func (n *Notify) PluginRestarted(notifier string) {
	if n == nil {
		return
	}
	n.restarts.WithLabelValues(notifier).Inc()
}

// knownReasons are the failure reasons the SDK defines, and none (a delivery).
var knownReasons = map[string]bool{"": true, sdk.ReasonNetwork: true, sdk.ReasonTimeout: true, sdk.ReasonCanceled: true,
	sdk.ReasonServerError: true, sdk.ReasonRateLimited: true, sdk.ReasonClientError: true, sdk.ReasonRedirect: true,
	sdk.ReasonUnexpected: true, sdk.ReasonConfig: true, sdk.ReasonBlocked: true, sdk.ReasonTLS: true,
	sdk.ReasonUnclassified: true, sdk.ReasonPluginFailure: true}
