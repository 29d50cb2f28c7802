package sdk

import "context"

// Notifier delivers notifications to one kind of target. Built-in notifiers and plugins
// implement it alike; the host calls it in-process or through the gRPC contract.
//
// Implementations must be safe for concurrent use: the host delivers several notifications
// at once.
type Notifier interface {
	// Configure receives the operator's settings for this notifier. The host calls it before
	// the first Notify and again after every restart of a plugin process. An unknown or invalid
	// setting is an error, which stops the notifier from being used.
	Configure(ctx context.Context, settings map[string]string) error

	// Notify makes exactly one delivery attempt and reports how it went: nil when the target
	// accepted the message, else an error classified with Retryable or Permanent (see Failure).
	// The host owns retries, backoff and deduplication; a notifier never retries on its own.
	// It must give up when ctx is done.
	Notify(ctx context.Context, n *Notification) error
}

// Notification is one delivery attempt of a payload to a target.
type Notification struct {
	Target  Target
	Payload Payload
	// Attempt is 1 for the first attempt of a delivery and grows with each retry.
	Attempt int
}

// TargetType names the kind of a target, as rules list them.
type TargetType string

// The target types of a notification rule.
const (
	TargetWebhook TargetType = "WEBHOOK"
	TargetSlack   TargetType = "SLACK"
	TargetTeams   TargetType = "MS_TEAMS"
	TargetEmail   TargetType = "EMAIL"
	TargetPlugin  TargetType = "PLUGIN"
)

// Target is where a rule sends its notifications. Which fields matter depends on Type: URL for
// webhook and chat targets (and plugins that post somewhere), Secret for signed webhooks,
// Recipients for e-mail, Plugin for plugin targets; Params carries anything else a notifier
// understands (for example Slack's channel_id).
type Target struct {
	// ID identifies the target within its rule and stays the same while the rule keeps it.
	ID         string
	Type       TargetType
	URL        string
	Secret     string
	Recipients []string
	// Plugin is the catalog name of the notifier serving a PLUGIN target.
	Plugin string
	Params map[string]string
}
