// Package attestkind decides the compliance of an attestation of each built-in kind from what its
// reporter sent, and checks the fields that decision needs: generic (is_compliant, true unless
// said otherwise), junit (no failures or errors), snyk (no high, medium or low issues), sonar
// (the quality gate passed), jira (every issue exists), pull_request (one exists; commit
// signature fields are kept only for providers that verify them), sarif (as its reporter says:
// `kosli attest sarif --compliant`) and system (a decision on a control, or an SBOM, recorded
// as compliant: nothing checks it against the artifact). Custom types are judged by their own rules (policies/customtype).
//
// It is the transport's partner: the caller decodes the body as its protocol words decoding
// errors, and words the field errors returned here as its protocol does.
package attestkind

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Verdict is what Judge decided.
type Verdict struct {
	// Type is the attestation type to store: the kind, except "decision" for a system attestation.
	Type      string
	Compliant bool
	// Control is the control a decision answers; empty for the other kinds.
	Control string
}

// FieldErrors are problems of an attestation's fields, by field path.
type FieldErrors map[string]string

func (e FieldErrors) Error() string {
	keys := slices.Collect(maps.Keys(e))
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + e[k]
	}
	return "invalid attestation: " + strings.Join(parts, "; ")
}

func fieldError(field, format string, args ...any) FieldErrors {
	return FieldErrors{field: fmt.Sprintf(format, args...)}
}

// ErrUnknownKind is the answer for a kind this package does not judge (custom included).
var ErrUnknownKind = errors.New("unknown attestation kind")

// Judge decides an attestation of kind. decode decodes the attestation's body into its argument
// (numbers as json.Number); its errors are returned unchanged. data holds the body's top-level
// fields, as json.RawMessage when they are as they came; Judge replaces those a kind normalizes
// (pull requests). Other problems are FieldErrors, or ErrUnknownKind.
func Judge(kind string, decode func(v any) error, data map[string]any) (Verdict, error) {
	v := Verdict{Type: kind}
	var err error
	switch kind {
	case "generic":
		v.Compliant, err = generic(decode, data)
	case "junit":
		v.Compliant, err = junit(decode)
	case "snyk":
		v.Compliant, err = snyk(decode)
	case "sonar":
		v.Compliant, err = sonar(decode)
	case "jira":
		v.Compliant, err = jira(decode)
	case "pull_request":
		v.Compliant, err = pullRequest(decode, data)
	case "sarif":
		v.Compliant, err = sarif(decode, data)
	case "system":
		return system(decode)
	default:
		return v, ErrUnknownKind
	}
	return v, err
}

// generic reads is_compliant; the Kosli CLI's --compliant defaults to true, and it always sends
// the field.
func generic(decode func(any) error, data map[string]any) (bool, error) {
	// The one field it needs, from the value already split out: decoding the whole body again
	// was a pass over every byte of user_data. encoding/json matches keys regardless of case
	// (the last match wins); a body with such a key is decoded whole, as before.
	var compliant *bool
	v, exact := data["is_compliant"].(json.RawMessage)
	if !exact || slices.ContainsFunc(slices.Collect(maps.Keys(data)), func(k string) bool {
		return k != "is_compliant" && strings.EqualFold(k, "is_compliant")
	}) {
		var b struct {
			IsCompliant *bool `json:"is_compliant"`
		}
		if err := decode(&b); err != nil {
			return false, err
		}
		compliant = b.IsCompliant
	} else if err := json.Unmarshal(v, &compliant); err != nil {
		in := string(v)
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			in = te.Value // as a decoder of the whole body names it
		}
		return false, fieldError("is_compliant", "Input should be a valid boolean [input: %s]", in)
	}
	return compliant == nil || *compliant, nil
}

// junit is compliant when no test suite reports failures or errors.
func junit(decode func(any) error) (bool, error) {
	var b struct {
		Results []struct {
			Name     string      `json:"name"`
			Failures json.Number `json:"failures"`
			Errors   json.Number `json:"errors"`
		} `json:"junit_results"`
	}
	if err := decode(&b); err != nil {
		return false, err
	}
	if b.Results == nil {
		return false, fieldError("junit_results", "Field required")
	}
	compliant := true
	for _, r := range b.Results {
		if numNonZero(r.Failures) || numNonZero(r.Errors) {
			compliant = false
		}
	}
	return compliant, nil
}

// snyk is compliant when no result counts high, medium or low issues.
func snyk(decode func(any) error) (bool, error) {
	var b struct {
		Results *struct {
			Results []map[string]any `json:"results"`
		} `json:"snyk_results"`
	}
	if err := decode(&b); err != nil {
		return false, err
	}
	if b.Results == nil {
		return false, fieldError("snyk_results", "Field required")
	}
	compliant := true
	for _, r := range b.Results.Results {
		for _, k := range []string{"high_count", "medium_count", "low_count"} {
			if n, ok := r[k].(json.Number); ok && numNonZero(n) {
				compliant = false
			}
		}
	}
	return compliant, nil
}

// sonar is compliant when the quality gate passed.
func sonar(decode func(any) error) (bool, error) {
	var b struct {
		Results *struct {
			QualityGate struct {
				Status string `json:"status"`
			} `json:"qualityGate"`
		} `json:"sonar_results"`
	}
	if err := decode(&b); err != nil {
		return false, err
	}
	if b.Results == nil {
		return false, fieldError("sonar_results", "Field required")
	}
	status := b.Results.QualityGate.Status
	return strings.EqualFold(status, "OK") || strings.EqualFold(status, "PASSED"), nil
}

