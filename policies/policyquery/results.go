package policyquery

import "github.com/veritrail/veritrail/policies/policyeval"

// Assertion scopes.
const (
	ScopeFlow        = "flow"
	ScopeEnvironment = "environment"
	ScopePolicy      = "policy"
)

// AssertResult is the assertion result: whether an artifact may ship, and why. PolicyEvaluations
// is omitted only when nil: an environment without policies answers an empty list.
type AssertResult struct {
	Fingerprint       string                  `json:"fingerprint"`
	Flow              string                  `json:"flow"`
	Trail             string                  `json:"trail"`
	Compliant         bool                    `json:"compliant"`
	Scope             string                  `json:"scope" enum:"flow,environment,policy"`
	ComplianceStatus  AssertCompliance        `json:"compliance_status"`
	HTMLURL           string                  `json:"html_url"`
	Flows             []AssertFlow            `json:"flows"`
	Environment       *string                 `json:"environment,omitempty"`
	PolicyEvaluations []policyeval.Evaluation `json:"policy_evaluations,omitzero"`
	AllowListing      *AllowListing           `json:"allow_listing,omitempty"`

	// unsure says a policy could not judge the artifact just now (a time limit, say): the answer
	// is not kept, so the next assert tries again.
	unsure bool
}

// Unsure reports whether a policy could not judge the artifact just now (a time limit, say), so
// that the answer should not be kept.
func (r *AssertResult) Unsure() bool { return r.unsure }

// AssertCompliance is an artifact's compliance in one trail (the spec's artifact compliance result).
type AssertCompliance struct {
	Unexpected           bool                `json:"unexpected"`
	ArtifactFingerprint  string              `json:"artifact_fingerprint"`
	Status               string              `json:"status"`
	IsCompliant          bool                `json:"is_compliant"`
	AttestationsStatuses []AssertAttestation `json:"attestations_statuses"`
	EvaluatedAt          float64             `json:"evaluated_at"`
}

// AssertAttestation is one expected or reported attestation of the artifact or its trail.
type AssertAttestation struct {
	AttestationName string `json:"attestation_name"`
	AttestationType string `json:"attestation_type"`
	Status          string `json:"status"`
	IsCompliant     *bool  `json:"is_compliant"`
	Unexpected      bool   `json:"unexpected"`
}

// AssertFlow is the artifact in one of the trails that reported it.
type AssertFlow struct {
	Flow             string           `json:"flow"`
	Trail            string           `json:"trail"`
	Compliant        bool             `json:"compliant"`
	ComplianceStatus AssertCompliance `json:"compliance_status"`
	HTMLURL          string           `json:"html_url"`
}

// AllowListing is the allowlist entry that lets the artifact run in the environment.
type AllowListing struct {
	AllowlistID     string  `json:"allowlist_id"`
	AllowedByUserID string  `json:"allowed_by_user_id"`
	Timestamp       float64 `json:"timestamp"`
	Description     string  `json:"description"`
}

// WhatIfResult is how a draft policy would judge an environment's latest snapshot.
type WhatIfResult struct {
	Environment   string `json:"environment"`
	SnapshotIndex *int   `json:"snapshot_index" doc:"null when the environment has no snapshot yet"`
	Policy        string `json:"policy"`
	Format        string `json:"format" enum:"yaml,rego"`
	// Compliant is whether every artifact would comply with the draft (allowlisted ones do whatever it says).
	Compliant     bool             `json:"compliant"`
	ArtifactCount int              `json:"artifact_count"`
	FailingCount  int              `json:"failing_count"`
	Artifacts     []WhatIfArtifact `json:"artifacts" doc:"every artifact of the snapshot, those that would fail first"`
}

// WhatIfArtifact is one artifact under the draft.
type WhatIfArtifact struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	Compliant   bool   `json:"compliant"`
	Allowlisted bool   `json:"allowlisted"`
	// CurrentlyCompliant is the verdict of the environment's attached policies now (null without policies).
	CurrentlyCompliant *bool                 `json:"currently_compliant"`
	Evaluation         policyeval.Evaluation `json:"policy_evaluation"`
}
