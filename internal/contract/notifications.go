package contract

import (
	"encoding/json"
	"fmt"
)

// Notification rules are written like every other state: ingest publishes them on
// TopicEvidence, the evaluator applies them (and numbers new ones within their organization).
const (
	KindNotificationCreated Kind = "notification.created"
	KindNotificationUpdated Kind = "notification.updated"
	KindNotificationDeleted Kind = "notification.deleted"
)

// NotificationRule creates, replaces or (with only Number set) deletes an environment
// notification rule. Number is 0 on create: the evaluator assigns it.
type NotificationRule struct {
	ID           string               `json:"id"`
	Number       int64                `json:"number,omitempty"`
	Name         string               `json:"name,omitempty"`
	Environments []string             `json:"environments,omitempty"`
	Triggers     []string             `json:"triggers,omitempty"`
	Targets      []NotificationTarget `json:"targets,omitempty"`
}

// NotificationTarget is where a rule sends. ID is derived from the target's settings by
// ingest, so a target kept across an update keeps its ID (and its outcomes).
type NotificationTarget struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"` // WEBHOOK, SLACK, MS_TEAMS, EMAIL or PLUGIN
	URL     string            `json:"url,omitempty"`
	Secret  string            `json:"secret,omitempty"`
	Emails  []string          `json:"emails,omitempty"`
	Plugin  string            `json:"plugin,omitempty"`
	Context map[string]string `json:"context,omitempty"`
}

// NotificationsKey is the partition key of an organization's rule writes: they apply in
// order, so numbers are given in the order the rules were accepted.
func NotificationsKey(orgID string) string { return orgID + "/notifications" }

// TopicTriggers carries the triggers the evaluate tier raises (an artifact started, exited or
// scaled in an environment, was allowlisted there, or the environment's compliance changed)
// to the notify tier, in order per environment.
const TopicTriggers = "veritrail.triggers.v1"

// TriggerSchemaVersion is the version of Trigger.
const TriggerSchemaVersion = 1

// The triggers of the interface specification. The notify tier's plugins SDK names the same
// strings; this package repeats them to stay free of imports.
const (
	TriggerStartedArtifact = "ON_STARTED_ARTIFACT"
	TriggerExitedArtifact  = "ON_EXITED_ARTIFACT"
	TriggerScaledArtifact  = "ON_SCALED_ARTIFACT"
	TriggerAllowedArtifact = "ON_ALLOWED_ARTIFACT"
	TriggerNonCompliantEnv = "ON_NON_COMPLIANT_ENV"
	TriggerCompliantEnv    = "ON_COMPLIANT_ENV"
)

// Triggers lists every trigger in the order the specification names them.
func Triggers() []string {
	return []string{TriggerStartedArtifact, TriggerExitedArtifact, TriggerScaledArtifact, TriggerAllowedArtifact,
		TriggerNonCompliantEnv, TriggerCompliantEnv}
}

// Trigger is one event that notification rules may fire on. ID is stable: the evaluator
// derives it from what happened (or stores it in the outbox with the change), so a trigger
// published twice is the same trigger, and the notify tier's delivery log deduplicates it.
type Trigger struct {
	ID          string              `json:"id"`
	Version     int                 `json:"version"`
	OrgID       string              `json:"org_id"`
	EnvID       string              `json:"env_id"`
	Trigger     string              `json:"trigger"`
	At          float64             `json:"at"` // unix seconds when it happened
	Description string              `json:"description,omitempty"`
	Environment TriggerEnvironment  `json:"environment"`
	Snapshot    *TriggerSnapshot    `json:"snapshot,omitempty"`
	Artifact    *TriggerArtifact    `json:"artifact,omitempty"`
	Allowlisted *TriggerAllowlisted `json:"allowlisted,omitempty"`
}

// TriggerEnvironment is the environment a trigger happened in. Compliant is nil while no
// policy decides it.
type TriggerEnvironment struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Compliant *bool  `json:"compliant"`
}

// TriggerSnapshot is the snapshot that recorded an artifact trigger.
type TriggerSnapshot struct {
	Index     int     `json:"index"`
	Compliant *bool   `json:"compliant"`
	At        float64 `json:"at"`
}

// TriggerArtifact is the artifact an artifact trigger is about.
type TriggerArtifact struct {
	Name            string              `json:"name"`
	Fingerprint     string              `json:"fingerprint"`
	Compliant       *bool               `json:"compliant"`
	InstancesBefore int                 `json:"instances_before"`
	InstancesNow    int                 `json:"instances_now"`
	Provenance      []TriggerProvenance `json:"provenance,omitempty"`
}

// TriggerProvenance is a flow and trail that reported the artifact.
type TriggerProvenance struct {
	Flow       string `json:"flow"`
	Trail      string `json:"trail"`
	ArtifactID string `json:"artifact_id,omitempty"`
	GitCommit  string `json:"git_commit,omitempty"`
	CommitURL  string `json:"commit_url,omitempty"`
	Compliant  *bool  `json:"compliant"`
}

// TriggerAllowlisted is the allowlist entry of an ON_ALLOWED_ARTIFACT trigger.
type TriggerAllowlisted struct {
	By          string `json:"by"`
	Description string `json:"description"`
}

// PartitionKey orders the triggers of one environment, like its evidence.
func (t *Trigger) PartitionKey() string { return EnvironmentKey(t.OrgID, t.EnvID) }

// MarshalTrigger encodes a trigger, stamping the schema version.
func MarshalTrigger(t *Trigger) ([]byte, error) {
	t.Version = TriggerSchemaVersion
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("contract: marshal trigger %s: %w", t.Trigger, err)
	}
	return b, nil
}

// UnmarshalTrigger decodes and checks a trigger.
func UnmarshalTrigger(b []byte) (*Trigger, error) {
	var t Trigger
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("contract: decode trigger: %w", err)
	}
	if t.Version > TriggerSchemaVersion {
		return nil, fmt.Errorf("contract: trigger version %d is newer than %d", t.Version, TriggerSchemaVersion)
	}
	if t.ID == "" || t.OrgID == "" || t.Trigger == "" {
		return nil, fmt.Errorf("contract: trigger %q lacks id, org or trigger", t.ID)
	}
	return &t, nil
}
