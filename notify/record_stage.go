package notify

import (
	"context"
	"fmt"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"github.com/veritrail/veritrail/internal/metrics"
)

// RecordStage records a failed attempt in the log as it happens, so a rule reads as failing
// while its delivery is still being retried rather than only once the budget is spent.
// Successes are recorded by the settle stage, with the delivery, in one transaction.
type RecordStage struct {
	Log     deliverylog.Log
	Metrics *metrics.Notify
}

// Exec records d.Last when the attempt failed.
func (s RecordStage) Exec(ctx context.Context, d *Delivery) error {
	if d.Last == nil {
		return nil
	}
	if err := s.Log.RecordFailure(ctx, d.Key, failureRecord(d)); err != nil {
		return fmt.Errorf("notify: record failure of %s: %w", d.Key, err)
	}
	s.Metrics.Delivery(d.Notifier, metrics.OutcomeFailed, d.Last.Reason)
	return nil
}

func failureRecord(d *Delivery) deliverylog.Failure {
	return deliverylog.Failure{
		At:        d.LastAt,
		Attempts:  d.Attempts,
		Retryable: d.Last.Retryable,
		Reason:    d.Last.Reason,
		Message:   d.Last.Err.Error(),
		Exhausted: d.Exhausted,
	}
}
