// Package metrics holds Veritrail's Prometheus metrics: what each tier counts and times, on a
// registry the composition root creates and serves (never the global default registry, so
// that two processes' tiers in one test binary do not collide).
//
// Every type here is nil-safe: a tier built without metrics (the benchmark's bare baseline,
// unit tests) holds a nil pointer and its updates cost a nil check. Labels are bounded sets
// (operation IDs, status classes, topics, notifier names, failure reasons, policy kinds); an
// organization, trail or fingerprint is never a label.
//
// Updates stay off the hot path's locks: label values are resolved once (at construction, or
// on first use behind an atomic pointer), so a request costs atomic adds.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every metric of ours.
const namespace = "veritrail"

// NewRegistry returns a registry with the Go runtime and process collectors registered.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves reg in the Prometheus exposition formats.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// latencyBuckets are the buckets of every duration histogram here: 1 ms to 10 s, covering a
// publish on the embedded bus (under a millisecond) and a read-your-writes wait behind a
// rebalance (seconds).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
