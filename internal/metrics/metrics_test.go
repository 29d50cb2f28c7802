package metrics

import (
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestHTTPLabelsStayBounded: an unknown operation counts as "other", a status outside 1xx-5xx
// as 5xx, and the classes are counted apart.
func TestHTTPLabelsStayBounded(t *testing.T) {
	reg := NewRegistry()
	h := NewHTTP(reg, []string{"getFlow"})
	h.Observe("getFlow", 200, time.Millisecond, 10)
	h.Observe("getFlow", 201, time.Millisecond, 0)
	h.Observe("getFlow", 404, time.Millisecond, 0)
	h.Observe("/etc/passwd", 0, time.Millisecond, 5)
	for labels, want := range map[[2]string]float64{{"getFlow", "2xx"}: 2, {"getFlow", "4xx"}: 1, {OtherOperation, "5xx"}: 1} {
		if got := testutil.ToFloat64(h.requests.WithLabelValues(labels[0], labels[1])); got != want {
			t.Errorf("%v: %v requests, want %v", labels, got, want)
		}
	}
	if got := testutil.ToFloat64(h.bodyBytes); got != 15 {
		t.Errorf("body bytes %v, want 15", got)
	}
}

// TestNotifyReasonsAreTheSDKs: a plugin's own failure reason is counted as "other", a dead
// letter also in the dead letters.
func TestNotifyReasonsAreTheSDKs(t *testing.T) {
	n := NewNotify(NewRegistry())
	n.Delivery("pager", OutcomeFailed, "pager-was-grumpy")
	n.Delivery("pager", OutcomeDeadLetter, "timeout")
	if got := testutil.ToFloat64(n.deliveries.WithLabelValues("pager", OutcomeFailed, "other")); got != 1 {
		t.Errorf("failed with a plugin's reason: %v, want 1 as other", got)
	}
	if got := testutil.ToFloat64(n.deadLetters.WithLabelValues("pager")); got != 1 {
		t.Errorf("dead letters %v, want 1", got)
	}
}

// TestNilCountsNothing: a tier built without metrics holds nil pointers, and their updates
// are no-ops.
func TestNilCountsNothing(t *testing.T) {
	var (
		h *HTTP
		i *Ingest
		e *Evaluator
		n *Notify
		p *Publishing
	)
	h.Observe("x", 200, time.Second, 1)
	i.Waited(time.Second)
	i.Refused(RefusedRateKey)
	e.Batch(1, time.Second, false)
	e.PolicyEvaluated(PolicyTemplate, time.Second)
	n.Delivery("webhook", OutcomeDelivered, "")
	n.PluginRestarted("x")
	n.RetryWaiting(1)
	if p.Publisher(nil) != nil {
		t.Error("a nil Publishing wrapped the publisher")
	}
}

// BenchmarkHTTPObserve is what one request costs the ingest tier in metrics: its operation's
// count and latency, and its body bytes (docs/PERFORMANCE.md compares it with a request's CPU).
func BenchmarkHTTPObserve(b *testing.B) {
	h := NewHTTP(NewRegistry(), []string{"createAttestation"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.Observe("createAttestation", 201, 300*time.Microsecond, 1024)
		}
	})
}

// BenchmarkPublish is what one publish costs in metrics beyond the bus's own work: the
// wrapper's count and latency around a publisher that does nothing.
func BenchmarkPublish(b *testing.B) {
	pub := NewPublishing(NewRegistry()).Publisher(nopPublisher{}, "evidence")
	msg := message.NewMessage("id", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = pub.Publish("evidence", msg)
		}
	})
}

type nopPublisher struct{}

func (nopPublisher) Publish(string, ...*message.Message) error { return nil }
func (nopPublisher) Close() error                              { return nil }
