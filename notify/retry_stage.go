package notify

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/veritrail/veritrail/internal/metrics"
)

// RetryStage runs Attempt until it delivers, fails permanently, or the delivery's time budget
// would end before the next attempt could start. Between attempts it waits the exponential
// backoff with jitter, or the receiver's Retry-After when that is longer; a Retry-After beyond
// the budget ends the delivery at once rather than waiting for nothing.
type RetryStage struct {
	Attempt Stage
	// Budget is the total time a delivery may take, from its first attempt in this run.
	Budget time.Duration
	// NewBackOff returns the wait sequence of one delivery (a BackOff holds state).
	NewBackOff func() backoff.BackOff
	Now        func() time.Time
	Logger     *slog.Logger
	// Metrics counts the deliveries waiting to retry; nil counts nothing.
	Metrics *metrics.Notify
}

// Exec retries d's attempts within the budget.
func (s RetryStage) Exec(ctx context.Context, d *Delivery) error {
	d.Deadline = s.Now().Add(s.Budget)
	b := s.NewBackOff()
	for {
		if err := s.Attempt.Exec(ctx, d); err != nil {
			return err
		}
		if d.Last == nil || !d.Last.Retryable {
			return nil
		}
		wait := b.NextBackOff()
		if d.Last.RetryAfter > wait {
			wait = d.Last.RetryAfter
		}
		if wait == backoff.Stop || s.Now().Add(wait).After(d.Deadline) {
			d.Exhausted = true
			return nil
		}
		s.Logger.Debug("notification attempt failed; retrying",
			"key", d.Key.String(), "attempt", d.Attempts, "reason", d.Last.Reason, "wait", wait, "error", d.Last.Err)
		t := time.NewTimer(wait)
		s.Metrics.RetryWaiting(1)
		select {
		case <-ctx.Done():
			t.Stop()
			s.Metrics.RetryWaiting(-1)
			return fmt.Errorf("notify: waiting to retry %s: %w", d.Key, context.Cause(ctx))
		case <-t.C:
		}
		s.Metrics.RetryWaiting(-1)
	}
}
