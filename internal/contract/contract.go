// Package contract is the message contract between the ingest tier and the evaluate tier: the
// topic, the metadata keys, the partition key and the versioned event payloads. It imports
// nothing else from the repository so that both sides, and any future consumer, can depend on it.
package contract

import (
	"bytes"
	"encoding/json"
	"fmt"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// SchemaVersion is the version of Envelope. A consumer refuses messages with a newer major
// version rather than guessing at their meaning.
const SchemaVersion = 1

// TopicEvidence carries every write accepted by ingest, in order per partition key.
const TopicEvidence = "veritrail.evidence.v1"

// Metadata keys set on every bus message.
const (
	// MetaPartitionKey is read by the Kafka adapter to choose the partition.
	MetaPartitionKey = "partition_key"
	MetaKind         = "vt_kind"
	MetaOrg          = "vt_org"
	MetaSchema       = "vt_schema"
)

// Kind names what a message asks the evaluator to do.
type Kind string

const (
	KindFlowUpserted        Kind = "flow.upserted"
	KindFlowRenamed         Kind = "flow.renamed"
	KindFlowArchived        Kind = "flow.archived"
	KindFlowTagged          Kind = "flow.tagged"
	KindTrailBegun          Kind = "trail.begun"
	KindArtifactReported    Kind = "artifact.reported"
	KindAttestationReported Kind = "attestation.reported"
	KindCustomTypeCreated   Kind = "custom_type.created"
	KindCustomTypeArchived  Kind = "custom_type.archived"

	KindEnvironmentUpserted Kind = "environment.upserted"
	KindEnvironmentChanged  Kind = "environment.changed" // rename, archive, join, field updates
	KindSnapshotReported    Kind = "snapshot.reported"
	KindAllowlisted         Kind = "environment.allowlisted"
	KindApprovalReported    Kind = "approval.reported"
	KindControlChanged      Kind = "control.changed" // create, new version, archive, unarchive, tags
	KindRepoTagged          Kind = "repo.tagged"
)

// Actor is who made the request that produced a message.
type Actor struct {
	KeyID string `json:"key_id"`
	Name  string `json:"name"` // display name shown as created_by / reported_by
}

// Envelope is the payload of one bus message. Exactly one of the pointer fields matches Kind.
type Envelope struct {
	ID      string  `json:"id"` // idempotency key: the evaluator applies each ID once
	Kind    Kind    `json:"kind"`
	Version int     `json:"version"`
	OrgID   string  `json:"org_id"`
	Actor   Actor   `json:"actor"`
	At      float64 `json:"at"` // unix seconds when ingest accepted the request
	// Request is the API request behind the message; the evaluator writes it to the audit log
	// in the transaction that applies the message.
	Request *Request `json:"request,omitempty"`

	Flow        *FlowUpsert       `json:"flow,omitempty"`
	FlowRename  *FlowRename       `json:"flow_rename,omitempty"`
	FlowArchive *FlowRef          `json:"flow_archive,omitempty"`
	FlowTags    *FlowTags         `json:"flow_tags,omitempty"`
	RepoTags    *RepoTags         `json:"repo_tags,omitempty"`
	Trail       *TrailBegin       `json:"trail,omitempty"`
	Artifact    *ArtifactReport   `json:"artifact,omitempty"`
	Attestation *AttestationInput `json:"attestation,omitempty"`
	CustomType  *CustomTypeCreate `json:"custom_type,omitempty"`
	TypeArchive *CustomTypeRef    `json:"custom_type_archive,omitempty"`

	Environment *EnvironmentUpsert `json:"environment,omitempty"`
	EnvChange   *EnvironmentChange `json:"environment_change,omitempty"`
	Snapshot    *SnapshotReport    `json:"snapshot,omitempty"`
	Allow       *AllowlistEntry    `json:"allow,omitempty"`
	Approval    *ApprovalReport    `json:"approval,omitempty"`
	Control     *ControlChange     `json:"control,omitempty"`

	Notification *NotificationRule `json:"notification,omitempty"`
	Policy       *PolicyVersion    `json:"policy,omitempty"`
	Attach       *PolicyAttachment `json:"attach,omitempty"`
}

// PartitionKey returns the key that orders this message: all messages about one trail share
// a key, so they are applied in the order ingest accepted them.
func (e *Envelope) PartitionKey() string {
	switch {
	case e.Trail != nil:
		return TrailKey(e.OrgID, e.Trail.FlowID, e.Trail.Name)
	case e.Artifact != nil:
		return TrailKey(e.OrgID, e.Artifact.FlowID, e.Artifact.TrailName)
	case e.Attestation != nil:
		return TrailKey(e.OrgID, e.Attestation.FlowID, e.Attestation.TrailName)
	case e.Flow != nil:
		return FlowKey(e.OrgID, e.Flow.ID)
	case e.FlowRename != nil:
		return FlowKey(e.OrgID, e.FlowRename.FlowID)
	case e.FlowArchive != nil:
		return FlowKey(e.OrgID, e.FlowArchive.FlowID)
	case e.FlowTags != nil:
		return FlowKey(e.OrgID, e.FlowTags.FlowID)
	case e.Environment != nil:
		return EnvironmentKey(e.OrgID, e.Environment.ID)
	case e.EnvChange != nil:
		return EnvironmentKey(e.OrgID, e.EnvChange.EnvID)
	case e.Snapshot != nil:
		return EnvironmentKey(e.OrgID, e.Snapshot.EnvID)
	case e.Allow != nil:
		return EnvironmentKey(e.OrgID, e.Allow.EnvID)
	case e.Attach != nil: // in order with the environment's reports
		return EnvironmentKey(e.OrgID, e.Attach.EnvID)
	case e.Policy != nil:
		return PolicyKey(e.OrgID, e.Policy.Name)
	case e.Approval != nil:
		return FlowKey(e.OrgID, e.Approval.FlowID) // numbers count up per flow, in order
	case e.Control != nil:
		return e.OrgID + "/control/" + e.Control.Identifier
	case e.Notification != nil:
		return NotificationsKey(e.OrgID)
	case e.CustomType != nil:
		return e.OrgID + "/custom-type/" + e.CustomType.Name
	case e.TypeArchive != nil:
		return e.OrgID + "/custom-type/" + e.TypeArchive.Name
	case e.RepoTags != nil:
		return e.OrgID + "/repo/" + e.RepoTags.RepoID
	}
	return e.OrgID
}

// Scopes names what the message may change, for reads that depend on part of an organization
// (read after write waits only for the writes of the scopes a read depends on): a trail's
// messages its trail's key, an artifact's evidence also the artifact's FingerprintScope, an
// environment's reports and policy attachments its key. Every other message may change anything
// of its organization and names none.
func (e *Envelope) Scopes() []string {
	switch {
	case e.Trail != nil:
		return []string{TrailKey(e.OrgID, e.Trail.FlowID, e.Trail.Name)}
	case e.Artifact != nil:
		return []string{TrailKey(e.OrgID, e.Artifact.FlowID, e.Artifact.TrailName), FingerprintScope(e.OrgID, e.Artifact.Fingerprint)}
	case e.Attestation != nil:
		t := TrailKey(e.OrgID, e.Attestation.FlowID, e.Attestation.TrailName)
		if fp := e.Attestation.ArtifactFingerprint; fp != "" {
			return []string{t, FingerprintScope(e.OrgID, fp)}
		}
		return []string{t}
	case e.Snapshot != nil:
		return []string{EnvironmentKey(e.OrgID, e.Snapshot.EnvID)}
	case e.Allow != nil:
		return []string{EnvironmentKey(e.OrgID, e.Allow.EnvID)}
	case e.Attach != nil:
		return []string{EnvironmentKey(e.OrgID, e.Attach.EnvID)}
	}
	return nil
}

// FingerprintScope is the scope of the evidence about one artifact (see Envelope.Scopes).
func FingerprintScope(orgID, fingerprint string) string { return orgID + "/fingerprint/" + fingerprint }

// TrailKey is the partition key of a trail. Flow IDs, not names, keep it stable across renames.
func TrailKey(orgID, flowID, trail string) string { return orgID + "/" + flowID + "/" + trail }

// EnvironmentKey is the partition key of an environment: its reports apply in order.
func EnvironmentKey(orgID, envID string) string { return orgID + "/env/" + envID }

// FlowKey is the partition key of flow-level changes.
func FlowKey(orgID, flowID string) string { return orgID + "/" + flowID }

// Marshal encodes the envelope, stamping the schema version.
func Marshal(e *Envelope) ([]byte, error) {
	e.Version = SchemaVersion
	if b, ok := marshalAttestation(e); ok {
		return b, nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("contract: marshal %s: %w", e.Kind, err)
	}
	return b, nil
}

// marshalAttestation encodes an attestation's envelope with its Data copied as it is, where
// json.Marshal would scan the whole of it again to validate and compact it (about 5 us of a
// 1 KB attestation, BenchmarkMarshalAttestation). Data must be valid JSON: ingest builds it from values it decoded
// (Unmarshal checks it on the other side). Anything but an attestation envelope whose Data is
// an object and its last field falls back to json.Marshal (ok false).
func marshalAttestation(e *Envelope) ([]byte, bool) {
	a := e.Attestation
	if a == nil || len(a.Data) < 2 || a.Data[0] != '{' || a.Data[len(a.Data)-1] != '}' {
		return nil, false
	}
	env, att := *e, *a
	att.Data = json.RawMessage("0") // a one-byte stand-in, replaced below
	env.Attestation = &att
	b, err := json.Marshal(&env)
	if err != nil {
		return nil, false
	}
	const tail = `"data":0}}` // Data closes the attestation, and the attestation the envelope
	if !bytes.HasSuffix(b, []byte(tail)) {
		return nil, false
	}
	out := make([]byte, 0, len(b)+len(a.Data))
	out = append(out, b[:len(b)-len(`0}}`)]...)
	out = append(out, a.Data...)
	return append(out, '}', '}'), true
}

// Unmarshal decodes and checks an envelope.
func Unmarshal(b []byte) (*Envelope, error) {
	var e Envelope
	// The v1 semantics of encoding/json, on the v2 decoder: the evaluator decodes every message, and
	// this one is 3-4 times faster on an attestation's (it validates and copies data_json in one pass).
	if err := jsonv1.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("contract: decode envelope: %w", err)
	}
	if e.Version > SchemaVersion {
		return nil, fmt.Errorf("contract: envelope version %d is newer than %d", e.Version, SchemaVersion)
	}
	if e.ID == "" || e.OrgID == "" {
		return nil, fmt.Errorf("contract: envelope %q lacks id or org", e.Kind)
	}
	return &e, nil
}

