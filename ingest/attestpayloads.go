package ingest

import "encoding/json"

// The data_json of each attestation kind, as the OpenAPI description documents it. Ingest decodes
// the common fields (AttestationCommon) itself, in one pass over data_json; each kind's own fields
// are read by that kind's compliance rules (judge), which decide what they require. Fields the rules
// do not check are optional here, and every object takes keys beyond these: data_json is stored as
// it came.

// AttestationFields is what every kind's data_json holds besides its own fields.
type AttestationFields struct {
	AttestationCommon
	UserData json.RawMessage `json:"user_data,omitempty" doc:"any JSON the caller keeps with the attestation ({} when not given)"`
}

// GenericAttestation is the data_json of a generic attestation.
type GenericAttestation struct {
	_ struct{} `additionalProperties:"true"`
	AttestationFields
	IsCompliant *bool `json:"is_compliant,omitempty" doc:"the attestation's compliance (true when left out)"`
}

// CustomAttestation is the data_json of an attestation of a custom type.
type CustomAttestation struct {
	_ struct{} `additionalProperties:"true"`
	AttestationFields
	TypeName        string          `json:"type_name" doc:"the custom type, name or name@vN"`
	AttestationData json.RawMessage `json:"attestation_data" doc:"the attested JSON, checked against the type's JSON Schema and judged by its jq rules"`
}

// JUnitAttestation is the data_json of a JUnit attestation: compliant when no suite has failures or errors.
type JUnitAttestation struct {
	_ struct{} `additionalProperties:"true"`
	AttestationFields
	Results []JUnitSuite `json:"junit_results" doc:"one entry a test suite"`
}

// JUnitSuite is one suite of junit_results.
type JUnitSuite struct {
	_         struct{} `additionalProperties:"true"`
	Name      string   `json:"name" required:"false"`
	Failures  float64  `json:"failures" required:"false"`
	Errors    float64  `json:"errors" required:"false"`
	Skipped   float64  `json:"skipped" required:"false"`
	Total     float64  `json:"total" required:"false"`
	Duration  float64  `json:"duration" required:"false" doc:"seconds"`
	Timestamp *float64 `json:"timestamp,omitempty" doc:"Unix seconds"`
}

// SnykAttestation is the data_json of a Snyk attestation: compliant when no result counts an issue.
type SnykAttestation struct {
	_ struct{} `additionalProperties:"true"`
	AttestationFields
	Results SnykResults `json:"snyk_results"`
}

// SnykResults is snyk_results.
type SnykResults struct {
	_             struct{} `additionalProperties:"true"`
	SchemaVersion string   `json:"schema_version,omitempty"`
	Tool          *struct {
		Name    string `json:"name,omitempty"`
		Version string `json:"version,omitempty"`
	} `json:"tool,omitempty"`
	Results []SnykResult `json:"results,omitempty"`
}

// SnykResult is one scan of snyk_results.
type SnykResult struct {
	_           struct{}          `additionalProperties:"true"`
	HighCount   float64           `json:"high_count" required:"false"`
	MediumCount float64           `json:"medium_count" required:"false"`
	LowCount    float64           `json:"low_count" required:"false"`
	High        []json.RawMessage `json:"high,omitempty" doc:"the high-severity issues"`
	Medium      []json.RawMessage `json:"medium,omitempty"`
	Low         []json.RawMessage `json:"low,omitempty"`
}

// SonarAttestation is the data_json of a SonarQube attestation: compliant when its quality gate passed.
type SonarAttestation struct {
	_ struct{} `additionalProperties:"true"`
	AttestationFields
	Results SonarResults `json:"sonar_results"`
}

// SonarResults is sonar_results, as SonarQube's analysis webhook reports it.
type SonarResults struct {
	_          struct{}        `additionalProperties:"true"`
	ServerURL  string          `json:"serverUrl,omitempty"`
	TaskID     string          `json:"taskId,omitempty"`
	Status     string          `json:"status,omitempty"`
	AnalysedAt string          `json:"analysedAt,omitempty"`
	Revision   string          `json:"revision,omitempty"`
	Project    json.RawMessage `json:"project,omitempty" doc:"{key, name, url}"`
	Branch     json.RawMessage `json:"branch,omitempty"`
	PR         json.RawMessage `json:"pullRequest,omitempty"`
	Gate       *struct {
		_      struct{} `additionalProperties:"true"`
		Status string   `json:"status" required:"false" doc:"OK or PASSED is compliant"`
	} `json:"qualityGate,omitempty"`
}