// jira is compliant when it names issues and every one exists.
func jira(decode func(any) error) (bool, error) {
	var b struct {
		Results []struct {
			IssueExists bool `json:"issue_exists"`
		} `json:"jira_results"`
	}
	if err := decode(&b); err != nil {
		return false, err
	}
	compliant := len(b.Results) > 0
	for _, r := range b.Results {
		compliant = compliant && r.IssueExists
	}
	return compliant, nil
}

func numNonZero(n json.Number) bool {
	if n == "" {
		return false
	}
	f, err := n.Float64()
	return err != nil || f != 0
}

// signingProviders expose commit signature verification; for the others the fields are dropped.
var signingProviders = map[string]bool{"github": true, "gitlab": true}

// pullRequest normalizes pull requests: commit signature fields are kept only for providers that
// verify signatures, and the attestation is compliant when a pull request exists.
func pullRequest(decode func(any) error, data map[string]any) (bool, error) {
	var b struct {
		GitProvider  string           `json:"git_provider"`
		PullRequests []map[string]any `json:"pull_requests"`
	}
	if err := decode(&b); err != nil {
		return false, err
	}
	provider := strings.ToLower(b.GitProvider)
	prs := make([]any, 0, len(b.PullRequests))
	for i, pr := range b.PullRequests {
		if _, ok := pr["url"].(string); !ok {
			return false, fieldError(fmt.Sprintf("pull_requests[%d].url", i), "Field required")
		}
		if commits, ok := pr["commits"].([]any); ok {
			for _, c := range commits {
				if cm, ok := c.(map[string]any); ok && !signingProviders[provider] {
					delete(cm, "verified")
					delete(cm, "signature_state")
				}
			}
		}
		prs = append(prs, pr)
	}
	data["pull_requests"] = prs
	data["git_provider"] = b.GitProvider
	return len(b.PullRequests) > 0, nil
}

// sarif needs the scan summary the CLI reads from a SARIF file, an object; the compliance is the
// reporter's is_compliant, as for generic (the CLI does not derive it from the findings).
func sarif(decode func(any) error, data map[string]any) (bool, error) {
	raw, _ := data["sarif_results"].(json.RawMessage)
	if len(raw) == 0 || string(raw) == "null" {
		return false, fieldError("sarif_results", "Field required")
	}
	var results map[string]json.RawMessage
	if json.Unmarshal(raw, &results) != nil {
		return false, fieldError("sarif_results", "Input should be a valid dictionary")
	}
	return generic(decode, data)
}

// system is the family of system attestations; type_name says which: a decision on a control
// or an SBOM (`kosli attest sbom`).
func system(decode func(any) error) (Verdict, error) {
	var b struct {
		TypeName string `json:"type_name"`
	}
	if err := decode(&b); err != nil {
		return Verdict{}, err
	}
	if b.TypeName == "sbom" {
		return sbom(decode)
	}
	return decision(decode)
}

// sbomFingerprint is the SHA-256 of the SBOM file as the CLI records it.
var sbomFingerprint = regexp.MustCompile(`^[a-f0-9]{64}$`)

// sbom is an SBOM as `kosli attest sbom` reports it: its format, the SHA-256 of the file and
// the document summary the CLI read from it. It is recorded as reported, compliant.
func sbom(decode func(any) error) (Verdict, error) {
	var b struct {
		Data *struct {
			Format              *string         `json:"format"`
			OriginalFingerprint *string         `json:"original_fingerprint"`
			Document            json.RawMessage `json:"document"`
		} `json:"attestation_data"`
	}
	if err := decode(&b); err != nil {
		return Verdict{}, err
	}
	problems := FieldErrors{}
	switch {
	case b.Data == nil:
		problems["attestation_data"] = "Field required"
	default:
		if b.Data.Format == nil || *b.Data.Format == "" {
			problems["attestation_data.format"] = "Field required"
		}
		if fp := b.Data.OriginalFingerprint; fp == nil {
			problems["attestation_data.original_fingerprint"] = "Field required"
		} else if !sbomFingerprint.MatchString(*fp) {
			problems["attestation_data.original_fingerprint"] = fmt.Sprintf("String should match pattern '^[a-f0-9]{64}$' [input: %s]", *fp)
		}
	}
	if len(problems) > 0 {
		return Verdict{}, problems
	}
	return Verdict{Type: "sbom", Compliant: true}, nil
}

// decision is a system attestation: a decision on a control, compliant as it says.
func decision(decode func(any) error) (Verdict, error) {
	var b struct {
		TypeName string `json:"type_name"`
		Control  string `json:"control"`
		Data     *struct {
			IsCompliant *bool `json:"is_compliant"`
		} `json:"attestation_data"`
	}
	if err := decode(&b); err != nil {
		return Verdict{}, err
	}
	problems := FieldErrors{}
	switch {
	case b.TypeName == "":
		problems["type_name"] = "Field required"
	case b.TypeName != "decision":
		problems["type_name"] = fmt.Sprintf("Input should be 'decision' or 'sbom' [input: %s]", b.TypeName)
	}
	if b.Control == "" {
		problems["control"] = "Field required"
	}
	if b.Data == nil || b.Data.IsCompliant == nil {
		problems["attestation_data.is_compliant"] = "Field required"
	}
	if len(problems) > 0 {
		return Verdict{}, problems
	}
	return Verdict{Type: "decision", Compliant: *b.Data.IsCompliant, Control: b.Control}, nil
}
