package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// Notifiers finds the notifier for a catalog name. notify/catalog implements it.
type Notifiers interface {
	Lookup(name string) (sdk.Notifier, error)
}

// SendStage makes one delivery attempt through the delivery's notifier, bounded by Timeout and
// by the delivery's deadline, and records its classified outcome in d.Last. With a Tracer, an
// attempt in a traced context (the trigger's trace) is a client span of that trace.
type SendStage struct {
	Notifiers Notifiers
	Timeout   time.Duration
	Now       func() time.Time
	Tracer    trace.Tracer
}

// Exec makes the attempt.
func (s SendStage) Exec(ctx context.Context, d *Delivery) (err error) {
	d.Attempts++
	d.Notification.Attempt = d.Attempts
	if s.Tracer != nil && trace.SpanContextFromContext(ctx).IsValid() {
		var span trace.Span
		ctx, span = s.Tracer.Start(ctx, "notify.deliver", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("veritrail.notify.target_type", string(d.Notification.Target.Type)),
			attribute.String("veritrail.notify.notifier", d.Notifier), attribute.Int("veritrail.notify.attempt", d.Attempts)))
		defer func() { endAttempt(span, d, err) }()
	}
	n, err := s.Notifiers.Lookup(d.Notifier)
	if err != nil {
		// An unknown or unusable notifier: classified by the catalog, or a configuration
		// error nobody can retry away.
		d.Last, d.LastAt = failureOf(sdk.Permanent(sdk.ReasonConfig, err)), s.Now()
		return nil
	}
	attemptCtx, cancel := context.WithTimeout(ctx, s.Timeout)
	if !d.Deadline.IsZero() {
		attemptCtx, cancel = withDeadline(attemptCtx, cancel, d.Deadline)
	}
	err = n.Notify(attemptCtx, &d.Notification)
	cancel()
	d.LastAt = s.Now()
	if err == nil {
		d.Last = nil
		return nil
	}
	if ctx.Err() != nil {
		// The pipeline itself is stopping: that is no failure of the target's.
		return fmt.Errorf("notify: attempt %d of %s: %w", d.Attempts, d.Key, context.Cause(ctx))
	}
	d.Last = failureOf(err)
	return nil
}

// endAttempt ends an attempt's span with its outcome: the failure's reason and whether it is
// retried, or success.
func endAttempt(span trace.Span, d *Delivery, err error) {
	switch {
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
	case d.Last != nil:
		span.SetAttributes(attribute.String("veritrail.notify.reason", d.Last.Reason), attribute.Bool("veritrail.notify.retryable", d.Last.Retryable))
		span.SetStatus(codes.Error, d.Last.Error())
	default:
		span.SetStatus(codes.Ok, "")
	}
	span.End()
}

func failureOf(err error) *sdk.Failure {
	f := sdk.Classify(err)
	if f.Err == nil {
		f.Err = errors.New("delivery failed")
	}
	return &f
}

func withDeadline(ctx context.Context, cancel context.CancelFunc, at time.Time) (context.Context, context.CancelFunc) {
	inner, innerCancel := context.WithDeadline(ctx, at)
	return inner, func() { innerCancel(); cancel() }
}
