package policyquery

import (
	"encoding/json"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

// TestArtifactCompliance: an artifact's compliance in a trail is the trail's own attestations followed by those of
// the artifact's slot, found by fingerprint; a trail not evaluated yet shows only the artifact's state.
func TestArtifactCompliance(t *testing.T) {
	doc := json.RawMessage(`{"evaluated_at": 12.5,
		"attestations_statuses": [{"attestation_name": "trail-level", "status": "COMPLETE"}],
		"artifacts_statuses": {
			"other": {"artifact_fingerprint": "bbb", "attestations_statuses": [{"attestation_name": "not-mine"}]},
			"backend": {"artifact_fingerprint": "aaa", "unexpected": true,
				"attestations_statuses": [{"attestation_name": "unit-tests", "attestation_type": "junit", "status": "COMPLETE"}]}}}`)
	c := artifactCompliance("aaa", "NON-COMPLIANT", doc)
	names := []string{}
	for _, a := range c.AttestationsStatuses {
		names = append(names, a.AttestationName)
	}
	if c.IsCompliant || !c.Unexpected || c.EvaluatedAt != 12.5 || c.Status != "NON-COMPLIANT" ||
		len(names) != 2 || names[0] != "trail-level" || names[1] != "unit-tests" {
		t.Fatalf("compliance %+v (attestations %v)", c, names)
	}

	for _, raw := range []json.RawMessage{nil, json.RawMessage(`not json`)} {
		c := artifactCompliance("aaa", "COMPLIANT", raw)
		if !c.IsCompliant || c.EvaluatedAt != 0 || c.AttestationsStatuses == nil || len(c.AttestationsStatuses) != 0 {
			t.Errorf("%q: %+v, want the state alone with an empty list", raw, c)
		}
	}
}

// TestEnvironmentJudged: only an environment with a verdict for the artifact or policies attached judges it.
func TestEnvironmentJudged(t *testing.T) {
	if (EnvironmentFacts{}).Judged() {
		t.Error("an environment without verdicts or policies judged the artifact")
	}
	if !(EnvironmentFacts{Attached: make([]store.AttachedPolicy, 1)}).Judged() || !(EnvironmentFacts{Verdicts: make([]store.Verdict, 1)}).Judged() {
		t.Error("an environment with policies did not judge the artifact")
	}
}
