package sdk

import "time"

// SchemaVersion is the version of Payload that this SDK speaks. It is sent with every payload
// (and in the webhook's JSON); it changes only when a field changes meaning or disappears,
// together with a new plugin protocol version. Added fields do not change it.
const SchemaVersion = 1

// Trigger names what happened, as notification rules list them.
type Trigger string

// The triggers a notification rule can fire on.
const (
	OnStartedArtifact Trigger = "ON_STARTED_ARTIFACT"
	OnExitedArtifact  Trigger = "ON_EXITED_ARTIFACT"
	OnScaledArtifact  Trigger = "ON_SCALED_ARTIFACT"
	OnAllowedArtifact Trigger = "ON_ALLOWED_ARTIFACT"
	OnNonCompliantEnv Trigger = "ON_NON_COMPLIANT_ENV"
	OnCompliantEnv    Trigger = "ON_COMPLIANT_ENV"
)

// Triggers lists every trigger, in the order the interface specification names them.
func Triggers() []Trigger {
	return []Trigger{OnStartedArtifact, OnExitedArtifact, OnScaledArtifact, OnAllowedArtifact,
		OnNonCompliantEnv, OnCompliantEnv}
}

// Payload is what a notifier tells its target: which rule fired on which event. The webhook
// notifier sends it as JSON verbatim; other notifiers render it.
type Payload struct {
	SchemaVersion int `json:"schema_version"`
	// DeliveryID is the same for every attempt of one delivery (rule, target, event) and
	// different for any other: receivers use it to drop the duplicates at-least-once delivery
	// can cause.
	DeliveryID string `json:"delivery_id"`
	Rule       Rule   `json:"rule"`
	Event      Event  `json:"event"`
}

// Rule identifies the notification rule that fired.
type Rule struct {
	Org    string `json:"org"`
	Number int64  `json:"number"`
	Name   string `json:"name"`
}

// Event is what happened. Artifact triggers carry Artifact; environment triggers may not.
type Event struct {
	// ID identifies the event; one event fires every matching rule.
	ID          string      `json:"id"`
	Trigger     Trigger     `json:"trigger"`
	OccurredAt  time.Time   `json:"occurred_at"`
	Description string      `json:"description,omitempty"`
	Environment Environment `json:"environment"`
	Snapshot    *Snapshot   `json:"snapshot,omitempty"`
	Artifact    *Artifact   `json:"artifact,omitempty"`
}

// Environment is the environment the event happened in. Compliant is nil while no policy
// decides the environment's compliance.
type Environment struct {
	Name      string `json:"name"`
	Type      string `json:"type,omitempty"`
	HTMLURL   string `json:"html_url,omitempty"`
	Compliant *bool  `json:"compliant"`
}

// Snapshot is the environment snapshot that recorded the event.
type Snapshot struct {
	Index      int64     `json:"index"`
	Compliant  *bool     `json:"compliant"`
	ReportedAt time.Time `json:"reported_at"`
	HTMLURL    string    `json:"html_url,omitempty"`
}

// Artifact is the artifact an artifact trigger is about, with where it came from.
type Artifact struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	HTMLURL     string `json:"html_url,omitempty"`
	// Compliant is the artifact's compliance in the snapshot, nil when unknown.
	Compliant *bool `json:"compliant"`
	// InstancesBefore and InstancesNow are the running instance counts around the event
	// (0 before a start, 0 after an exit).
	InstancesBefore int64        `json:"instances_before"`
	InstancesNow    int64        `json:"instances_now"`
	Provenance      []Provenance `json:"provenance"`
}

// Provenance is one flow and trail that reported the artifact.
type Provenance struct {
	Flow      string `json:"flow"`
	Trail     string `json:"trail"`
	GitCommit string `json:"git_commit,omitempty"`
	CommitURL string `json:"commit_url,omitempty"`
	BuildURL  string `json:"build_url,omitempty"`
	HTMLURL   string `json:"html_url,omitempty"`
	Compliant *bool  `json:"compliant"`
}
