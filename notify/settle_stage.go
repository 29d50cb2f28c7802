package notify

import (
	"context"
	"fmt"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"github.com/veritrail/veritrail/internal/metrics"
	"log/slog"
)

// SettleStage ends a claimed delivery in the log: delivered, or kept as a dead letter after a
// permanent failure or an exhausted budget.
type SettleStage struct {
	Log     deliverylog.Log
	Logger  *slog.Logger
	Metrics *metrics.Notify
}

// Exec settles d.
func (s SettleStage) Exec(ctx context.Context, d *Delivery) error {
	if d.Last == nil {
		if err := s.Log.MarkDelivered(ctx, d.Key, d.LastAt, d.Attempts); err != nil {
			return fmt.Errorf("notify: mark %s delivered: %w", d.Key, err)
		}
		d.Status = StatusDelivered
		s.Metrics.Delivery(d.Notifier, metrics.OutcomeDelivered, "")
		return nil
	}
	if err := s.Log.MarkFailed(ctx, d.Key, failureRecord(d)); err != nil {
		return fmt.Errorf("notify: keep %s as a dead letter: %w", d.Key, err)
	}
	d.Status = StatusDeadLetter
	s.Metrics.Delivery(d.Notifier, metrics.OutcomeDeadLetter, d.Last.Reason)
	s.Logger.Warn("notification kept as a dead letter",
		"key", d.Key.String(), "notifier", d.Notifier, "attempts", d.Attempts,
		"reason", d.Last.Reason, "budget_exhausted", d.Exhausted, "error", d.Last.Err)
	return nil
}