// FlowUpsert creates a flow or updates its description, visibility and template.
type FlowUpsert struct {
	ID          string `json:"id"` // used when the flow is new
	Name        string `json:"name"`
	Description string `json:"description"`
	Visibility  string `json:"visibility"`
	Template    string `json:"template"` // validated YAML
	TemplateID  string `json:"template_id"`
}

// FlowRename renames a flow.
type FlowRename struct {
	FlowID  string `json:"flow_id"`
	NewName string `json:"new_name"`
}

// FlowRef names a flow by ID.
type FlowRef struct {
	FlowID string `json:"flow_id"`
}

// RepoTags sets and removes tags of a repository, by its inner id.
type RepoTags struct {
	RepoID     string            `json:"repo_id"`
	SetTags    map[string]string `json:"set_tags,omitempty"`
	RemoveTags []string          `json:"remove_tags,omitempty"`
}

// FlowTags sets and removes tags of a flow.
type FlowTags struct {
	FlowID     string            `json:"flow_id"`
	SetTags    map[string]string `json:"set_tags,omitempty"`
	RemoveTags []string          `json:"remove_tags,omitempty"`
}

// TrailBegin creates or updates a trail.
type TrailBegin struct {
	ID            string          `json:"id"` // used when the trail is new
	FlowID        string          `json:"flow_id"`
	Name          string          `json:"name"`
	Description   *string         `json:"description,omitempty"`
	GitCommitInfo json.RawMessage `json:"git_commit_info,omitempty"`
	RepoInfo      json.RawMessage `json:"repo_info,omitempty"`
	OriginURL     *string         `json:"origin_url,omitempty"`
	ExternalURLs  json.RawMessage `json:"external_urls,omitempty"`
	UserData      json.RawMessage `json:"user_data,omitempty"`
	Template      string          `json:"template,omitempty"` // the trail's own template, when given
	TemplateID    string          `json:"template_id,omitempty"`
}

