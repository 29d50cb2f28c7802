package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// Notifiers finds the notifier for a catalog name. notify/catalog implements it.
type Notifiers interface {
	Lookup(name string) (sdk.Notifier, error)
}

// SendStage makes one delivery attempt through the delivery's notifier, bounded by Timeout and
// by the delivery's deadline, and records its classified outcome in d.Last.
type SendStage struct {
	Notifiers Notifiers
	Timeout   time.Duration
	Now       func() time.Time
}

// Exec makes the attempt.
func (s SendStage) Exec(ctx context.Context, d *Delivery) error {
	d.Attempts++
	d.Notification.Attempt = d.Attempts
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
