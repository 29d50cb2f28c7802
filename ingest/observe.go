package ingest

import (
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// observe is the Huma middleware that counts and times every operation's answer, by its
// operation ID and status class, and traces it when tracing is on (a server span named by the
// operation ID, in the request's context for what the handler publishes). It runs first, so
// refusals by the middlewares after it count too; a panic is counted (as a 5xx) on its way to
// recoverPanics.
func (a *API) observe(ctx huma.Context, next func(huma.Context)) {
	if a.tracer != nil {
		sctx, span := a.tracer.Start(ctx.Context(), ctx.Operation().OperationID, trace.WithSpanKind(trace.SpanKindServer))
		defer func() {
			span.SetAttributes(attribute.Int("http.response.status_code", ctx.Status()))
			span.End()
		}()
		ctx = huma.WithContext(ctx, sctx)
	}
	if a.httpMetrics == nil {
		next(ctx)
		return
	}
	start := time.Now()
	defer func() {
		var body int64
		if cl := ctx.Header("Content-Length"); cl != "" {
			body, _ = strconv.ParseInt(cl, 10, 64)
		}
		a.httpMetrics.Observe(ctx.Operation().OperationID, ctx.Status(), time.Since(start), body)
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
