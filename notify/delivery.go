package notify

import (
	"github.com/veritrail/veritrail/internal/deliverylog"
	"strconv"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// Status is where a delivery stands.
type Status int

// The statuses of a delivery. Only StatusPending deliveries move through the stages.
const (
	// StatusPending: not settled yet.
	StatusPending Status = iota
	// StatusDelivered: this run delivered it.
	StatusDelivered
	// StatusDuplicate: an earlier run delivered it or kept it as a dead letter; nothing was sent.
	StatusDuplicate
	// StatusDeadLetter: a permanent failure or an exhausted budget; it is kept in the log,
	// visible.
	StatusDeadLetter
)

func (s Status) String() string {
	switch s {
	case StatusPending:
		return "pending"
	case StatusDelivered:
		return "delivered"
	case StatusDuplicate:
		return "duplicate"
	case StatusDeadLetter:
		return "dead letter"
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Delivery is one notification on its way through the pipeline. Route creates it; the stages
// fill in the rest.
type Delivery struct {
	Key deliverylog.Key
	// Notifier is the catalog name of the notifier for the target.
	Notifier     string
	Notification sdk.Notification

	// Status is set by the dedup stage (StatusDuplicate) and the settle stage.
	Status Status
	// Deadline is the end of the delivery's time budget, set by the retry stage.
	Deadline time.Time
	// Attempts counts the attempts made by this run.
	Attempts int
	// Last is the last attempt's failure, classified; nil after a success.
	Last *sdk.Failure
	// LastAt is when the last attempt ended.
	LastAt time.Time
	// Exhausted is set when the budget ended before a retryable failure could be retried.
	Exhausted bool
}
