package store

import (
	"context"
	"encoding/json"
)

// Policy is an environment policy of an organization: a list of immutable versions, oldest first, the last of
// which is the one attached environments are evaluated against.
type Policy struct {
	OrgID       string
	Name        string
	Description string
	CreatedBy   string
	CreatedAt   float64
	Versions    []PolicyVersion
}

// Latest is the current version (the zero value when there is none).
func (p Policy) Latest() PolicyVersion {
	if len(p.Versions) == 0 {
		return PolicyVersion{}
	}
	return p.Versions[len(p.Versions)-1]
}

// Policy formats.
const (
	PolicyYAML = "yaml" // the declarative rules of the environment-policy schema
	PolicyRego = "rego" // a raw Rego module
)

// PolicyVersion is one immutable version of a policy.
type PolicyVersion struct {
	Version int
	Format  string // PolicyYAML or PolicyRego
	Content string // the file as uploaded
	// ContentID identifies what the version means (envpolicy's Policy.ID): evaluations are stored under it, so
	// versions that differ only in layout share them.
	ContentID string
	Comment   string
	CreatedBy string
	CreatedAt float64
}

// AttachedPolicy is a policy attached to an environment, with its latest version.
type AttachedPolicy struct {
	Name string
	PolicyVersion
}

// PolicyEvaluation is what one policy meaning (PolicyID, a PolicyVersion.ContentID) said of one artifact input
// (InputHash, envpolicy's ArtifactInput.Hash): stored once, and shared by every verdict and snapshot that refers
// to the pair.
type PolicyEvaluation struct {
	PolicyID  string
	InputHash string
	Compliant bool
	// Failed says the policy could not judge the input (it does not comply then, and RuleEvaluations says why):
	// such an evaluation is made again the next time the input is judged, and replaced.
	Failed bool
	// RuleEvaluations is the JSON array of the policy's rule evaluations.
	RuleEvaluations json.RawMessage
}

// PolicyOutcome is a stored evaluation without its rule evaluations: what deciding whether to evaluate again needs.
type PolicyOutcome struct {
	PolicyID  string
	InputHash string
	Compliant bool
}

// SnapshotPolicy is a policy version a snapshot was judged by.
type SnapshotPolicy struct {
	Name    string `json:"policy_name"`
	Version int    `json:"policy_version"`
	ID      string `json:"policy_id"`
}

// VerdictPolicy is one policy's part of a verdict: which version judged the artifact and what it said.
type VerdictPolicy struct {
	Name      string `json:"policy_name"`
	Version   int    `json:"policy_version"`
	ID        string `json:"policy_id"` // the version's ContentID: with the verdict's InputHash, the PolicyEvaluation
	Compliant bool   `json:"compliant"`
}

// Verdict is the current decision on an artifact running in an environment with policies: one per (name,
// fingerprint) of the environment's latest snapshot.
type Verdict struct {
	EnvID       string
	Name        string
	Fingerprint string
	InputHash   string
	// Compliant is true when the artifact is allowlisted, or every policy is compliant.
	Compliant   bool
	Allowlisted bool
	// Failed says some policy could not judge the artifact: it is judged again whenever its environment is.
	Failed      bool
	Policies    []VerdictPolicy // in attachment order
	EvaluatedAt float64
}

// VerdictState is what judging an artifact again is compared with: the input the stored verdict judged and its
// outcome, without the rest of the verdict.
type VerdictState struct {
	InputHash string
	Compliant bool
	Failed    bool
}

// VerdictKey names a verdict within its environment.
type VerdictKey struct{ Name, Fingerprint string }

// Key is the verdict's VerdictKey.
func (v Verdict) Key() VerdictKey { return VerdictKey{v.Name, v.Fingerprint} }

// FingerprintReport is one report of a fingerprint with its trail and its flow, read together: the trail without
// its descriptive fields and compliance document (TrailsByIDs reads those), the flow without its template.
type FingerprintReport struct {
	Artifact Artifact
	Trail    Trail
	Flow     Flow
}

