// Package deliverylog defines the notify tier's persistent delivery log: what it records of each
// delivery (deduplication, dead letters, each rule target's outcomes). It is defined apart from
// notify so that the store implements it without importing a tier; notify's pipeline uses it,
// and ingest reads the outcomes it records.
package deliverylog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// Log is the persistent delivery log the pipeline needs: it deduplicates deliveries, keeps the
// messages that could not be delivered, and records each rule target's outcomes. The SQL store
// implements it; memlog is an in-memory one for tests, and logtest is the
// conformance suite every implementation passes.
//
// Every method is one atomic write (one transaction) and safe for concurrent use by several
// processes. Times are the caller's (the pipeline's clock), so all workers' times compare.
type Log interface {
	// Claim takes the delivery e.Key for the caller until now+lease and says how it stands:
	//
	//   - Claimed: the caller now owns it. It was new (e is stored: it is what a dead letter
	//     shows later), or an earlier claim's lease ran out (the worker died or gave up); then
	//     the stored entry is kept and only the lease renewed.
	//   - AlreadyDelivered or AlreadyFailed: it was settled before; the caller sends nothing.
	//   - InFlight: another claim holds an unexpired lease; the caller sends nothing now and
	//     offers the delivery again later.
	Claim(ctx context.Context, e Entry, now time.Time, lease time.Duration) (ClaimState, error)

	// RecordFailure records a failed attempt of a claimed delivery: the target's
	// last_failure_at becomes f.At (unless a later failure is already recorded), so the
	// target and its rule read as failing while the delivery is still being retried. The
	// delivery stays claimed.
	RecordFailure(ctx context.Context, key Key, f Failure) error

	// MarkDelivered settles a claimed delivery as delivered and, in the same transaction, sets
	// the target's last_success_at to at (unless a later success is already recorded). A
	// delivery that is already settled stays as it was.
	MarkDelivered(ctx context.Context, key Key, at time.Time, attempts int) error

	// MarkFailed settles a claimed delivery as a dead letter, keeping its entry and f for
	// ListDeadLetters, and records f as the target's failure like RecordFailure. A delivery that
	// is already settled stays as it was.
	MarkFailed(ctx context.Context, key Key, f Failure) error

	// ListDeadLetters returns up to limit dead letters of org, most recent failure first.
	ListDeadLetters(ctx context.Context, org string, limit int) ([]DeadLetter, error)
}

// Outcomes reads what the log recorded about a rule's targets: what the API shows as a rule's
// and its targets' last_success_at, last_failure_at and is_failing (see Summarize).
type Outcomes interface {
	// TargetOutcomes returns the outcome of every target of the rule that has had an attempt,
	// ordered by target ID.
	TargetOutcomes(ctx context.Context, org string, rule int64) ([]TargetOutcome, error)
}

// ClaimState is the answer of Log.Claim.
type ClaimState int

// The answers of Log.Claim.
const (
	Claimed ClaimState = iota + 1
	AlreadyDelivered
	AlreadyFailed
	InFlight
)

func (s ClaimState) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case AlreadyDelivered:
		return "already delivered"
	case AlreadyFailed:
		return "already failed"
	case InFlight:
		return "in flight"
	}
	return "unknown claim state"
}

// Entry is what the log keeps of a delivery. The target's own settings (URL, secret) are not
// copied: they stay with the rule, and Key.Target names the target.
type Entry struct {
	Key      Key
	Notifier string
	Payload  sdk.Payload
}

// Failure is one failed attempt, or the final failure of a dead letter.
type Failure struct {
	At time.Time
	// Attempts is the number of attempts made so far by the run that failed.
	Attempts  int
	Retryable bool
	// Reason is the notifier's short cause (sdk.Reason*). When the budget ran out it is the
	// last attempt's reason, and Exhausted is set.
	Reason    string
	Message   string
	Exhausted bool
}

// DeadLetter is a delivery that was given up on: kept, with why, for people to see and act on.
type DeadLetter struct {
	Entry
	Failure
}

// TargetOutcome is what the log knows about one target of a rule. A zero time means never.
type TargetOutcome struct {
	Target        string
	LastSuccessAt time.Time
	LastFailureAt time.Time
	// LastFailureReason and LastFailureMessage describe the failure at LastFailureAt.
	LastFailureReason  string
	LastFailureMessage string
}

// IsFailing reports whether the target's latest outcome is a failure.
func (o TargetOutcome) IsFailing() bool {
	return o.LastFailureAt.After(o.LastSuccessAt)
}

// RuleOutcome is a rule's outcome as the API shows it. Nil fields mean "never" (the API's null).
type RuleOutcome struct {
	LastSuccessAt *time.Time
	LastFailureAt *time.Time
	IsFailing     *bool
}

// Summarize derives a rule's outcome from its targets': the latest success and failure of any
// target, and failing while any target's latest outcome is a failure, so one broken target of
// several is not hidden by its healthy siblings. A rule with no attempts yet has no outcome.
func Summarize(targets []TargetOutcome) RuleOutcome {
	var r RuleOutcome
	if len(targets) == 0 {
		return r
	}
	failing := false
	for _, t := range targets {
		if !t.LastSuccessAt.IsZero() && (r.LastSuccessAt == nil || t.LastSuccessAt.After(*r.LastSuccessAt)) {
			at := t.LastSuccessAt
			r.LastSuccessAt = &at
		}
		if !t.LastFailureAt.IsZero() && (r.LastFailureAt == nil || t.LastFailureAt.After(*r.LastFailureAt)) {
			at := t.LastFailureAt
			r.LastFailureAt = &at
		}
		failing = failing || t.IsFailing()
	}
	r.IsFailing = &failing
	return r
}

// Key identifies one delivery: one event sent to one target of one rule. The delivery log is
// keyed by it, so an event redelivered by the bus, or routed twice, is delivered once.
type Key struct {
	Org    string
	Rule   int64  // the rule's number within its organization
	Target string // sdk.Target.ID
	Event  string // sdk.Event.ID
}

func (k Key) String() string {
	return k.Org + "/" + strconv.FormatInt(k.Rule, 10) + "/" + k.Target + "/" + k.Event
}

// DeliveryID is the receiver-facing identity of the delivery (sdk.Payload.DeliveryID): stable
// across retries and redeliveries, and revealing nothing about the organization's names.
func (k Key) DeliveryID() string {
	h := sha256.New()
	for _, part := range []string{k.Org, strconv.FormatInt(k.Rule, 10), k.Target, k.Event} {
		// Length prefixes keep ("a/b", "c") and ("a", "b/c") apart.
		h.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Delivery is one delivery as the log holds it: its entry, and how it stands now.
type Delivery struct {
	Entry
	State DeliveryState
	// Attempts, At (when it was delivered or given up on, or when its latest attempt failed
	// while it is still pending) and the latest failure's Reason and Message.
	Attempts        int
	At              time.Time
	Reason, Message string
}

// DeliveryState is where a delivery stands.
type DeliveryState int

// The states of a delivery.
const (
	// Pending is claimed and not settled: being sent, or waiting for its next attempt.
	Pending DeliveryState = iota
	Delivered
	// GivenUp is a dead letter.
	GivenUp
)
