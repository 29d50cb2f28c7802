package notify

import (
	"context"
	"errors"
	"fmt"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"time"
)

// ErrInFlight is returned when another worker holds the delivery's claim: the delivery is
// neither lost nor sent twice, and the caller offers it again later (after the other worker
// settles it, or its lease runs out because it died).
var ErrInFlight = errors.New("notify: delivery claimed by another worker")

// DedupStage claims the delivery in the log. A delivery settled before is marked StatusDuplicate
// and sends nothing; one claimed elsewhere fails with ErrInFlight.
type DedupStage struct {
	Log deliverylog.Log
	// Lease is how long the claim keeps other workers off; it must outlast the retry budget.
	Lease time.Duration
	Now   func() time.Time
}

// Exec claims the delivery.
func (s DedupStage) Exec(ctx context.Context, d *Delivery) error {
	entry := deliverylog.Entry{Key: d.Key, Notifier: d.Notifier, Payload: d.Notification.Payload}
	state, err := s.Log.Claim(ctx, entry, s.Now(), s.Lease)
	if err != nil {
		return fmt.Errorf("notify: claim %s: %w", d.Key, err)
	}
	switch state {
	case deliverylog.Claimed:
		return nil
	case deliverylog.AlreadyDelivered, deliverylog.AlreadyFailed:
		d.Status = StatusDuplicate
		return nil
	case deliverylog.InFlight:
		return fmt.Errorf("%w: %s", ErrInFlight, d.Key)
	default:
		return fmt.Errorf("notify: claim %s: unknown answer %d", d.Key, state)
	}
}
