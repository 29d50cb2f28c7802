package attestkind

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// decoder decodes body as ingest does: numbers as json.Number.
func decoder(body string) func(any) error {
	return func(v any) error {
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		dec.UseNumber()
		return dec.Decode(v)
	}
}

// fields splits body into its top-level fields as they came, as ingest hands them over.
func fields(t *testing.T, body string) map[string]any {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	data := map[string]any{}
	for k, v := range raw {
		data[k] = v
	}
	return data
}

// TestGenericCompliance: a generic attestation's is_compliant is read as encoding/json reads it, whatever path the
// body takes (the split-out field, or the whole body when a key differs only in case).
func TestGenericCompliance(t *testing.T) {
	tests := []struct {
		body      string
		compliant bool
		fails     bool
	}{
		{`{"attestation_name": "x", "is_compliant": true}`, true, false},
		{`{"attestation_name": "x", "is_compliant": false}`, false, false},
		{`{"attestation_name": "x"}`, true, false}, // the CLI's default
		{`{"attestation_name": "x", "is_compliant": null}`, true, false},
		{`{"attestation_name": "x", "Is_Compliant": false}`, false, false},
		{`{"attestation_name": "x", "is_compliant": false, "IS_COMPLIANT": true}`, true, false},
		{`{"attestation_name": "x", "is_compliant": "yes"}`, false, true},
	}
	for _, tt := range tests {
		v, err := Judge("generic", decoder(tt.body), fields(t, tt.body))
		if tt.fails {
			var fe FieldErrors
			if !errors.As(err, &fe) || fe["is_compliant"] == "" {
				t.Errorf("%s: error %v, want one naming is_compliant", tt.body, err)
			}
			continue
		}
		if err != nil || v.Compliant != tt.compliant || v.Type != "generic" {
			t.Errorf("%s: %+v, %v; want compliant %v", tt.body, v, err, tt.compliant)
		}
	}
}

// zeroFP is a well-formed SHA-256.
const zeroFP = "0000000000000000000000000000000000000000000000000000000000000000"

// TestKinds: each built-in kind's rule, and the field each one requires.
func TestKinds(t *testing.T) {
	tests := []struct {
		kind, body string
		compliant  bool
		field      string // the field a refusal names; "" when accepted
	}{
		{"junit", `{"junit_results": [{"name": "s", "failures": 0, "errors": 0}]}`, true, ""},
		{"junit", `{"junit_results": [{"name": "s", "failures": 0}, {"name": "t", "errors": 2}]}`, false, ""},
		{"junit", `{"junit_results": []}`, true, ""},
		{"junit", `{}`, false, "junit_results"},
		{"snyk", `{"snyk_results": {"results": [{"high_count": 0, "medium_count": 0, "low_count": 0}]}}`, true, ""},
		{"snyk", `{"snyk_results": {"results": [{"high_count": 0, "low_count": 1}]}}`, false, ""},
		{"snyk", `{}`, false, "snyk_results"},
		{"sonar", `{"sonar_results": {"qualityGate": {"status": "ok"}}}`, true, ""},
		{"sonar", `{"sonar_results": {"qualityGate": {"status": "PASSED"}}}`, true, ""},
		{"sonar", `{"sonar_results": {"qualityGate": {"status": "ERROR"}}}`, false, ""},
		{"sonar", `{}`, false, "sonar_results"},
		{"jira", `{"jira_results": [{"issue_exists": true}, {"issue_exists": true}]}`, true, ""},
		{"jira", `{"jira_results": [{"issue_exists": true}, {"issue_exists": false}]}`, false, ""},
		{"jira", `{}`, false, ""},
		{"pull_request", `{"git_provider": "github", "pull_requests": [{"url": "u"}]}`, true, ""},
		{"pull_request", `{"git_provider": "github", "pull_requests": []}`, false, ""},
		{"pull_request", `{"pull_requests": [{"url": "u"}, {"title": "no url"}]}`, false, "pull_requests[1].url"},
		{"system", `{"type_name": "decision", "control": "C-1", "attestation_data": {"is_compliant": false}}`, false, ""},
		{"system", `{"type_name": "other", "control": "C-1", "attestation_data": {"is_compliant": true}}`, false, "type_name"},
		{"system", `{"type_name": "decision", "attestation_data": {"is_compliant": true}}`, false, "control"},
		{"system", `{"type_name": "decision", "control": "C-1"}`, false, "attestation_data.is_compliant"},
		// sarif: as its reporter says, with its results; sbom: a system attestation, compliant.
		{"sarif", `{"sarif_results": {"results": []}, "is_compliant": false}`, false, ""},
		{"sarif", `{"sarif_results": {"results": [{"high_count": 3}]}}`, true, ""},
		{"sarif", `{"is_compliant": true}`, false, "sarif_results"},
		{"sarif", `{"sarif_results": [1]}`, false, "sarif_results"},
		{"system", `{"type_name": "sbom", "attestation_data": {"format": "spdx-json", "original_fingerprint": "` + zeroFP + `", "document": {}}}`, true, ""},
		{"system", `{"type_name": "sbom", "attestation_data": {"original_fingerprint": "` + zeroFP + `"}}`, false, "attestation_data.format"},
		{"system", `{"type_name": "sbom", "attestation_data": {"format": "x", "original_fingerprint": "ABC"}}`, false, "attestation_data.original_fingerprint"},
		{"system", `{"type_name": "sbom"}`, false, "attestation_data"},
	}
	for _, tt := range tests {
		v, err := Judge(tt.kind, decoder(tt.body), fields(t, tt.body))
		if tt.field != "" {
			var fe FieldErrors
			if !errors.As(err, &fe) || fe[tt.field] == "" {
				t.Errorf("%s %s: error %v, want one naming %s", tt.kind, tt.body, err, tt.field)
			}
			continue
		}
		if err != nil || v.Compliant != tt.compliant {
			t.Errorf("%s %s: %+v, %v; want compliant %v", tt.kind, tt.body, v, err, tt.compliant)
		}
	}
}

