package store

import (
	"context"
	"encoding/json"
)

// NotificationRule is an environment notification rule. Number counts from 1 per organization
// and is never reused: the delivery log and the outcomes are keyed by it.
type NotificationRule struct {
	ID             string
	OrgID          string
	Number         int64
	Name           string
	Environments   []string
	Triggers       []string
	Targets        []NotificationTarget
	CreatedBy      string
	CreatedAt      float64
	LastModifiedAt float64
}

// NotificationTarget is where a rule sends. Secret signs webhooks; it is never shown.
type NotificationTarget struct {
	ID      string
	Type    string
	URL     string
	Secret  string
	Emails  []string
	Plugin  string
	Context map[string]string
}

// NotificationReader reads notification rules.
type NotificationReader interface {
	// NotificationRules lists the organization's rules (deleted ones excluded), by number.
	NotificationRules(ctx context.Context, orgID string) ([]NotificationRule, error)
	NotificationRule(ctx context.Context, orgID string, number int64) (NotificationRule, error)
	NotificationRuleByID(ctx context.Context, orgID, id string) (NotificationRule, error)
}

// Trigger is a row of the trigger outbox: a notification trigger written in the same
// transaction as the change it derives from, waiting to be published on the bus. Payload is
// the message as published (a contract.Trigger), Metadata what its message carries besides the
// relay's own keys (the trace context of the change it derives from); nil for nothing.
type Trigger struct {
	// Seq orders the outbox; the store assigns it.
	Seq      int64
	ID       string
	OrgID    string
	EnvID    string
	At       float64
	Payload  json.RawMessage
	Metadata map[string]string
}

// NotificationWriter is what the evaluator writes about notifications.
type NotificationWriter interface {
	// InsertNotificationRule stores r with the next number of its organization (deleted rules
	// keep theirs) and returns that number.
	InsertNotificationRule(ctx context.Context, r NotificationRule) (int64, error)
	// UpdateNotificationRule replaces the rule r.Number of r.OrgID, keeping its ID, creator and
	// creation time; ErrNotFound when it does not exist or was deleted.
	UpdateNotificationRule(ctx context.Context, r NotificationRule) error
	// DeleteNotificationRule deletes a rule; ErrNotFound when it does not exist or was deleted.
	DeleteNotificationRule(ctx context.Context, orgID string, number int64, at float64) error
	// EnqueueTriggers adds triggers to the outbox, in order, in one round trip.
	EnqueueTriggers(ctx context.Context, triggers []Trigger) error
}

// TriggerOutbox is the relay's side of the outbox.
type TriggerOutbox interface {
	// RelayTriggers hands up to limit pending triggers, oldest first, to publish, and marks
	// them sent once publish returns nil; on an error they stay pending. Only one caller at a
	// time relays (across processes too): another one gets 0 and nil meanwhile, so the order
	// of the outbox is the order of the bus.
	RelayTriggers(ctx context.Context, limit int, publish func(context.Context, []Trigger) error) (int, error)
	// PruneTriggers deletes triggers sent before the given time.
	PruneTriggers(ctx context.Context, sentBefore float64) (int64, error)
}