// PolicyReader reads policies, their attachments and the verdicts they reached.
type PolicyReader interface {
	// FingerprintReports lists every report of the fingerprints in the organization's live (not archived) flows,
	// oldest first, in one query per 30,000 fingerprints and one each for their trails and flows: what policies
	// judge an artifact by.
	FingerprintReports(ctx context.Context, orgID string, fingerprints []string) ([]FingerprintReport, error)
	Policy(ctx context.Context, orgID, name string) (Policy, error)
	// ListPolicies lists the organization's policies by name, with their versions.
	ListPolicies(ctx context.Context, orgID string) ([]Policy, error)
	// PolicyEnvironments lists the IDs of the live environments a policy is attached to, sorted.
	PolicyEnvironments(ctx context.Context, orgID, name string) ([]string, error)
	// AttachedPolicies lists the policies attached to an environment, in the order they were attached, each with
	// its latest version.
	AttachedPolicies(ctx context.Context, envID string) ([]AttachedPolicy, error)
	// AttachedPolicyNames maps the ID of each environment of the organization that has policies to their names,
	// in attachment order.
	AttachedPolicyNames(ctx context.Context, orgID string) (map[string][]string, error)
	// RunningWithPolicies lists where the fingerprints run in environments that have policies (from the running
	// index): the artifacts whose verdicts a change of their evidence affects.
	RunningWithPolicies(ctx context.Context, orgID string, fingerprints []string) ([]Running, error)
	// Verdicts lists an environment's verdicts on the fingerprints, or on every artifact when fingerprints is nil,
	// ordered by fingerprint and name.
	Verdicts(ctx context.Context, envID string, fingerprints []string) ([]Verdict, error)
	// EnvironmentVerdicts reads, in one query, a live environment by name with its verdicts on a fingerprint and
	// the stored evaluations of their inputs: what an assert in environment scope reads. ErrNotFound when there is
	// no such environment.
	EnvironmentVerdicts(ctx context.Context, orgID, envName, fingerprint string) (Environment, []Verdict, []PolicyEvaluation, error)
	// VerdictStates maps the environment's verdicts on the fingerprints (every one when fingerprints is nil) to
	// their VerdictState, without reading the verdicts whole.
	VerdictStates(ctx context.Context, envID string, fingerprints []string) (map[VerdictKey]VerdictState, error)
	// RunningWithPoliciesOfFlow is RunningWithPolicies for every fingerprint reported in a flow.
	RunningWithPoliciesOfFlow(ctx context.Context, orgID, flowID string) ([]Running, error)
	// NonCompliantVerdicts counts the environment's verdicts that are not compliant.
	NonCompliantVerdicts(ctx context.Context, envID string) (int, error)
	// PolicyEvaluations finds the stored evaluations of the input hashes (any policy).
	PolicyEvaluations(ctx context.Context, orgID string, inputHashes []string) ([]PolicyEvaluation, error)
	// PolicyOutcomes is PolicyEvaluations without rule evaluations and without the failed ones.
	PolicyOutcomes(ctx context.Context, orgID string, inputHashes []string) ([]PolicyOutcome, error)
	// SnapshotPolicies lists the policy versions a snapshot was judged by (none when it had no policies).
	SnapshotPolicies(ctx context.Context, envID string, index int) ([]SnapshotPolicy, error)
	// TrailAttestationFactsByIDs is TrailAttestationFacts of several trails in one query, by trail ID.
	TrailAttestationFactsByIDs(ctx context.Context, trailIDs []string) (map[string][]AttestationFact, error)
	// TrailAttestationFactsAfter is TrailAttestationFactsByIDs of only the attestations each trail of after
	// gained beyond the position given for it (0: all of them). It also answers, for each trail that has any,
	// the position of its last attestation, to pass next time. Attestations are never changed or removed,
	// and a trail's attestations take positions in the order their transactions commit, so facts read
	// before plus those read after their last position are the trail's facts now.
	TrailAttestationFactsAfter(ctx context.Context, after map[string]int64) (map[string][]AttestationFact, map[string]int64, error)
	// DecisionControls maps each decision attestation of ids to the control it names.
	DecisionControls(ctx context.Context, ids []string) (map[string]string, error)
}

// PolicyWriter records policies, attachments and verdicts. Like EnvironmentWriter, every method costs one round
// trip however many rows it writes (beyond one statement per 30,000 parameters).
type PolicyWriter interface {
	// PutPolicyVersion adds a version, creating the policy with the first. A non-empty description replaces the
	// policy's.
	PutPolicyVersion(ctx context.Context, orgID, name, description string, v PolicyVersion) error
	// SetPolicyDescription replaces the description of an existing policy.
	SetPolicyDescription(ctx context.Context, orgID, name, description string) error
	// AttachPolicies attaches policies to an environment; attaching one already attached changes nothing.
	AttachPolicies(ctx context.Context, orgID, envID string, names []string, at float64) error
	// DetachPolicies detaches policies from an environment; detaching one not attached changes nothing.
	DetachPolicies(ctx context.Context, envID string, names []string) error
	// LockEnvironment makes concurrent transactions that evaluate one environment's policies take turns, so each
	// reads what the one before it wrote (a no-op where the store has a single writer).
	LockEnvironment(ctx context.Context, envID string) error
	// PutPolicyEvaluations stores evaluations; a (policy, input) pair stored already is kept as it is, unless it
	// had failed.
	PutPolicyEvaluations(ctx context.Context, orgID string, evals []PolicyEvaluation) error
	// PutSnapshotPolicies records the policy versions a snapshot was judged by.
	PutSnapshotPolicies(ctx context.Context, envID string, index int, policies []SnapshotPolicy) error
	// PutVerdicts inserts or replaces verdicts of an environment.
	PutVerdicts(ctx context.Context, orgID string, verdicts []Verdict) error
	// DeleteVerdicts removes an environment's verdicts on keys, or all of them when keys is nil.
	DeleteVerdicts(ctx context.Context, envID string, keys []VerdictKey) error
	// SetEnvironmentState records whether an environment is compliant (nil: no policy decides). It is the one
	// place an environment's state changes, and reports whether it did.
	SetEnvironmentState(ctx context.Context, orgID, envID string, state *bool) (changed bool, err error)
	// SetLatestSnapshotCompliance records the compliance of the environment's latest snapshot, if it has one.
	SetLatestSnapshotCompliance(ctx context.Context, envID string, compliant *bool) error
}
