package policyeval

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/envpolicy"
)

// TestArtifactAttestations: an artifact sees its trail's own attestations and its own (by fingerprint, or bound
// to its template slot before it existed), not another artifact's; an override takes the place of what it
// overrides; a decision carries its control.
func TestArtifactAttestations(t *testing.T) {
	fp, other := "aa", "bb"
	facts := []store.AttestationFact{
		{ID: "pr", Name: "pr", Type: "pull_request", IsCompliant: true, CreatedAt: 1},
		{ID: "tests", Name: "tests", Type: "junit", IsCompliant: false, ArtifactFingerprint: fp, TargetArtifact: "api", CreatedAt: 2},
		{ID: "scan", Name: "scan", Type: "snyk", IsCompliant: true, TargetArtifact: "api", CreatedAt: 3},
		{ID: "theirs", Name: "tests", Type: "junit", IsCompliant: true, ArtifactFingerprint: other, CreatedAt: 4},
		{ID: "ok", Name: "tests", Type: "junit", IsCompliant: true, OverridesID: "tests", CreatedAt: 5},
		{ID: "release", Name: "release", Type: "decision", IsCompliant: true, ArtifactFingerprint: fp, CreatedAt: 6},
	}
	ev := &Evidence{
		reports: map[string][]Report{fp: {{
			Artifact: store.Artifact{Fingerprint: fp, TemplateName: "api", TrailID: "t1"},
			Flow:     store.Flow{Name: "api-ci", Tags: map[string]string{"risk": "high"}},
			Trail:    store.Trail{ID: "t1", Name: "main", State: "COMPLIANT"},
		}}},
		trails: map[string]*trailFacts{"t1": splitFacts(facts, map[string]string{"release": "CTL-1"})},
	}
	got := ev.Artifact("api:1", fp, true)
	want := envpolicy.Artifact{Name: "api:1", Fingerprint: fp, Allowlisted: true, Trails: []envpolicy.Trail{{
		Flow: envpolicy.Flow{Name: "api-ci", Tags: map[string]string{"risk": "high"}}, Name: "main", State: "COMPLIANT",
		Attestations: []envpolicy.Attestation{
			{ID: "pr", Name: "pr", Type: "pull_request", Compliant: true, CreatedAt: 1},
			{ID: "ok", Name: "tests", Type: "junit", Compliant: true, CreatedAt: 2, OnArtifact: true},
			{ID: "release", Name: "release", Type: "decision", Compliant: true, CreatedAt: 6, OnArtifact: true, Control: "CTL-1"},
			{ID: "scan", Name: "scan", Type: "snyk", Compliant: true, CreatedAt: 3, OnArtifact: true},
		},
	}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Artifact =\n%+v\nwant\n%+v", got, want)
	}
	if none := ev.Artifact("x", "cc", false); len(none.Trails) != 0 {
		t.Errorf("an artifact of no flow has trails: %+v", none)
	}
}

// TestExpand: stored references become the evaluations the API shows, in order, with their rule evaluations.
func TestExpand(t *testing.T) {
	rules := json.RawMessage(`[{"rule":{"type":"provenance"},"satisfied":false}]`)
	evals := Index([]store.PolicyEvaluation{{PolicyID: "p1", InputHash: "h", RuleEvaluations: rules}})
	got := Expand([]store.VerdictPolicy{{Name: "prod", Version: 2, ID: "p1"}, {Name: "gone", Version: 1, ID: "p9", Compliant: true}}, "h", evals)
	if len(got) != 2 || got[0].PolicyName != "prod" || got[0].PolicyVersion != 2 || got[0].Status != envpolicy.StatusNonCompliant ||
		string(got[0].RuleEvaluations) != string(rules) || got[1].Status != envpolicy.StatusCompliant || string(got[1].RuleEvaluations) != "[]" {
		t.Errorf("Expand = %+v", got)
	}
	var failed []envpolicy.RuleEvaluation
	if err := json.Unmarshal(ErrorRules("boom"), &failed); err != nil || len(failed) != 1 || failed[0].Satisfied ||
		failed[0].Resolutions[0].Type != ResolutionEvaluationError || failed[0].Resolutions[0].Message != "boom" {
		t.Errorf("ErrorRules = %+v, %v", failed, err)
	}
}