// TestDecision: a system attestation is stored as a decision on its control, or as an sbom.
func TestDecision(t *testing.T) {
	body := `{"type_name": "decision", "control": "C-1", "attestation_data": {"is_compliant": true}}`
	v, err := Judge("system", decoder(body), fields(t, body))
	if err != nil || v != (Verdict{Type: "decision", Compliant: true, Control: "C-1"}) {
		t.Fatalf("%+v, %v; want a compliant decision on C-1", v, err)
	}
	// An SBOM is the other system attestation: of its own type, on no control.
	body = `{"type_name": "sbom", "attestation_data": {"format": "cyclonedx-json", "original_fingerprint": "` + zeroFP + `"}}`
	if v, err = Judge("system", decoder(body), fields(t, body)); err != nil || v != (Verdict{Type: "sbom", Compliant: true}) {
		t.Fatalf("%+v, %v; want a compliant sbom", v, err)
	}
}

// TestPullRequestSignatures: commit signature fields stay only for providers that verify them.
func TestPullRequestSignatures(t *testing.T) {
	for provider, kept := range map[string]bool{"GitHub": true, "gitlab": true, "bitbucket": false, "azure": false} {
		body := `{"git_provider": "` + provider + `", "pull_requests": [{"url": "u", "commits": [{"sha": "a", "verified": true, "signature_state": "valid"}]}]}`
		data := fields(t, body)
		if _, err := Judge("pull_request", decoder(body), data); err != nil {
			t.Fatal(err)
		}
		commit := data["pull_requests"].([]any)[0].(map[string]any)["commits"].([]any)[0].(map[string]any)
		_, verified := commit["verified"]
		_, state := commit["signature_state"]
		if verified != kept || state != kept || commit["sha"] != "a" {
			t.Errorf("%s: commit %v; signature fields kept: want %v", provider, commit, kept)
		}
		if data["git_provider"] != provider {
			t.Errorf("%s: git_provider %v", provider, data["git_provider"])
		}
	}
}

// TestDecodeErrorsPassThrough: the caller's decoding errors come back as they are, and an unknown kind says so.
func TestDecodeErrorsPassThrough(t *testing.T) {
	boom := errors.New("worded by the transport")
	for _, kind := range []string{"junit", "snyk", "sonar", "jira", "pull_request", "system"} {
		if _, err := Judge(kind, func(any) error { return boom }, map[string]any{}); err != boom {
			t.Errorf("%s: %v, want the decoder's error", kind, err)
		}
	}
	if _, err := Judge("custom", decoder(`{}`), map[string]any{}); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("custom: %v, want ErrUnknownKind", err)
	}
}
