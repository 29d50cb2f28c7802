package store

import (
	"context"
	"encoding/json"
)

// Environment is where artifacts run. A logical environment has no reporter of its own: its
// snapshots are the union of its physical members' (Included, by ID).
type Environment struct {
	ID                string
	OrgID             string
	Name              string
	Type              string
	Description       string
	IncludeScaling    bool
	RequireProvenance bool
	Included          []string
	Tags              map[string]string
	Archived          bool
	CreatedAt         float64
	LastModifiedAt    float64
	LastReportedAt    float64 // 0 = never
	LastChangedAt     float64 // time of the latest snapshot, 0 = none
	State             *bool   // nil while no policy decides
}

// Snapshot is one state of an environment's running set. Index counts from 1 per environment.
type Snapshot struct {
	EnvID     string
	Index     int
	Timestamp float64
	Type      string
	Compliant *bool
	// Artifacts is the JSON array of the snapshot's artifacts as the API shows them.
	Artifacts json.RawMessage
	// Digest identifies the running set (snapshot.Digest); InsertSnapshot keeps the latest per
	// environment for LatestSnapshotDigest.
	Digest []byte
}

// EnvEvent is one entry of an environment's log: an artifact started, changed or exited.
type EnvEvent struct {
	EnvID         string
	Seq           int64 // order within the environment
	SnapshotIndex int
	Type          string
	ArtifactName  string
	Fingerprint   string
	Description   string
	ReportedAt    float64
	// RepoNames are the repositories the artifact was built from, for the repo_name filter.
	RepoNames []string
	// Doc holds the remaining fields (flows, compliance, links) as served.
	Doc json.RawMessage
}

// Running records that a fingerprint runs in an environment since a snapshot.
type Running struct {
	EnvID       string
	Fingerprint string
	Name        string
	Since       float64
}

// AllowlistEntry lets a fingerprint run in an environment as if compliant.
type AllowlistEntry struct {
	ID           string
	EnvID        string
	Fingerprint  string
	ArtifactName string
	Description  string
	AllowedBy    string
	Timestamp    float64
}

// EventFilter selects environment events. Index bounds are inclusive; zero means unbounded.
type EventFilter struct {
	FromIndex, ToIndex int
	FromTS, ToTS       float64
	RepoNames          []string
	Reverse            bool // oldest first; newest first otherwise
	Page
}

// EnvironmentReader is what the API and the evaluator read about environments.
type EnvironmentReader interface {
	EnvironmentByName(ctx context.Context, orgID, name string) (Environment, error)
	EnvironmentByID(ctx context.Context, orgID, id string) (Environment, error)
	ListEnvironments(ctx context.Context, orgID string, p Page) ([]Environment, int, error)
	// LogicalEnvironments lists the logical environments that include envID.
	LogicalEnvironments(ctx context.Context, envID string) ([]Environment, error)

	LatestSnapshot(ctx context.Context, envID string) (Snapshot, error)
	// LatestSnapshotDigest is the index and Digest of the latest snapshot, without reading the
	// snapshot (ErrNotFound when there is none, or it was stored without one).
	LatestSnapshotDigest(ctx context.Context, envID string) (int, []byte, error)
	SnapshotByIndex(ctx context.Context, envID string, index int) (Snapshot, error)
	// SnapshotTimestamps lists the timestamps of every snapshot, index 1 first.
	SnapshotTimestamps(ctx context.Context, envID string) ([]float64, error)
	ListSnapshots(ctx context.Context, envID string, fromIndex, toIndex int) ([]Snapshot, error)

	EnvEvents(ctx context.Context, envID string, f EventFilter) ([]EnvEvent, int, error)
	RunningIn(ctx context.Context, orgID, fingerprint string) ([]Running, error)
	// FingerprintEvents lists, oldest first, the environment events of a fingerprint in every
	// environment of the organization.
	FingerprintEvents(ctx context.Context, orgID, fingerprint string) ([]EnvEvent, error)
	ArtifactsByFingerprints(ctx context.Context, orgID string, fingerprints []string) ([]Artifact, error)
	TrailsByIDs(ctx context.Context, ids []string) ([]Trail, error)
	Allowlist(ctx context.Context, envID string) ([]AllowlistEntry, error)
	// SearchArtifacts finds artifacts whose fingerprint or git commit starts with prefix.
	SearchArtifacts(ctx context.Context, orgID, prefix string, limit int) ([]Artifact, error)
}

