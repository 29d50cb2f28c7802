package metrics

import (
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
)

// Publishing counts and times the messages a process publishes, per topic.
type Publishing struct {
	published *prometheus.CounterVec
	failed    *prometheus.CounterVec
	durations *prometheus.HistogramVec
}

// NewPublishing registers the publish metrics on reg.
func NewPublishing(reg prometheus.Registerer) *Publishing {
	p := &Publishing{
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "bus",
			Name: "messages_published_total", Help: "Messages the bus acknowledged as durable, by topic."}, []string{"topic"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "bus",
			Name: "publish_failures_total", Help: "Publish calls that failed, by topic."}, []string{"topic"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "bus",
			Name: "publish_duration_seconds", Help: "Time of a publish call until the bus acknowledged it, by topic.",
			Buckets: latencyBuckets}, []string{"topic"}),
	}
	reg.MustRegister(p.published, p.failed, p.durations)
	return p
}

// Publisher returns pub with every publish to one of topics counted and timed (the topics are
// the label's values, resolved here; a publish to another topic passes uncounted). With a nil
// Publishing it returns pub itself.
func (p *Publishing) Publisher(pub message.Publisher, topics ...string) message.Publisher {
	if p == nil {
		return pub
	}
	t := &timedPublisher{Publisher: pub, topics: make(map[string]topicSeries, len(topics))}
	for _, topic := range topics {
		t.topics[topic] = topicSeries{published: p.published.WithLabelValues(topic), failed: p.failed.WithLabelValues(topic),
			duration: p.durations.WithLabelValues(topic)}
	}
	return t
}

type topicSeries struct {
	published, failed prometheus.Counter
	duration          prometheus.Observer
}

type timedPublisher struct {
	message.Publisher
	topics map[string]topicSeries // read-only once built
}

func (t *timedPublisher) Publish(topic string, msgs ...*message.Message) error {
	s, ok := t.topics[topic]
	if !ok {
		return t.Publisher.Publish(topic, msgs...)
	}
	start := time.Now()
	err := t.Publisher.Publish(topic, msgs...)
	s.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		s.failed.Inc()
		return err
	}
	s.published.Add(float64(len(msgs)))
	return nil
}
