package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestMetadataCarriesTheSpan: a span injected into a message's metadata is the remote parent
// extracted from it; without a span nothing is written.
func TestMetadataCarriesTheSpan(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	md := message.Metadata{}
	Inject(ctx, md)
	got := trace.SpanContextFromContext(Extract(context.Background(), md))
	if !got.IsRemote() || got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("extracted %v from %v, want the span %v", got, md, span.SpanContext())
	}
	empty := message.Metadata{}
	Inject(context.Background(), empty)
	if len(empty) != 0 {
		t.Fatalf("no span, yet metadata %v", empty)
	}
}

// TestOffUnlessConfigured: no OTLP endpoint, or an explicit off, gives no provider.
func TestOffUnlessConfigured(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"},
	} {
		tp, stop, err := FromEnv(context.Background(), func(k string) string { return env[k] })
		if err != nil || tp != nil || stop(context.Background()) != nil {
			t.Errorf("%v: provider %v, err %v", env, tp, err)
		}
	}
	tp, stop, err := FromEnv(context.Background(), func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}[k]
	})
	if err != nil || tp == nil {
		t.Fatalf("configured: provider %v, err %v", tp, err)
	}
	_ = stop(context.Background())
}

// BenchmarkTracedRequest is what tracing on costs ingest per write (sampling everything, spans
// discarded behind the batching processor an OTLP exporter runs behind), as ingest does it: the
// server span with its method and path, named by the operation and given the status once
// routed and answered, and the context written into the message's metadata.
func BenchmarkTracedRequest(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("bench")
	b.ReportAllocs()
	for b.Loop() {
		ctx, span := tracer.Start(context.Background(), "POST", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", "POST"), attribute.String("url.path", "/api/v2/attestations/acme/app/trail/t1/generic")))
		span.SetName("createAttestation")
		md := message.Metadata{}
		Inject(ctx, md)
		span.SetAttributes(attribute.Int("http.response.status_code", 201))
		span.End()
	}
}

// TestLogLinesCarryTheSpan: a line logged with a traced context names its trace and span; one
// logged without, neither; and attributes and groups added to the logger keep the behaviour.
func TestLogLinesCarryTheSpan(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("tier", "ingest")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	log.InfoContext(ctx, "traced")
	log.WithGroup("g").InfoContext(ctx, "grouped", "k", "v")
	log.Info("untraced")
	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("line %s: %v", l, err)
		}
		lines = append(lines, m)
	}
	want := span.SpanContext()
	if len(lines) != 3 || lines[0]["trace_id"] != want.TraceID().String() || lines[0]["span_id"] != want.SpanID().String() ||
		lines[0]["tier"] != "ingest" {
		t.Fatalf("traced line: %v", lines)
	}
	if g, _ := lines[1]["g"].(map[string]any); g["trace_id"] != want.TraceID().String() || g["k"] != "v" {
		t.Errorf("grouped line: %v", lines[1])
	}
	if _, ok := lines[2]["trace_id"]; ok {
		t.Errorf("untraced line has a trace: %v", lines[2])
	}
}