// ArtifactReport records an artifact in a trail. Report is the validated request body as sent.
type ArtifactReport struct {
	ID           string          `json:"id"`
	FlowID       string          `json:"flow_id"`
	TrailName    string          `json:"trail_name"`
	Fingerprint  string          `json:"fingerprint"`
	TemplateName string          `json:"template_reference_name"`
	Report       json.RawMessage `json:"report"`
}

// AttestationInput records one attestation. Data is the validated data_json as sent; the
// evaluator keeps it for reads. IsCompliant is decided at ingest (custom types run there,
// where a bad payload can still be refused with a 400).
type AttestationInput struct {
	ID                  string    `json:"id"`
	FlowID              string    `json:"flow_id"`
	TrailName           string    `json:"trail_name"`
	Name                string    `json:"name"`
	Type                string    `json:"type"`
	IsCompliant         bool      `json:"is_compliant"`
	ArtifactFingerprint string    `json:"artifact_fingerprint,omitempty"`
	TargetArtifact      string    `json:"target_artifact,omitempty"`
	Overrides           *Override `json:"overrides,omitempty"`
	Evidence            *BlobRef  `json:"evidence,omitempty"`
	// RepoInfo is the data's repo_info, which ingest decodes anyway: the evaluator records the
	// repository from it instead of reading the data again. Messages of earlier builds lack
	// it, and then the evaluator reads the data.
	RepoInfo json.RawMessage `json:"repo_info,omitempty"`
	// Data stays the last field: Marshal copies it in at the end (marshalAttestation).
	Data json.RawMessage `json:"data"`
}

