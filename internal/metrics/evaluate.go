package metrics

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Policy kinds, the label of policy evaluations.
const (
	PolicyTemplate    = "flow_template"
	PolicyEnvironment = "environment"
)

// Evaluator counts and times the evaluate tier's work: messages applied, batches, policy
// evaluations.
type Evaluator struct {
	applied       prometheus.Counter
	failed        prometheus.Counter
	batchDuration prometheus.Observer
	policies      map[string]policySeries
}

type policySeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// NewEvaluator registers the evaluator's metrics on reg.
func NewEvaluator(reg prometheus.Registerer) *Evaluator {
	applied := prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "evaluator",
		Name: "messages_applied_total", Help: "Evidence messages applied to the store (committed)."})
	failed := prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "evaluator",
		Name: "batch_failures_total", Help: "Batches whose transaction failed and will be retried."})
	batch := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "evaluator",
		Name: "batch_duration_seconds", Help: "Time to apply one batch of evidence messages in one transaction.", Buckets: latencyBuckets})
	evals := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "evaluator",
		Name: "policy_evaluations_total", Help: "OPA evaluations, by policy kind."}, []string{"kind"})
	evalDur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "evaluator",
		Name: "policy_evaluation_duration_seconds", Help: "Duration of one OPA evaluation, by policy kind.", Buckets: latencyBuckets},
		[]string{"kind"})
	e := &Evaluator{applied: applied, failed: failed, batchDuration: batch, policies: map[string]policySeries{}}
	for _, kind := range []string{PolicyTemplate, PolicyEnvironment} {
		e.policies[kind] = policySeries{count: evals.WithLabelValues(kind), duration: evalDur.WithLabelValues(kind)}
	}
	reg.MustRegister(applied, failed, batch, evals, evalDur)
	return e
}

// Batch records a batch of which applied messages were committed, taking took; failed says
// the rest of it will be retried.
func (e *Evaluator) Batch(applied int, took time.Duration, failed bool) {
	if e == nil {
		return
	}
	e.applied.Add(float64(applied))
	e.batchDuration.Observe(took.Seconds())
	if failed {
		e.failed.Inc()
	}
}

// PolicyEvaluated records one OPA evaluation of a policy of kind (PolicyTemplate,
// PolicyEnvironment) that took took.
func (e *Evaluator) PolicyEvaluated(kind string, took time.Duration) {
	if e == nil {
		return
	}
	if s, ok := e.policies[kind]; ok {
		s.count.Inc()
		s.duration.Observe(took.Seconds())
	}
}

// Backlog registers a gauge of how many evidence messages wait for the evaluators, read from
// count at each scrape (the embedded bus's unacknowledged messages, or Kafka's end offsets
// minus the evaluators' positions summed over the partitions).
func Backlog(reg prometheus.Registerer, count func() float64) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "evaluator",
		Name: "backlog_messages", Help: "Evidence messages published and not yet applied by the evaluators."}, count))
}

// ConsumerLag registers the evaluators' lag per partition of the evidence topic, read at each
// scrape from lag (the topic's end offsets minus the positions the evaluators recorded). A
// scrape where lag fails reports none, and the failure as the scrape's error.
func ConsumerLag(reg prometheus.Registerer, lag func(ctx context.Context) (map[int32]int64, error)) {
	reg.MustRegister(&lagCollector{lag: lag, desc: prometheus.NewDesc(namespace+"_evaluator_consumer_lag_messages",
		"Messages of the evidence topic's partition published and not yet applied by the evaluators.", []string{"partition"}, nil)})
}

type lagCollector struct {
	lag  func(ctx context.Context) (map[int32]int64, error)
	desc *prometheus.Desc
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
	defer cancel()
	lag, err := c.lag(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("read the evaluators' lag: %w", err))
		return
	}
	for p, n := range lag {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), strconv.Itoa(int(p)))
	}
}

// lagTimeout bounds a scrape's reads of offsets and positions.
const lagTimeout = 5 * time.Second
