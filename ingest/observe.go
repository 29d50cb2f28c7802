package ingest

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// traceRequests starts each request's server span when tracing is on, in the request's context
// for everything after it (recoverPanics' log line, the handler's publishes and log lines).
// observe names it by the operation ID once Huma has routed the request; a request no
// operation serves (a web page) keeps its method as its name.
func (a *API) traceRequests(next http.Handler) http.Handler {
	if a.tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := a.tracer.Start(r.Context(), r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// observe is the Huma middleware that counts and times every operation's answer, by its
// operation ID and status class, names the request's span (traceRequests) by the operation ID,
// and logs each answer at debug level (with the trace, when traced). It runs first, so refusals
// by the middlewares after it count too; a panic is counted (as a 5xx) on its way to
// recoverPanics.
func (a *API) observe(ctx huma.Context, next func(huma.Context)) {
	if a.tracer != nil {
		span := trace.SpanFromContext(ctx.Context())
		span.SetName(ctx.Operation().OperationID)
		defer func() { span.SetAttributes(attribute.Int("http.response.status_code", ctx.Status())) }()
	}
	logged := a.log.Enabled(ctx.Context(), slog.LevelDebug)
	if a.httpMetrics == nil && !logged {
		next(ctx)
		return
	}
	start := time.Now()
	defer func() {
		took := time.Since(start)
		var body int64
		if cl := ctx.Header("Content-Length"); cl != "" {
			body, _ = strconv.ParseInt(cl, 10, 64)
		}
		a.httpMetrics.Observe(ctx.Operation().OperationID, ctx.Status(), took, body)
		if logged {
			a.log.LogAttrs(ctx.Context(), slog.LevelDebug, "ingest: request", slog.String("operation", ctx.Operation().OperationID),
				slog.String("method", ctx.Method()), slog.Int("status", ctx.Status()), slog.Duration("took", took), slog.Int64("bytes", body))
		}
	}()
	next(ctx)
}

// operationIDs lists the registered operations' IDs, the label values of the HTTP metrics.
func (a *API) operationIDs() []string {
	var ids []string
	for _, item := range a.huma.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch, item.Head, item.Options} {
			if op != nil && op.OperationID != "" {
				ids = append(ids, op.OperationID)
			}
		}
	}
	return ids
}