// Override replaces the compliance of an earlier attestation of the same name.
type Override struct {
	AttestationID string `json:"attestation_id"`
	Reason        string `json:"reason"`
}

// BlobRef points at an attachment kept in the blob store; the bus never carries file bodies.
type BlobRef struct {
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
	Filename string `json:"filename"`
}

// CustomTypeCreate adds a custom attestation type or a new version of it.
type CustomTypeCreate struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Schema      string   `json:"schema"`
	Rules       []string `json:"rules"`
	// Summary is the type's named jq expressions in order; absent when it has none (and in
	// messages from builds before summaries).
	Summary []SummaryExpr `json:"summary,omitempty"`
}

// SummaryExpr is one named jq expression of a custom type's summary.
type SummaryExpr struct {
	Name       string `json:"name"`
	Expression string `json:"expression"`
}

// CustomTypeRef names a custom attestation type.
type CustomTypeRef struct {
	Name string `json:"name"`
}

// EnvironmentUpsert creates an environment or replaces its settings (PUT /environments/{org}).
type EnvironmentUpsert struct {
	ID                   string   `json:"id"` // used when the environment is new
	Name                 string   `json:"name"`
	Type                 string   `json:"type"`
	Description          string   `json:"description"`
	IncludeScaling       bool     `json:"include_scaling"`
	RequireProvenance    bool     `json:"require_provenance"`
	IncludedEnvironments []string `json:"included_environments,omitempty"` // physical environment IDs of a logical one
}

// EnvironmentChange changes one environment; only the fields set apply.
type EnvironmentChange struct {
	EnvID          string            `json:"env_id"`
	NewName        *string           `json:"new_name,omitempty"`
	Archive        bool              `json:"archive,omitempty"`
	Description    *string           `json:"description,omitempty"`
	IncludeScaling *bool             `json:"include_scaling,omitempty"`
	JoinPhysical   string            `json:"join_physical,omitempty"` // physical environment ID joined to this logical one
	SetTags        map[string]string `json:"set_tags,omitempty"`
	RemoveTags     []string          `json:"remove_tags,omitempty"`
}

// SnapshotReport is the full running set an environment reporter saw.
type SnapshotReport struct {
	EnvID     string            `json:"env_id"`
	Type      string            `json:"type"` // the report path's type (K8S, ECS, ...)
	Instances []RunningInstance `json:"instances"`
}

// RunningInstance is one running artifact instance of a report.
type RunningInstance struct {
	Name              string         `json:"name"`
	Fingerprint       string         `json:"fingerprint"`
	CreationTimestamp float64        `json:"creation_timestamp,omitempty"`
	Context           map[string]any `json:"context,omitempty"`
}

// AllowlistEntry allows a fingerprint to run in an environment.
type AllowlistEntry struct {
	ID           string `json:"id"`
	EnvID        string `json:"env_id"`
	Fingerprint  string `json:"fingerprint"`
	ArtifactName string `json:"artifact_name"`
	Description  string `json:"description"`
}

// ApprovalReport records a release of an artifact (to an environment), with the approvals
// given so far; the evaluator numbers it within its flow.
type ApprovalReport struct {
	ID            string          `json:"id"`
	FlowID        string          `json:"flow_id"`
	Fingerprint   string          `json:"fingerprint"`
	ArtifactName  string          `json:"artifact_name"`
	BaseArtifact  string          `json:"base_artifact"`
	Environment   string          `json:"environment,omitempty"`
	Description   string          `json:"description"`
	SrcCommitList json.RawMessage `json:"src_commit_list"`
	Approvals     json.RawMessage `json:"approvals"`
	State         string          `json:"state"`
	UserData      json.RawMessage `json:"user_data,omitempty"`
}

// ControlOp is what a ControlChange does.
type ControlOp string

const (
	ControlCreate    ControlOp = "create"
	ControlUpdate    ControlOp = "update" // a new version; nil fields keep the current value
	ControlArchive   ControlOp = "archive"
	ControlUnarchive ControlOp = "unarchive"
	ControlTag       ControlOp = "tag"
)

// ControlChange creates or changes a control of the organization.
type ControlChange struct {
	Identifier  string    `json:"identifier"`
	Op          ControlOp `json:"op"`
	Name        *string   `json:"name,omitempty"`
	Description *string   `json:"description,omitempty"`
	// Links replaces the control's links when present (an empty object removes them all).
	Links      *map[string]string `json:"links,omitempty"`
	SetTags    map[string]string  `json:"set_tags,omitempty"`
	RemoveTags []string           `json:"remove_tags,omitempty"`
}