// EnvironmentWriter is what the evaluator writes about environments. Every method costs one
// round trip however many rows it writes, so applying a snapshot of N artifacts costs a
// fixed number of round trips.
type EnvironmentWriter interface {
	UpsertEnvironment(ctx context.Context, e Environment) (created bool, err error)
	// UpdateEnvironment writes e. When e.State is decided (not nil) and differs from the stored
	// state, it also enqueues the environment's ON_COMPLIANT_ENV or ON_NON_COMPLIANT_ENV trigger
	// in the same transaction, so whatever code decides compliance notifies exactly once per
	// change, and an environment that stays non-compliant does not fire again.
	UpdateEnvironment(ctx context.Context, e Environment) error
	// InsertSnapshot records s. It keeps nothing of s.Artifacts once it returns: the caller may
	// reuse that buffer.
	InsertSnapshot(ctx context.Context, s Snapshot) error
	InsertEnvEvents(ctx context.Context, events []EnvEvent) error
	// SetRunning replaces what runs in an environment: removes gone, adds started.
	SetRunning(ctx context.Context, orgID, envID string, gone []string, started []Running) error
	AppendTrailEvents(ctx context.Context, events []TrailEvent, at float64) error
	InsertAllowlist(ctx context.Context, a AllowlistEntry) error

	// MarkRunningChanged records that the evidence or verdicts of running artifacts changed:
	// of fps in every environment of orgID where they run (envID ""), or in envID alone, where
	// nil fps means all its artifacts. An environment's next snapshot takes its marked
	// artifacts anew and may take the others from its latest snapshot (RunningChanges).
	MarkRunningChanged(ctx context.Context, orgID, envID string, fps []string) error
	// MarkFlowRunningChanged is MarkRunningChanged for every artifact the flow reported.
	MarkFlowRunningChanged(ctx context.Context, orgID, flowID string) error
	// RunningChanges lists an environment's marks. The snapshot that takes their artifacts
	// anew clears them by ID (ClearRunningChanges), so a mark committed after it read them
	// stays for the next one; marking never waits for a snapshot's locks. A change marked in
	// every environment (envID "") that committed before the call is among them, also while a
	// snapshot that started the artifact was in flight beside it: on PostgreSQL it may come as
	// a mark with no ID, which no snapshot clears (the store marks the environments once the
	// change commits).
	RunningChanges(ctx context.Context, envID string) ([]RunningChange, error)
	ClearRunningChanges(ctx context.Context, ids []int64) error
	// CompactRunningChanges keeps one mark per fingerprint, so that the marks of an
	// environment that reports the same running set for a long time do not grow with the
	// evidence its artifacts receive meanwhile.
	CompactRunningChanges(ctx context.Context, envID string) error
}

// RunningChange is a mark of MarkRunningChanged.
type RunningChange struct {
	ID          int64 // 0 for one not cleared by ClearRunningChanges (see RunningChanges)
	Fingerprint string
}

// Approval is a recorded release of an artifact; Number counts from 1 per flow.
type Approval struct {
	ID        string
	OrgID     string
	FlowID    string
	Number    int
	State     string
	CreatedAt float64
	// Doc is the approval as the API shows it, without number and timestamps.
	Doc json.RawMessage
}

// ApprovalReader reads approvals.
type ApprovalReader interface {
	Approval(ctx context.Context, flowID string, number int) (Approval, error)
	ListApprovals(ctx context.Context, flowID string, p Page) ([]Approval, int, error)
}

// ApprovalWriter records approvals.
type ApprovalWriter interface {
	// InsertApproval stores a with the next number of its flow and returns that number.
	InsertApproval(ctx context.Context, a Approval) (int, error)
}
