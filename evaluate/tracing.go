package evaluate

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/veritrail/veritrail/internal/metrics"
)

// The evaluator's spans continue the trace of the report that caused the work: the composition
// root puts the apply span of each message in the message's context (Deps.Tracer's doc), an
// apply runs under it, and a trail remembers, until it is evaluated, the span of the last traced
// message that dirtied it. Without a tracer none of this records anything.

// spanOf is the span the composition root put in msg's context: its apply span; a span that
// records nothing when the message is not traced.
func spanOf(msg *message.Message) trace.SpanContext {
	return trace.SpanContextFromContext(msg.Context())
}

// under returns ctx with sc as the parent of the spans started in it; ctx itself when sc is
// not valid (no trace to continue).
func under(ctx context.Context, sc trace.SpanContext) context.Context {
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}

// startSpan starts a span under ctx's span, or nothing (a span that records nothing, ctx as
// it is) without a tracer or without a trace to continue: work nobody reported (a restart's
// leftover dirt) starts no trace of its own.
func startSpan(ctx context.Context, tracer trace.Tracer, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// endSpan ends span with err's status.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// policyRun is one OPA evaluation of a policy kind: counted and timed, and a span in the trace
// of the work it is part of.
func policyRun(ctx context.Context, tracer trace.Tracer, m *metrics.Evaluator, kind string) (context.Context, func(error)) {
	start := time.Now()
	if tracer == nil { // no span, and no attributes built for one
		return ctx, func(error) { m.PolicyEvaluated(kind, time.Since(start)) }
	}
	ctx, span := startSpan(ctx, tracer, "policy.evaluate", attribute.String("veritrail.policy.kind", kind))
	return ctx, func(err error) {
		m.PolicyEvaluated(kind, time.Since(start))
		endSpan(span, err)
	}
}
