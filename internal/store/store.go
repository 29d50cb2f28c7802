// Package store defines the state Veritrail keeps, as its consumers need it: the evaluate
// tier writes evidence through Tx (it is the only writer of evidence), the ingest tier reads
// through Reader, and the admin commands write identities through Admin. Adapters live in
// sub-packages and all pass the conformance suite in storetest.
package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
)

// ErrNotFound is returned by every lookup that finds nothing.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a unique name is taken.
var ErrConflict = errors.New("conflict")

// ErrBusy is returned when a transaction that gives way (Tx.GiveWay) would have waited too long
// for a lock another transaction holds: nothing was written, and trying again shortly succeeds.
var ErrBusy = errors.New("busy: a lock is held by another transaction")

// Org is a tenant. Every other record belongs to exactly one.
type Org struct {
	ID        string
	Name      string
	Public    bool
	CreatedAt float64
}

// User is a person; a user may be a member of several organizations.
type User struct {
	ID          string
	Name        string
	DisplayName string
	CreatedAt   float64
	// DefaultOrgID is the organization the user chose as default; empty until one is chosen.
	DefaultOrgID string
}

// Role is what a principal may do in an organization.
type Role string

const (
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
	// RoleSnapshotter may report environment snapshots and nothing else.
	RoleSnapshotter Role = "snapshotter"
	RoleReader      Role = "reader"
)

// APIKey is a stored key: only the SHA-256 of the secret is kept. A key belongs to a service
// account (ServiceAccountID set; reads fill OrgID, Name and Role from the account, so a
// changed privilege applies to its keys at once), to a user (UserID set; the user's membership
// role in the requested organization applies), or, for keys made before service accounts
// existed, directly to an organization (OrgID set, its own Name and Role).
type APIKey struct {
	ID               string
	Hash             []byte
	OrgID            string
	UserID           string
	ServiceAccountID string
	Name             string
	Description      string
	Role             Role
	CreatedAt        float64
	ExpiresAt        float64 // 0 = never
	Revoked          bool
}

// Flow is a named stream of trails with a template.
type Flow struct {
	ID             string
	OrgID          string
	Name           string
	Description    string
	Visibility     string
	TemplateID     string
	Template       string
	Tags           map[string]string
	RepoURL        string
	Archived       bool
	CreatedAt      float64
	LastModifiedAt float64
}

// Trail is one run of a flow (typically one commit) and the evidence reported to it.
type Trail struct {
	ID             string
	OrgID          string
	FlowID         string
	Name           string
	Description    *string
	TemplateID     string
	GitCommitInfo  json.RawMessage
	RepoInfo       json.RawMessage
	OriginURL      *string
	ExternalURLs   json.RawMessage
	UserData       json.RawMessage
	CreatedBy      string
	CreatedAt      float64
	LastModifiedAt float64
	State          string          // INCOMPLETE, COMPLIANT, NON-COMPLIANT
	Compliance     json.RawMessage // the evaluated compliance_status document
	EvaluatedAt    float64
}

