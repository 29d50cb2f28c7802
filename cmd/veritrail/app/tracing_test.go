package app

import (
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceContinuesIntoTheEvaluator: with tracing on (an in-memory exporter), a write's server
// span at ingest is the parent of the evaluator's apply of its message, across the embedded
// bus and across Kafka.
func TestTraceContinuesIntoTheEvaluator(t *testing.T) {
	var spans *tracetest.InMemoryExporter
	forEachModeWith(t, func(c *Config) {
		spans = tracetest.NewInMemoryExporter()
		c.Tracing = sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	}, func(t *testing.T, e env) {
		setupFlow(t, e.k)
		// The read waits until the trail's messages are applied.
		e.k.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK)
		var server map[trace.SpanID]string // server spans of writes, by ID: their operation
		var applied []tracetest.SpanStub
		eventually(t, "the apply spans of both writes", func() bool {
			server, applied = map[trace.SpanID]string{}, nil
			for _, s := range spans.GetSpans() {
				switch {
				case s.SpanKind == trace.SpanKindServer:
					server[s.SpanContext.SpanID()] = s.Name
				case s.Name == "evaluate.apply":
					applied = append(applied, s)
				}
			}
			return len(applied) >= 2
		})
		continued := map[string]bool{}
		for _, a := range applied {
			op, ok := server[a.Parent.SpanID()]
			if !ok || !a.Parent.IsRemote() {
				t.Errorf("apply span %v: parent %v is no server span of this process's requests", a.SpanContext.SpanID(), a.Parent)
			}
			continued[op] = true
		}
		for _, op := range []string{"createFlowWithTemplate", "beginTrail"} {
			if !continued[op] {
				t.Errorf("no apply continues the trace of %s; applies continue %v", op, continued)
			}
		}
	})
}
