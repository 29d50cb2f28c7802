package ingest

import (
	"context"
	"slices"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/template"
)

// TestFlowWhatIfJudgement: an override takes the place of the attestation it replaces, and the reasons name what
// is missing or failing at each level, the template's artifacts first.
func TestFlowWhatIfJudgement(t *testing.T) {
	draft, err := template.Parse([]byte(`version: 1
trail:
  attestations: [{name: pr, type: generic}, {name: scan, type: generic}]
  artifacts:
    - {name: backend, attestations: [{name: unit, type: junit}]}
    - {name: frontend}
`))
	if err != nil {
		t.Fatal(err)
	}
	facts := []store.AttestationFact{
		{ID: "a1", Name: "pr", Type: "generic", IsCompliant: false, CreatedAt: 1},
		{ID: "a2", Name: "pr", Type: "generic", IsCompliant: true, OverridesID: "a1", CreatedAt: 5},
		{ID: "a3", Name: "unit", Type: "junit", IsCompliant: false, TargetArtifact: "backend", CreatedAt: 2},
	}
	arts := []store.Artifact{{ID: "x", Fingerprint: "f00d", TemplateName: "backend", CreatedAt: 1}}
	in := whatIfTrailInput(facts, arts)
	if len(in.Attestations) != 2 || in.Attestations[0].ID != "a2" || in.Attestations[0].OverriddenID != "a1" ||
		!in.Attestations[0].IsCompliant || in.Attestations[0].CreatedAt != 1 {
		t.Fatalf("input: %+v", in.Attestations)
	}
	c, err := template.NewEngine(template.EngineOptions{}).Evaluate(context.Background(), draft, in)
	if err != nil {
		t.Fatal(err)
	}
	got := complianceReasons(c, draft.Trail)
	want := []string{"trail: scan (generic) is missing", "artifact backend: unit (junit) is not compliant", "artifact frontend: not reported"}
	if c.State != template.StateNonCompliant || !slices.Equal(got, want) {
		t.Errorf("state %s, reasons %q, want %q", c.State, got, want)
	}
}