// CompareListed orders trails as ListTrails lists them: newest first, ties by ID.
func CompareListed(a, b Trail) int {
	if c := cmp.Compare(b.CreatedAt, a.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// Artifact is a build output reported to a trail.
type Artifact struct {
	ID           string
	OrgID        string
	FlowID       string
	TrailID      string
	Fingerprint  string
	TemplateName string
	Filename     string
	GitCommit    string
	RepoName     string
	Report       json.RawMessage // the report as sent
	ReportedBy   string
	CreatedAt    float64
	State        string // from the trail's evaluation
}

// Attestation is one piece of evidence.
type Attestation struct {
	ID                  string
	OrgID               string
	FlowID              string
	TrailID             string
	Name                string
	Type                string
	IsCompliant         bool
	ArtifactFingerprint string
	TargetArtifact      string
	OverridesID         string
	OverrideReason      string
	EvidenceSHA256      string
	EvidenceName        string
	Data                json.RawMessage
	ReportedBy          string
	CreatedAt           float64
}

// TrailRef identifies a trail and its flow by name and ID: what a write needs to resolve them.
type TrailRef struct {
	FlowID    string
	FlowName  string
	TrailID   string // "" when the flow exists and the trail does not
	TrailName string
}

// AppliedMark records one applied message: the trail it touched ("" for none) and when.
type AppliedMark struct {
	ID      string
	TrailID string
	At      float64
}

// AttestationFact is what compliance is computed from: an attestation without its evidence and
// data. Evaluation reads these for every attestation of a trail on each evaluation, so they are
// kept small.
type AttestationFact struct {
	ID                  string
	Name                string
	Type                string
	IsCompliant         bool
	ArtifactFingerprint string
	TargetArtifact      string
	OverridesID         string
	CreatedAt           float64
}

// Fact is the attestation's AttestationFact.
func (a Attestation) Fact() AttestationFact {
	return AttestationFact{ID: a.ID, Name: a.Name, Type: a.Type, IsCompliant: a.IsCompliant,
		ArtifactFingerprint: a.ArtifactFingerprint, TargetArtifact: a.TargetArtifact, OverridesID: a.OverridesID,
		CreatedAt: a.CreatedAt}
}

// TrailEvent is an entry of a trail's history; Doc is its JSON form.
type TrailEvent struct {
	TrailID string
	Doc     json.RawMessage
	// At is when it was appended (for AppendTrailEvents, zero means the time given there).
	At float64
}

// EvaluationStart is what evaluating a trail starts from (see Reader.TrailToEvaluate).
type EvaluationStart struct {
	Generation int64 // of its dirt; 0 when clean
	TemplateID string
}

// ComplianceSave is one trail's evaluation to save (see Tx.SaveCompliance).
type ComplianceSave struct {
	TrailID, State string
	Doc            json.RawMessage
	At             float64
	ArtifactStates map[string]string // artifact ID -> state
	// ModifiedAt is the time of the latest evidence the evaluation saw: the trail's
	// last_modified_at is raised to it, never lowered (0 leaves it as it is). On SQLite the
	// applies of attestations leave last_modified_at to this save (evaluate's applier).
	ModifiedAt float64
}

// TrailKey names a trail by its flow and its name.
type TrailKey struct{ FlowID, Name string }

// CustomType is a custom attestation type with all its versions, oldest first.
type CustomType struct {
	OrgID       string
	Name        string
	Description string
	Archived    bool
	Versions    []CustomTypeVersion
}

// CustomTypeVersion is one immutable definition of a custom type.
type CustomTypeVersion struct {
	Version int
	Schema  string
	Rules   []string
	// Summary is the expressions the type summarises its data with, in the order given; nil
	// when the type has none.
	Summary   []SummaryExpr
	CreatedBy string
	CreatedAt float64
}

// SummaryExpr is one named jq expression of a custom type's summary, kept verbatim.
type SummaryExpr struct {
	Name       string `json:"name"`
	Expression string `json:"expression"`
}

// Page selects a window of a list; PerPage 0 means all.
type Page struct {
	Page, PerPage int
}

// TrailFilter narrows ListTrails.
type TrailFilter struct {
	FlowIDs     []string // nil = every flow of the organization
	Fingerprint string
	Page
	// NoTotal skips counting the trails the filter matches (ListTrails answers 0): a caller
	// that shows no total saves a count that grows with the organization.
	NoTotal bool
}

// ArtifactFilter narrows ListArtifacts.
type ArtifactFilter struct {
	FlowID   string
	RepoName string
	Page
}

// FlowFilter narrows ListFlows.
type FlowFilter struct {
	NameContains  string
	CaseSensitive bool
	Page
}

// Reader is what the API reads.
type Reader interface {
	OrgByName(ctx context.Context, name string) (Org, error)
	OrgByID(ctx context.Context, id string) (Org, error)
	KeyByHash(ctx context.Context, hash []byte) (APIKey, error)
	UserByID(ctx context.Context, id string) (User, error)
	UserByName(ctx context.Context, name string) (User, error)
	MemberRole(ctx context.Context, userID, orgID string) (Role, error)
	UserOrgs(ctx context.Context, userID string) ([]Org, error)

	FlowByName(ctx context.Context, orgID, name string) (Flow, error)
	FlowByID(ctx context.Context, orgID, id string) (Flow, error)
	ListFlows(ctx context.Context, orgID string, f FlowFilter) ([]Flow, int, error)
	Template(ctx context.Context, id string) (string, error)

	TrailByName(ctx context.Context, flowID, name string) (Trail, error)
	// TrailRef resolves a trail of an active flow by their names in one lookup, without reading
	// either record whole. It answers ErrNotFound when the flow does not exist, and an empty
	// TrailID when the trail does not.
	TrailRef(ctx context.Context, orgID, flowName, trailName string) (TrailRef, error)
	TrailByID(ctx context.Context, id string) (Trail, error)
	// TrailID is the ID of a flow's trail, without reading the trail whole.
	TrailID(ctx context.Context, flowID, name string) (string, error)
	// TrailIDs is TrailID for many trails, one query per flow; trails that do not exist are
	// absent from the answer.
	TrailIDs(ctx context.Context, keys []TrailKey) (map[TrailKey]string, error)
	// TrailToEvaluate reads what evaluating a trail starts from, in one query: its dirt
	// generation (0 when it is clean) and its template, without reading the trail whole.
	// ErrNotFound when there is no such trail.
	TrailToEvaluate(ctx context.Context, id string) (generation int64, templateID string, err error)
	// TrailsToEvaluate is TrailToEvaluate for several trails in one query; trails that do not
	// exist are absent from the answer.
	TrailsToEvaluate(ctx context.Context, ids []string) (map[string]EvaluationStart, error)
	ListTrails(ctx context.Context, orgID string, f TrailFilter) ([]Trail, int, error)
	TrailEvents(ctx context.Context, trailID string) ([]TrailEvent, error)

	TrailArtifacts(ctx context.Context, trailID string) ([]Artifact, error)
	// TrailArtifactsByIDs is TrailArtifacts of several trails in one query, by trail ID.
	TrailArtifactsByIDs(ctx context.Context, trailIDs []string) (map[string][]Artifact, error)
	ArtifactsByPrefix(ctx context.Context, orgID, flowID, prefix string, limit int) ([]Artifact, error)
	ArtifactsByCommit(ctx context.Context, orgID, flowID, sha string) ([]Artifact, error)
	ListArtifacts(ctx context.Context, orgID string, f ArtifactFilter) ([]Artifact, int, error)

	TrailAttestations(ctx context.Context, trailID string) ([]Attestation, error)
	// TrailAttestationFacts is TrailAttestations without evidence and data, in the same order.
	TrailAttestationFacts(ctx context.Context, trailID string) ([]AttestationFact, error)
	AttestationByID(ctx context.Context, orgID, id string) (Attestation, error)
	ListAttestations(ctx context.Context, orgID string, p Page) ([]Attestation, int, error)

	EnvironmentReader
	ApprovalReader
	ControlReader
	IdentityReader
	NotificationReader
	RepoReader
	PolicyReader
	RejectedReader

	CustomType(ctx context.Context, orgID, name string) (CustomType, error)
	ListCustomTypes(ctx context.Context, orgID string) ([]CustomType, error)

	// DirtyGeneration is the trail's current dirt generation (0 when clean).
	DirtyGeneration(ctx context.Context, trailID string) (int64, error)

	// Visible reports whether every message ID has been applied and the trails they touched
	// evaluated since: the condition "read your writes" waits for. One evaluation of a trail
	// saved after a message was applied makes it visible, whatever was applied to the trail
	// later, so a steady stream of writes to a trail cannot keep a reader waiting.
	Visible(ctx context.Context, ids []string) (bool, error)
	// PendingEvaluations lists the dirty trails of organization orgID (of every organization when
	// orgID is empty) with the dirt generation each must be evaluated at.
	PendingEvaluations(ctx context.Context, orgID string) ([]DirtyTrail, error)
	// Evaluated reports whether every trail (trail ID -> generation) has been evaluated at that
	// dirt generation or a later one, as Visible judges a message's trail.
	Evaluated(ctx context.Context, generations map[string]int64) (bool, error)
}

// DirtyTrail is a trail waiting for evaluation (see Reader.PendingEvaluations).
type DirtyTrail struct {
	TrailID, OrgID string
	Generation     int64
}

// Tx is one evaluator transaction: all of a message is applied, or none of it.
type Tx interface {
	Reader
	RepoWriter
	// OnCommit runs f after the transaction commits, and never if it does not: for what a
	// process keeps in memory of what the transaction wrote.
	OnCommit(f func())
	// OnRollback runs f once the transaction ended without committing.
	OnRollback(f func())
	// Applied reports whether message id was applied before (redelivery).
	Applied(ctx context.Context, id string) (bool, error)
	// MarkApplied records message id as applied. It comes after MarkDirty of trailID in the
	// same transaction: it records the generation the message is visible at (see Visible).
	MarkApplied(ctx context.Context, id, trailID string, at float64) error
	// AppliedAmong answers which of ids are applied, in one round trip per 30,000 IDs.
	AppliedAmong(ctx context.Context, ids []string) (map[string]bool, error)
	// MarkAppliedAll is MarkApplied for many messages, in one round trip per 10,000.
	MarkAppliedAll(ctx context.Context, marks []AppliedMark) error

	UpsertFlow(ctx context.Context, f Flow) (created bool, err error)
	RenameFlow(ctx context.Context, orgID, flowID, newName string, at float64) error
	ArchiveFlow(ctx context.Context, orgID, flowID string, at float64) error
	SetFlowTags(ctx context.Context, orgID, flowID string, tags map[string]string, at float64) error
	PutTemplate(ctx context.Context, id, content string) error

	UpsertTrail(ctx context.Context, t Trail) (created bool, err error)
	TouchTrail(ctx context.Context, trailID string, at float64) error
	// TouchTrails is TouchTrail for many trails (trail ID -> time) in one statement per
	// few thousand.
	TouchTrails(ctx context.Context, at map[string]float64) error
	// HoldTrails locks the trails' rows until the transaction ends, in ID order, without
	// writing them: what orders two transactions adding to one trail on a store with
	// concurrent writers (PostgreSQL). A store with one writer does nothing.
	HoldTrails(ctx context.Context, ids []string) error
	InsertArtifact(ctx context.Context, a Artifact) error
	InsertAttestation(ctx context.Context, a Attestation) error
	// InsertAttestations is InsertAttestation for many, in order, in one statement per
	// thousand or so.
	InsertAttestations(ctx context.Context, as []Attestation) error
	AppendTrailEvent(ctx context.Context, e TrailEvent, at float64) error

	// MarkDirty records that a trail needs evaluating; the generation it returns lets the
	// evaluator clear exactly the dirt it has evaluated.
	MarkDirty(ctx context.Context, trailID string) error
	// Announce tells other processes, when the transaction commits, what it changed: the
	// organizations where anything may have changed and the artifacts (organization ID ->
	// fingerprints) whose evidence was evaluated (see evaluate.Deps.Evaluated). A store whose
	// readers all live in the evaluator's process may do nothing.
	Announce(ctx context.Context, orgs []string, artifacts map[string][]string) error
	// MarkDirtyAll is MarkDirty for distinct trails, in one statement per few thousand.
	MarkDirtyAll(ctx context.Context, trailIDs []string) error
	// ClearDirty records that the trail was evaluated at generation: it is clean when nothing
	// dirtied it since, and its messages up to generation are visible either way.
	ClearDirty(ctx context.Context, trailID string, generation int64) error
	// ClearDirtyAll is ClearDirty for several trails (trail ID -> generation evaluated).
	ClearDirtyAll(ctx context.Context, generations map[string]int64) error
	// LockTrails takes the row locks of those of the trails ids that no other transaction holds,
	// in ID order and without waiting, and answers, for each trail it locked, its dirt
	// generation (0 when clean); a trail that does not exist is not answered. The holder is the
	// only transaction changing those trails, their dirt included, until it ends. The evaluator
	// saves compliance only for trails it locked (a trail whose lock an apply holds is dirtied
	// again by that apply and evaluated after it), and only while their generation is the one
	// its evaluation read. SQLite has one writer, so it locks every existing trail.
	LockTrails(ctx context.Context, ids []string) (map[string]int64, error)
	// GiveWay bounds how long this transaction's statements wait for locks other transactions
	// hold; past the bound the statement fails with an error wrapping ErrBusy. A transaction
	// that cannot take its locks in the order the others take theirs (saving evaluations takes
	// trails, then environments; a batch of messages may take an environment, then a trail)
	// gives way, so a cycle of waits is broken by it at once instead of by the database's
	// deadlock detection a second later. A no-op where there is one writer.
	GiveWay(ctx context.Context) error
	SaveCompliance(ctx context.Context, trailID, state string, doc json.RawMessage, at float64, artifactStates map[string]string) error
	// SaveCompliances is SaveCompliance for several trails, in two statements per thousand or so.
	SaveCompliances(ctx context.Context, saves []ComplianceSave) error

	EnvironmentWriter
	ApprovalWriter
	ControlWriter
	AuditWriter
	NotificationWriter
	PolicyWriter
	RejectedWriter

	PutCustomTypeVersion(ctx context.Context, orgID, name, description string, v CustomTypeVersion) error
	ArchiveCustomType(ctx context.Context, orgID, name string) error
}

// Admin writes identities; it is used by the admin commands and bootstrap, not by the API.
type Admin interface {
	CreateOrg(ctx context.Context, o Org) error
	CreateUser(ctx context.Context, u User) error
	AddMember(ctx context.Context, userID, orgID string, role Role) error
	CreateKey(ctx context.Context, k APIKey) error
	SetOrgPublic(ctx context.Context, orgID string, public bool) error
	SetUserDisplayName(ctx context.Context, userID, displayName string) error
	// Wipe deletes every record: for test environments only.
	Wipe(ctx context.Context) error
}

// Progress is what read after write needs beyond one process's memory, in the distributed
// mode: how far the evaluator has applied each partition of a bus topic, and which ingest
// processes have writes of an organization in flight. Times are Unix seconds of the callers'
// clocks.
type Progress interface {
	// AdvancePositions records that every message of topic's partitions before the offsets
	// given (partition -> next offset) is applied. A position never moves back.
	AdvancePositions(ctx context.Context, topic string, next map[int32]int64) error
	// Positions is what AdvancePositions recorded for topic (partition -> next offset).
	Positions(ctx context.Context, topic string) (map[int32]int64, error)
	// MarkInFlight records that process has writes of orgID in flight, until a time it renews,
	// and adds scopes to the scopes of those writes (see contract.Envelope.Scopes; "" stands for
	// writes that name none). The scopes last as long as the mark.
	MarkInFlight(ctx context.Context, orgID, process string, until float64, scopes []string) error
	// RenewInFlight moves every mark of process to until.
	RenewInFlight(ctx context.Context, process string, until float64) error
	// ClearInFlight removes process's mark of orgID, with its scopes.
	ClearInFlight(ctx context.Context, orgID, process string) error
	// ClearScopesInFlight removes scopes from process's mark of orgID, which stays.
	ClearScopesInFlight(ctx context.Context, orgID, process string, scopes []string) error
	// InFlight lists the marks of orgID.
	InFlight(ctx context.Context, orgID string) ([]InFlightMark, error)
	// InFlightScopes lists which of scopes the marks of orgID hold, by process, and the marks
	// that hold no scope at all (a mark made by a build that did not record scopes: its writes
	// may be of any).
	InFlightScopes(ctx context.Context, orgID string, scopes []string) ([]InFlightScope, error)
	// ClearExpiredInFlight removes process's mark of orgID, with its scopes, if it ran out
	// before the time given (the process stopped renewing it).
	ClearExpiredInFlight(ctx context.Context, orgID, process string, before float64) error
}

// InFlightScope says an ingest process's mark of an organization holds a scope: it may have
// writes of it in flight.
type InFlightScope struct {
	Process string
	Scope   string // "" for writes that name no scope
	// Every: the mark records no scope at all (made by a build before scopes); it holds every
	// scope, and Scope is "".
	Every bool
}

// InFlightMark says an ingest process has writes of an organization in flight.
type InFlightMark struct {
	OrgID, Process string
	Until          float64
}

// Store is a complete adapter.
type Store interface {
	Reader
	Admin
	IdentityStore
	SessionStore
	TriggerOutbox
	Progress
	// Update runs fn in one transaction, committing when it returns nil.
	Update(ctx context.Context, fn func(Tx) error) error
	// DirtyTrails lists trails waiting for evaluation (after a crash, nobody remembers them).
	DirtyTrails(ctx context.Context) ([]string, error)
	// DirtyTrailsBefore lists trails dirtied last before generation (a dirt generation is the
	// time of the mark in Unix nanoseconds): those left behind by an evaluator that died.
	DirtyTrailsBefore(ctx context.Context, generation int64) ([]string, error)
	// Classify says whether an error of this store can go away if the work is tried again.
	Classify(err error) ErrorClass
	// ConcurrentWriters reports whether write transactions run beside each other (PostgreSQL)
	// rather than one at a time (SQLite, which has one writer).
	ConcurrentWriters() bool
	// AwaitTransactionsInFlight returns once every transaction that was in flight when it was
	// called has ended (at once without ConcurrentWriters), or when ctx ends, with its error.
	AwaitTransactionsInFlight(ctx context.Context) error
	Close() error
}
