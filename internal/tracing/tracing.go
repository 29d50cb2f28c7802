// Package tracing holds Veritrail's OpenTelemetry plumbing: the tracer provider a process
// builds from the standard OTEL_* environment variables (none unless they ask for an
// exporter), and the trace context carried in a bus message's metadata, so that a report's
// trace continues from the HTTP request into the evaluator across either bus. No global state:
// the provider and the propagator are passed, not registered with otel's globals.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// propagator writes and reads the W3C traceparent and tracestate keys.
var propagator = propagation.TraceContext{}

// FromEnv returns the tracer provider the environment configures, and how to flush and stop
// it: an OTLP/HTTP exporter (its endpoint, headers, sampler and the rest read by the SDK from
// the OTEL_* variables) when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// is set, OTEL_TRACES_EXPORTER is not "none" and OTEL_SDK_DISABLED is not "true"; nil
// otherwise, which every caller takes as tracing off.
func FromEnv(ctx context.Context, getenv func(string) string) (trace.TracerProvider, func(context.Context) error, error) {
	off := strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") ||
		(getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "")
	if off {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	return tp, tp.Shutdown, nil
}

// Inject writes ctx's span context into md; nothing when ctx has no span.
func Inject(ctx context.Context, md message.Metadata) {
	propagator.Inject(ctx, propagation.MapCarrier(md))
}

// Extract returns ctx with the remote span context md carries, if any.
func Extract(ctx context.Context, md message.Metadata) context.Context {
	return propagator.Extract(ctx, propagation.MapCarrier(md))
}

// LogHandler is h with, on each record logged with a context that holds a span (the
// *Context methods of slog.Logger), that span's trace_id and span_id, so that a log line
// can be found from its trace and the other way round.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone() // the caller's record may be handled elsewhere too
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.Handler.WithGroup(name)} }
