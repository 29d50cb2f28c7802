package app

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceContinuesIntoTheEvaluator: with tracing on (an in-memory exporter), a write's server
// span at ingest is the parent of the evaluator's apply of its message, across the embedded
// bus and across Kafka; an attestation's trace goes on into its trail's evaluation and the
// template's OPA query; and a snapshot's trace goes from the request through its apply, the
// environment policy's OPA query, the trigger outbox and the trigger topic into the notify
// tier's delivery to a webhook.
func TestTraceContinuesIntoTheEvaluator(t *testing.T) {
	var spans *tracetest.InMemoryExporter
	forEachModeWith(t, func(c *Config) {
		spans = tracetest.NewInMemoryExporter()
		c.Tracing = sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	}, func(t *testing.T, e env) {
		k := e.k
		notifyFixture(t, k) // a flow, trail t1 with artifact fpWeb, environment prod
		p := policyKit{t, k}
		p.policy("prod-policy", policySchema+"artifacts:\n  provenance:\n    required: true\n", http.StatusCreated)
		p.attach("prod", "prod-policy").want(t, http.StatusOK)
		hook := newReceiver(t)
		createRule(t, k, map[string]any{"name": "starts", "environments": []string{"prod"}, "triggers": []string{"ON_STARTED_ARTIFACT"},
			"targets": []map[string]any{{"type": "WEBHOOK", "webhook": hook.url}}})
		// The read waits until the trail's messages are applied.
		k.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK)
		reportProd(t, k, k8sItem("web-1", map[string]string{"web": fpWeb}, 100))
		next(t, hook.got, "the webhook delivery")

		var tr traced
		eventually(t, "the spans of the report's trace and of the trail's evaluation", func() bool {
			tr = traceOf(spans.GetSpans())
			// A parent ends after its children: wait for the delivery's ancestors too.
			delivered, evaluated := tr.named("notify.deliver"), tr.named("evaluate.trail")
			return len(tr.named("evaluate.apply")) >= 3 && len(evaluated) > 0 && len(tr.path(evaluated[0])) >= 3 &&
				len(delivered) > 0 && len(tr.path(delivered[0])) >= 4
		})
		continued := map[string]bool{}
		for _, a := range tr.named("evaluate.apply") {
			server, ok := tr.byID[a.Parent.SpanID()]
			if !ok || !a.Parent.IsRemote() || server.SpanKind != trace.SpanKindServer {
				t.Errorf("apply span %v: parent %v is no server span of this process's requests", a.SpanContext.SpanID(), a.Parent)
				continue
			}
			continued[server.Name] = true
		}
		for _, op := range []string{"createFlowWithTemplate", "beginTrail", "reportSnapshot"} {
			if !continued[op] {
				t.Errorf("no apply continues the trace of %s; applies continue %v", op, continued)
			}
		}

		// The trail's evaluation and its template's OPA query, in the trace of a write to the trail.
		evaluated := tr.named("evaluate.trail")[0]
		if got := tr.path(evaluated); len(got) < 3 || got[1] != "evaluate.apply" || tr.byID[tr.root(evaluated)].SpanKind != trace.SpanKindServer {
			t.Errorf("the trail's evaluation descends from %v, not from a request's apply", got)
		}
		if !tr.hasChild(evaluated, "policy.evaluate", "flow_template") {
			t.Errorf("the trail's evaluation has no OPA query of its template")
		}

		// The webhook delivery: attempt <- trigger <- the snapshot's apply <- its request; the apply
		// also judged the artifact against the environment's policy.
		delivered := tr.named("notify.deliver")[0]
		want := []string{"notify.deliver", "notify.trigger", "evaluate.apply", "reportSnapshot"}
		if got := tr.path(delivered); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
			t.Fatalf("the delivery's ancestry is %v, want %v", got, want)
		}
		if delivered.SpanKind != trace.SpanKindClient || attr(delivered, "veritrail.notify.target_type") != "WEBHOOK" {
			t.Errorf("delivery span: kind %v, attributes %v", delivered.SpanKind, delivered.Attributes)
		}
		apply := tr.byID[tr.byID[delivered.Parent.SpanID()].Parent.SpanID()]
		if !tr.hasChild(apply, "policy.evaluate", "environment") {
			t.Errorf("the snapshot's apply has no OPA query of the environment's policy")
		}
	})
}

// TestRequestLogLinesNameTheTrace: with tracing on, each request's log line (at debug level,
// JSON) carries the trace and span IDs of the request's server span.
func TestRequestLogLinesNameTheTrace(t *testing.T) {
	var spans *tracetest.InMemoryExporter
	var logs *syncBuffer
	forEachModeWith(t, func(c *Config) {
		spans, logs = tracetest.NewInMemoryExporter(), &syncBuffer{}
		c.Tracing = sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
		c.Log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}, func(t *testing.T, e env) {
		setupFlow(t, e.k)
		e.k.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK)
		server := map[trace.SpanID]tracetest.SpanStub{}
		for _, s := range spans.GetSpans() {
			if s.SpanKind == trace.SpanKindServer {
				server[s.SpanContext.SpanID()] = s
			}
		}
		ops := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var l struct{ Msg, Operation, Trace_ID, Span_ID string }
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if l.Msg != "ingest: request" {
				continue
			}
			id, err := trace.SpanIDFromHex(l.Span_ID)
			s, ok := server[id]
			if err != nil || !ok || s.Name != l.Operation || s.SpanContext.TraceID().String() != l.Trace_ID {
				t.Errorf("request log line %s names no server span of its operation", line)
			}
			ops[l.Operation] = true
		}
		for _, op := range []string{"createFlowWithTemplate", "beginTrail", "getTrail"} {
			if !ops[op] {
				t.Errorf("no request log line of %s; lines of %v", op, ops)
			}
		}
	})
}

// traced indexes finished spans by ID.
type traced struct {
	spans []tracetest.SpanStub
	byID  map[trace.SpanID]tracetest.SpanStub
}

func traceOf(spans []tracetest.SpanStub) traced {
	tr := traced{spans: spans, byID: map[trace.SpanID]tracetest.SpanStub{}}
	for _, s := range spans {
		tr.byID[s.SpanContext.SpanID()] = s
	}
	return tr
}

func (tr traced) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tr.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// path is the names from s up through its finished ancestors, each in s's trace.
func (tr traced) path(s tracetest.SpanStub) []string {
	names := []string{s.Name}
	for s.Parent.IsValid() {
		parent, ok := tr.byID[s.Parent.SpanID()]
		if !ok || parent.SpanContext.TraceID() != s.SpanContext.TraceID() {
			break
		}
		names, s = append(names, parent.Name), parent
	}
	return names
}

// root is the ID of the farthest finished ancestor of s.
func (tr traced) root(s tracetest.SpanStub) trace.SpanID {
	for s.Parent.IsValid() {
		parent, ok := tr.byID[s.Parent.SpanID()]
		if !ok {
			break
		}
		s = parent
	}
	return s.SpanContext.SpanID()
}

// hasChild reports whether parent has a child span named name of policy kind kind.
func (tr traced) hasChild(parent tracetest.SpanStub, name, kind string) bool {
	for _, s := range tr.spans {
		if s.Name == name && s.Parent.SpanID() == parent.SpanContext.SpanID() && attr(s, "veritrail.policy.kind") == kind {
			return true
		}
	}
	return false
}

func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