// JiraAttestation is the data_json of a Jira attestation: compliant when every issue exists.
type JiraAttestation struct {
	_ struct{} `additionalProperties:"true"`
	AttestationFields
	Results []JiraIssue `json:"jira_results,omitempty" doc:"no issue at all is not compliant"`
}

// JiraIssue is one issue of jira_results.
type JiraIssue struct {
	_           struct{}        `additionalProperties:"true"`
	IssueID     string          `json:"issue_id" required:"false"`
	IssueURL    string          `json:"issue_url" required:"false"`
	IssueExists bool            `json:"issue_exists" required:"false"`
	IssueFields json.RawMessage `json:"issue_fields,omitempty"`
}

// PullRequestAttestation is the data_json of a pull request attestation: compliant when there is a pull request.
type PullRequestAttestation struct {
	_ struct{} `additionalProperties:"true"`
	AttestationFields
	GitProvider  string        `json:"git_provider" required:"false" doc:"github, gitlab, bitbucket or azure; commit signatures are kept only for github and gitlab"`
	PullRequests []PullRequest `json:"pull_requests" required:"false"`
}

// PullRequest is one entry of pull_requests.
type PullRequest struct {
	_           struct{}          `additionalProperties:"true"`
	URL         string            `json:"url"`
	State       string            `json:"state,omitempty"`
	MergeCommit string            `json:"merge_commit,omitempty"`
	Author      string            `json:"author,omitempty"`
	Title       string            `json:"title,omitempty"`
	CreatedAt   json.RawMessage   `json:"created_at,omitempty"`
	MergedAt    json.RawMessage   `json:"merged_at,omitempty"`
	HeadRef     string            `json:"head_ref,omitempty"`
	BaseRef     string            `json:"base_ref,omitempty"`
	Approvers   []json.RawMessage `json:"approvers,omitempty" doc:"user names, or {username, state, timestamp}"`
	Commits     []PullCommit      `json:"commits,omitempty"`
}

// PullCommit is one commit of a pull request.
type PullCommit struct {
	_              struct{}        `additionalProperties:"true"`
	SHA1           string          `json:"sha1,omitempty"`
	Message        string          `json:"message,omitempty"`
	Author         string          `json:"author,omitempty"`
	AuthorUsername string          `json:"author_username,omitempty"`
	Timestamp      json.RawMessage `json:"timestamp,omitempty"`
	Branch         string          `json:"branch,omitempty"`
	URL            string          `json:"url,omitempty"`
	Verified       *bool           `json:"verified,omitempty" doc:"kept for github and gitlab only"`
	SignatureState string          `json:"signature_state,omitempty" doc:"kept for github and gitlab only"`
}

// DecisionAttestation is the data_json of a system attestation: a decision on a control
// (type_name decision), or an SBOM (type_name sbom, from `kosli attest sbom`).
type DecisionAttestation struct {
	_ struct{} `additionalProperties:"true"`
	AttestationFields
	TypeName string `json:"type_name" enum:"decision,sbom"`
	Control  string `json:"control,omitempty" required:"false" doc:"a decision: the identifier of the control decided"`
	Data     struct {
		_                   struct{}        `additionalProperties:"true"`
		IsCompliant         bool            `json:"is_compliant,omitempty" required:"false" doc:"a decision: its verdict (required)"`
		Format              string          `json:"format,omitempty" required:"false" doc:"an SBOM: its format, e.g. cyclonedx-json (required)"`
		OriginalFingerprint string          `json:"original_fingerprint,omitempty" required:"false" doc:"an SBOM: the SHA-256 of the file (required)"`
		Document            json.RawMessage `json:"document,omitempty" required:"false" doc:"an SBOM: what the CLI read from it (creation time, tools, subject, package count)"`
	} `json:"attestation_data"`
}

// SarifAttestation is the data_json of a SARIF attestation (`kosli attest sarif`): the scan
// summary the CLI reads from a SARIF 2.1.0 file; compliant as is_compliant says.
type SarifAttestation struct {
	_ struct{} `additionalProperties:"true"`
	AttestationFields
	IsCompliant *bool       `json:"is_compliant,omitempty" doc:"the attestation's compliance (true when left out)"`
	Results     SnykResults `json:"sarif_results" doc:"the findings by severity, in the shape of snyk_results"`
}
