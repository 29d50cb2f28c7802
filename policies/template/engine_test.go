package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/veritrail/veritrail/policies/rego"
)

// Builders for inputs and expected statuses.

func trailAtt(id, name, typ string, ok bool, at float64) Attestation {
	return Attestation{ID: id, Name: name, Type: typ, IsCompliant: ok, CreatedAt: at}
}

func artAtt(id, name, typ string, ok bool, at float64, fingerprint, target string) Attestation {
	return Attestation{ID: id, Name: name, Type: typ, IsCompliant: ok, CreatedAt: at,
		ArtifactFingerprint: fingerprint, TargetArtifact: target}
}

func artifact(id, fingerprint, templateName string, at float64) Artifact {
	return Artifact{ID: id, Fingerprint: fingerprint, TemplateName: templateName, CreatedAt: at}
}

func done(name, typ, id string, ok bool) AttestationStatus {
	return AttestationStatus{Name: name, Type: typ, ID: id, Status: StatusComplete, IsCompliant: &ok}
}

func unexpected(name, typ, id string, ok bool) AttestationStatus {
	s := done(name, typ, id, ok)
	s.Unexpected = true
	return s
}

func missing(name, typ string) AttestationStatus {
	return AttestationStatus{Name: name, Type: typ, Status: StatusMissing}
}

func artStatus(id, fingerprint, status string, atts ...AttestationStatus) ArtifactStatus {
	if atts == nil {
		atts = []AttestationStatus{}
	}
	return ArtifactStatus{ID: id, Fingerprint: fingerprint, Status: status, IsCompliant: status == StateCompliant, Attestations: atts}
}

func unexpectedArt(id, fingerprint, status string, atts ...AttestationStatus) ArtifactStatus {
	s := artStatus(id, fingerprint, status, atts...)
	s.Unexpected = true
	return s
}

func missingArt(atts ...AttestationStatus) ArtifactStatus {
	return artStatus("", "", StatusMissing, atts...)
}

func verdict(state string, atts []AttestationStatus, arts map[string]ArtifactStatus) TrailCompliance {
	if atts == nil {
		atts = []AttestationStatus{}
	}
	if arts == nil {
		arts = map[string]ArtifactStatus{}
	}
	return TrailCompliance{State: state, IsCompliant: state == StateCompliant, Attestations: atts, Artifacts: arts}
}

func atts(s ...AttestationStatus) []AttestationStatus { return s }

const basicTemplate = `
version: 1
trail:
  attestations:
  - {name: pr, type: pull_request}
  - {name: lint, type: generic}
  artifacts:
  - name: cli
    attestations:
    - {name: sbom, type: generic}
    - {name: scan, type: snyk}
  - name: docs
    attestations:
    - {name: sbom, type: generic}
`

const (
	fpCli   = "c11c11c11c11c11c11c11c11c11c11c11c11c11c11c11c11c11c11c11c11c11c"
	fpCli2  = "c22c22c22c22c22c22c22c22c22c22c22c22c22c22c22c22c22c22c22c22c22c"
	fpDocs  = "d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d00d"
	fpOther = "0be0be0be0be0be0be0be0be0be0be0be0be0be0be0be0be0be0be0be0be0be0"
)

// basicComplete is every piece of evidence basicTemplate asks for, all compliant.
func basicComplete() TrailInput {
	return TrailInput{
		Attestations: []Attestation{
			trailAtt("pr1", "pr", "pull_request", true, 1),
			trailAtt("lint1", "lint", "generic", true, 2),
			artAtt("sbom1", "sbom", "generic", true, 4, fpCli, "cli"),
			artAtt("scan1", "scan", "snyk", true, 5, fpCli, "cli"),
			artAtt("sbom2", "sbom", "generic", true, 6, fpDocs, "docs"),
		},
		Artifacts: []Artifact{artifact("a-cli", fpCli, "cli", 3), artifact("a-docs", fpDocs, "docs", 3)},
	}
}

func basicCompleteStatuses() ([]AttestationStatus, map[string]ArtifactStatus) {
	return atts(done("pr", "pull_request", "pr1", true), done("lint", "generic", "lint1", true)),
		map[string]ArtifactStatus{
			"cli":  artStatus("a-cli", fpCli, StateCompliant, done("sbom", "generic", "sbom1", true), done("scan", "snyk", "scan1", true)),
			"docs": artStatus("a-docs", fpDocs, StateCompliant, done("sbom", "generic", "sbom2", true)),
		}
}

// with returns in plus more attestations and artifacts.
func with(in TrailInput, as []Attestation, arts ...Artifact) TrailInput {
	return TrailInput{Attestations: append(slices.Clone(in.Attestations), as...), Artifacts: append(slices.Clone(in.Artifacts), arts...)}
}

type evalCase struct {
	name     string
	template string // YAML; "<nil>" for no template
	in       TrailInput
	want     TrailCompliance
}

func evalCases() []evalCase {
	trailOK, artsOK := basicCompleteStatuses()
	return []evalCase{
		// Rule 6: templates that expect nothing.
		{
			name: "rule 6: empty template, empty trail", template: "",
			want: verdict(StateCompliant, nil, nil),
		},
		{
			name: "rule 6: no template, every attestation compliant", template: "<nil>",
			in: TrailInput{Attestations: []Attestation{
				trailAtt("z1", "zeta", "generic", true, 1), trailAtt("a1", "alpha", "junit", true, 2)}},
			want: verdict(StateCompliant, atts(unexpected("alpha", "junit", "a1", true), unexpected("zeta", "generic", "z1", true)), nil),
		},
		{
			name: "rule 6: empty template, one attestation not compliant", template: "version: 1\n",
			in: TrailInput{Attestations: []Attestation{
				trailAtt("a1", "alpha", "generic", true, 1), trailAtt("b1", "beta", "generic", false, 2)}},
			want: verdict(StateNonCompliant, atts(unexpected("alpha", "generic", "a1", true), unexpected("beta", "generic", "b1", false)), nil),
		},
		{
			name: "rule 6: empty template, artifacts and their evidence are unexpected", template: "trail: null\n",
			in: TrailInput{
				Attestations: []Attestation{
					artAtt("t1", "unit-test", "junit", true, 2, fpCli, "cli"),
					artAtt("s1", "sbom", "generic", true, 3, fpDocs, ""),
				},
				Artifacts: []Artifact{artifact("a-cli", fpCli, "cli", 1), artifact("a-docs", fpDocs, "", 1)},
			},
			want: verdict(StateCompliant, nil, map[string]ArtifactStatus{
				"cli":  unexpectedArt("a-cli", fpCli, StateCompliant, unexpected("unit-test", "junit", "t1", true)),
				fpDocs: unexpectedArt("a-docs", fpDocs, StateCompliant, unexpected("sbom", "generic", "s1", true)),
			}),
		},

		// Rules 2 and 4: nothing or everything reported.
		{
			name: "rules 2, 4: nothing reported", template: basicTemplate,
			want: verdict(StateIncomplete, atts(missing("pr", "pull_request"), missing("lint", "generic")), map[string]ArtifactStatus{
				"cli":  missingArt(missing("sbom", "generic"), missing("scan", "snyk")),
				"docs": missingArt(missing("sbom", "generic")),
			}),
		},
		{
			name: "rule 2: everything reported and compliant", template: basicTemplate, in: basicComplete(),
			want: verdict(StateCompliant, trailOK, artsOK),
		},
		{
			name: "rule 7: expected entries keep template order whatever the report order", template: basicTemplate,
			in: func() TrailInput {
				in := basicComplete()
				slices.Reverse(in.Attestations)
				slices.Reverse(in.Artifacts)
				return in
			}(),
			want: verdict(StateCompliant, trailOK, artsOK),
		},

		// Rule 1: binding.
		{
			name: "rule 1: evidence reported before its artifact binds by target when the artifact arrives", template: basicTemplate,
			in: TrailInput{
				Attestations: []Attestation{
					trailAtt("pr1", "pr", "pull_request", true, 1),
					trailAtt("lint1", "lint", "generic", true, 2),
					artAtt("sbom1", "sbom", "generic", true, 3, "", "cli"),      // no fingerprint yet
					artAtt("scan1", "scan", "snyk", true, 4, "", "cli"),         // no fingerprint yet
					artAtt("sbom2", "sbom", "generic", true, 5, fpDocs, "docs"), // fingerprint of an artifact not reported yet
				},
				Artifacts: []Artifact{artifact("a-cli", fpCli, "cli", 10), artifact("a-docs", fpDocs, "docs", 11)},
			},
			want: verdict(StateCompliant, trailOK, map[string]ArtifactStatus{
				"cli":  artStatus("a-cli", fpCli, StateCompliant, done("sbom", "generic", "sbom1", true), done("scan", "snyk", "scan1", true)),
				"docs": artStatus("a-docs", fpDocs, StateCompliant, done("sbom", "generic", "sbom2", true)),
			}),
		},
		{
			name: "rules 1, 4: evidence for an artifact not reported yet waits (even non-compliant evidence)", template: basicTemplate,
			in: TrailInput{Attestations: []Attestation{
				trailAtt("pr1", "pr", "pull_request", true, 1),
				trailAtt("lint1", "lint", "generic", true, 2),
				artAtt("sbom1", "sbom", "generic", false, 3, "", "cli"),
				artAtt("sbom2", "sbom", "generic", true, 5, fpDocs, "docs"),
			}},
			want: verdict(StateIncomplete, trailOK, map[string]ArtifactStatus{
				"cli":  missingArt(missing("sbom", "generic"), missing("scan", "snyk")),
				"docs": missingArt(missing("sbom", "generic")),
			}),
		},
		{
			name: "rule 1: a fingerprint alone binds to the artifact that has it", template: basicTemplate,
			in: func() TrailInput {
				in := basicComplete()
				for i := range in.Attestations {
					in.Attestations[i].TargetArtifact = ""
				}
				return in
			}(),
			want: verdict(StateCompliant, trailOK, artsOK),
		},
		{
			name: "rule 1: a known fingerprint wins over the target", template: basicTemplate,
			in: with(basicComplete(), []Attestation{artAtt("sbom3", "sbom", "generic", false, 9, fpCli, "docs")}),
			want: verdict(StateNonCompliant, trailOK, map[string]ArtifactStatus{
				"cli":  artStatus("a-cli", fpCli, StateNonCompliant, done("sbom", "generic", "sbom3", false), done("scan", "snyk", "scan1", true)),
				"docs": artsOK["docs"],
			}),
		},
		{
			name: "rule 1: a fingerprint no artifact has falls back to the target", template: basicTemplate,
			in: with(basicComplete(), []Attestation{artAtt("scan2", "scan", "snyk", false, 9, fpOther, "cli")}),
			want: verdict(StateNonCompliant, trailOK, map[string]ArtifactStatus{
				"cli":  artStatus("a-cli", fpCli, StateNonCompliant, done("sbom", "generic", "sbom1", true), done("scan", "snyk", "scan2", false)),
				"docs": artsOK["docs"],
			}),
		},
		{
			name: "rule 1: a fingerprint no artifact has, without target, gets an unexpected entry keyed by it", template: basicTemplate,
			in: with(basicComplete(), []Attestation{
				artAtt("x1", "provenance", "custom:provenance", false, 9, fpOther, ""),
				artAtt("x2", "sbom", "generic", true, 10, fpOther, ""),
			}),
			want: verdict(StateNonCompliant, trailOK, map[string]ArtifactStatus{
				"cli": artsOK["cli"], "docs": artsOK["docs"],
				fpOther: unexpectedArt("", fpOther, StateNonCompliant,
					unexpected("provenance", "custom:provenance", "x1", false), unexpected("sbom", "generic", "x2", true)),
			}),
		},
		{
			name: "rule 1: a target the template does not name gets an unexpected entry keyed by it", template: basicTemplate,
			in: with(basicComplete(), []Attestation{artAtt("t1", "unit-test", "junit", true, 9, "", "tools")}),
			want: verdict(StateCompliant, trailOK, map[string]ArtifactStatus{
				"cli": artsOK["cli"], "docs": artsOK["docs"],
				"tools": unexpectedArt("", "", StateCompliant, unexpected("unit-test", "junit", "t1", true)),
			}),
		},
		{
			name: "rule 1: an artifact-level attestation is never trail-level, and vice versa", template: basicTemplate,
			in: with(basicComplete(), []Attestation{
				artAtt("lint2", "lint", "generic", true, 9, fpCli, ""),
				trailAtt("sbom9", "sbom", "generic", true, 10),
			}),
			want: verdict(StateCompliant,
				append(slices.Clone(trailOK), unexpected("sbom", "generic", "sbom9", true)),
				map[string]ArtifactStatus{
					"cli": artStatus("a-cli", fpCli, StateCompliant, done("sbom", "generic", "sbom1", true),
						done("scan", "snyk", "scan1", true), unexpected("lint", "generic", "lint2", true)),
					"docs": artsOK["docs"],
				}),
		},
		{
			name: "rule 1: one fingerprint in two slots: its evidence binds to both unless it names one", template: basicTemplate,
			in: TrailInput{
				Attestations: []Attestation{
					trailAtt("pr1", "pr", "pull_request", true, 1),
					trailAtt("lint1", "lint", "generic", true, 2),
					artAtt("sbom1", "sbom", "generic", true, 4, fpCli, ""),
					artAtt("scan1", "scan", "snyk", false, 5, fpCli, "docs"),
				},
				Artifacts: []Artifact{artifact("a1", fpCli, "cli", 3), artifact("a2", fpCli, "docs", 3)},
			},
			want: verdict(StateNonCompliant, trailOK, map[string]ArtifactStatus{
				"cli":  artStatus("a1", fpCli, StateIncomplete, done("sbom", "generic", "sbom1", true), missing("scan", "snyk")),
				"docs": artStatus("a2", fpCli, StateNonCompliant, done("sbom", "generic", "sbom1", true), unexpected("scan", "snyk", "scan1", false)),
			}),
		},

		// Rule 2: latest wins, overrides, types.
		{
			name: "rule 2: the latest by CreatedAt fills the slot, not the last reported", template: "trail: {attestations: [{name: lint, type: generic}]}",
			in: TrailInput{Attestations: []Attestation{
				trailAtt("l1", "lint", "generic", false, 1),
				trailAtt("l2", "lint", "generic", true, 3),
				trailAtt("l3", "lint", "generic", false, 2),
			}},
			want: verdict(StateCompliant, atts(done("lint", "generic", "l2", true)), nil),
		},
		{
			name: "rule 2: equal CreatedAt: the later report wins", template: "trail: {attestations: [{name: lint, type: generic}]}",
			in: TrailInput{Attestations: []Attestation{
				trailAtt("l1", "lint", "generic", true, 5),
				trailAtt("l2", "lint", "generic", false, 5),
			}},
			want: verdict(StateNonCompliant, atts(done("lint", "generic", "l2", false)), nil),
		},
		{
			name: "rule 2: an override is the latest and carries the id it replaced", template: "trail: {attestations: [{name: lint, type: generic}]}",
			in: TrailInput{Attestations: []Attestation{
				trailAtt("l1", "lint", "generic", false, 1),
				{ID: "l2", Name: "lint", Type: "generic", IsCompliant: true, OverriddenID: "l1", CreatedAt: 2},
			}},
			want: func() TrailCompliance {
				s := done("lint", "generic", "l2", true)
				s.OverriddenID = "l1"
				return verdict(StateCompliant, atts(s), nil)
			}(),
		},
		{
			name: "rule 2: an override on an artifact attestation", template: basicTemplate,
			in: with(basicComplete(), []Attestation{
				artAtt("scan2", "scan", "snyk", false, 7, fpCli, "cli"),
				{ID: "scan3", Name: "scan", Type: "snyk", IsCompliant: true, OverriddenID: "scan2", CreatedAt: 8, ArtifactFingerprint: fpCli, TargetArtifact: "cli"},
			}),
			want: func() TrailCompliance {
				s := done("scan", "snyk", "scan3", true)
				s.OverriddenID = "scan2"
				return verdict(StateCompliant, trailOK, map[string]ArtifactStatus{
					"cli":  artStatus("a-cli", fpCli, StateCompliant, done("sbom", "generic", "sbom1", true), s),
					"docs": artsOK["docs"],
				})
			}(),
		},
		{
			name: "rule 2: * matches any type", template: "trail: {attestations: [{name: evidence, type: '*'}, {name: other, type: '*'}]}",
			in:   TrailInput{Attestations: []Attestation{trailAtt("e1", "evidence", "custom:whatever", true, 1)}},
			want: verdict(StateIncomplete, atts(done("evidence", "custom:whatever", "e1", true), missing("other", "*")), nil),
		},
		{
			name:     "rule 2: decision matches decision (and the hosted service's system:decision), not another type",
			template: "trail: {attestations: [{name: d1, type: decision}, {name: d2, type: decision}, {name: d3, type: decision}]}",
			in: TrailInput{Attestations: []Attestation{
				trailAtt("1", "d1", "decision", true, 1),
				trailAtt("2", "d2", "system:decision", true, 1),
				trailAtt("3", "d3", "generic", true, 1),
			}},
			want: verdict(StateIncomplete, atts(done("d1", "decision", "1", true), done("d2", "system:decision", "2", true),
				missing("d3", "decision"), unexpected("d3", "generic", "3", true)), nil),
		},
		{
			name: "rule 2: custom types match exactly", template: "trail: {attestations: [{name: a, type: 'custom:four-eyes'}, {name: b, type: 'custom:four-eyes'}]}",
			in: TrailInput{Attestations: []Attestation{
				trailAtt("1", "a", "custom:four-eyes", true, 1),
				trailAtt("2", "b", "custom:two-eyes", true, 1),
			}},
			want: verdict(StateIncomplete, atts(done("a", "custom:four-eyes", "1", true), missing("b", "custom:four-eyes"),
				unexpected("b", "custom:two-eyes", "2", true)), nil),
		},
		{
			name: "rule 2: a later same-name attestation of another type empties the slot", template: "trail: {attestations: [{name: scan, type: snyk}]}",
			in: TrailInput{Attestations: []Attestation{
				trailAtt("s1", "scan", "snyk", true, 1),
				trailAtt("s2", "scan", "generic", true, 2),
			}},
			want: verdict(StateIncomplete, atts(missing("scan", "snyk"), unexpected("scan", "generic", "s2", true)), nil),
		},

		// Rule 3.
		{
			name:     "rule 3: unexpected attestations come after the expected ones, by name, latest per name",
			template: "trail: {attestations: [{name: lint, type: generic}]}",
			in: TrailInput{Attestations: []Attestation{
				trailAtt("z1", "zeta", "generic", true, 1),
				trailAtt("a1", "alpha", "generic", false, 2),
				trailAtt("l1", "lint", "generic", true, 3),
				trailAtt("a2", "alpha", "junit", true, 4),
				trailAtt("m1", "mu", "snyk", true, 0),
			}},
			want: verdict(StateCompliant, atts(done("lint", "generic", "l1", true), unexpected("alpha", "junit", "a2", true),
				unexpected("mu", "snyk", "m1", true), unexpected("zeta", "generic", "z1", true)), nil),
		},
		{
			name: "rules 3, 5: an unexpected non-compliant artifact attestation makes the artifact non-compliant", template: basicTemplate,
			in: with(basicComplete(), []Attestation{artAtt("x1", "extra", "generic", false, 9, fpCli, "cli")}),
			want: verdict(StateNonCompliant, trailOK, map[string]ArtifactStatus{
				"cli": artStatus("a-cli", fpCli, StateNonCompliant, done("sbom", "generic", "sbom1", true),
					done("scan", "snyk", "scan1", true), unexpected("extra", "generic", "x1", false)),
				"docs": artsOK["docs"],
			}),
		},

		// Rule 4.
		{
			name: "rule 4: the latest artifact wins its slot; evidence about the replaced one does not count", template: basicTemplate,
			in: TrailInput{
				Attestations: []Attestation{
					trailAtt("pr1", "pr", "pull_request", true, 1),
					trailAtt("lint1", "lint", "generic", true, 2),
					artAtt("sbom1", "sbom", "generic", true, 4, fpCli, "cli"),
					artAtt("scan1", "scan", "snyk", true, 5, fpCli, "cli"),
					artAtt("scan2", "scan", "snyk", true, 12, fpCli2, "cli"),
					artAtt("sbom2", "sbom", "generic", true, 6, fpDocs, "docs"),
				},
				// Reported out of order: the one created last wins.
				Artifacts: []Artifact{artifact("a-cli-2", fpCli2, "cli", 10), artifact("a-cli-1", fpCli, "cli", 3), artifact("a-docs", fpDocs, "docs", 3)},
			},
			want: verdict(StateIncomplete, trailOK, map[string]ArtifactStatus{
				"cli":  artStatus("a-cli-2", fpCli2, StateIncomplete, missing("sbom", "generic"), done("scan", "snyk", "scan2", true)),
				"docs": artsOK["docs"],
			}),
		},
		{
			name: "rule 4: the same artifact reported again keeps its evidence", template: basicTemplate,
			in: with(basicComplete(), nil, artifact("a-cli-again", fpCli, "cli", 20), artifact("a-cli-unnamed", fpCli, "", 21)),
			want: func() TrailCompliance {
				arts := map[string]ArtifactStatus{"cli": artsOK["cli"], "docs": artsOK["docs"]}
				cli := arts["cli"]
				cli.ID = "a-cli-again"
				arts["cli"] = cli
				return verdict(StateCompliant, trailOK, arts)
			}(),
		},
		{
			name: "rule 4: unexpected artifacts keyed by template name, or by fingerprint without one", template: basicTemplate,
			in: with(basicComplete(), []Attestation{artAtt("u1", "sbom", "generic", true, 9, fpOther, "")},
				artifact("a-tools", "7007", "tools", 8), artifact("a-other", fpOther, "", 8)),
			want: verdict(StateCompliant, trailOK, map[string]ArtifactStatus{
				"cli": artsOK["cli"], "docs": artsOK["docs"],
				"tools": unexpectedArt("a-tools", "7007", StateCompliant),
				fpOther: unexpectedArt("a-other", fpOther, StateCompliant, unexpected("sbom", "generic", "u1", true)),
			}),
		},

		// Rules 5 and 6: how statuses combine.
		{
			name: "rules 5, 6: an incomplete artifact makes the trail incomplete", template: basicTemplate,
			in: TrailInput{
				Attestations: slices.DeleteFunc(basicComplete().Attestations, func(a Attestation) bool { return a.ID == "scan1" }),
				Artifacts:    basicComplete().Artifacts,
			},
			want: verdict(StateIncomplete, trailOK, map[string]ArtifactStatus{
				"cli":  artStatus("a-cli", fpCli, StateIncomplete, done("sbom", "generic", "sbom1", true), missing("scan", "snyk")),
				"docs": artsOK["docs"],
			}),
		},
		{
			name: "rules 5, 6: non-compliant beats missing, for an artifact and for the trail", template: basicTemplate,
			in: TrailInput{
				Attestations: []Attestation{
					trailAtt("lint1", "lint", "generic", true, 2),
					artAtt("sbom1", "sbom", "generic", false, 4, fpCli, "cli"),
				},
				Artifacts: []Artifact{artifact("a-cli", fpCli, "cli", 3)},
			},
			want: verdict(StateNonCompliant, atts(missing("pr", "pull_request"), done("lint", "generic", "lint1", true)), map[string]ArtifactStatus{
				"cli":  artStatus("a-cli", fpCli, StateNonCompliant, done("sbom", "generic", "sbom1", false), missing("scan", "snyk")),
				"docs": missingArt(missing("sbom", "generic")),
			}),
		},
		{
			name: "rule 6: a non-compliant trail attestation makes the trail non-compliant", template: basicTemplate,
			in:   with(basicComplete(), []Attestation{trailAtt("pr2", "pr", "pull_request", false, 30)}),
			want: verdict(StateNonCompliant, atts(done("pr", "pull_request", "pr2", false), done("lint", "generic", "lint1", true)), artsOK),
		},
		{
			name: "rule 6: a missing artifact makes the trail incomplete", template: basicTemplate,
			in: TrailInput{
				Attestations: slices.DeleteFunc(basicComplete().Attestations, func(a Attestation) bool { return a.ID == "sbom2" }),
				Artifacts:    basicComplete().Artifacts[:1],
			},
			want: verdict(StateIncomplete, trailOK, map[string]ArtifactStatus{"cli": artsOK["cli"], "docs": missingArt(missing("sbom", "generic"))}),
		},
	}
}

func TestEvaluate(t *testing.T) {
	e := NewEngine(EngineOptions{})
	for _, tc := range evalCases() {
		t.Run(tc.name, func(t *testing.T) {
			var tpl *Template
			if tc.template != "<nil>" {
				tpl = mustParse(t, tc.template)
			}
			got, err := e.Evaluate(context.Background(), tpl, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", dumpJSON(got), dumpJSON(tc.want))
			}
		})
	}
}

func dumpJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// The real service's trail responses: rebuilding their input from what they report must give their verdict.
// Unexpected entries are compared as sets: the hosted service lists them in report order, rule 7 by name.
func TestEvaluateMatchesHostedService(t *testing.T) {
	files := []string{"kosli_get_trail.json", "cyber_dojo_trail_creator-ci.json", "cyber_dojo_trail_dashboard-ci.json",
		"cyber_dojo_trail_differ-ci.json", "cyber_dojo_trail_runner-ci.json"}
	type status struct {
		Name         string  `json:"attestation_name"`
		Type         string  `json:"attestation_type"`
		ID           *string `json:"attestation_id"`
		OverriddenID *string `json:"overridden_attestation_id"`
		Status       string  `json:"status"`
		IsCompliant  *bool   `json:"is_compliant"`
		Unexpected   bool    `json:"unexpected"`
	}
	type trailResponse struct {
		ComplianceState  string `json:"compliance_state"`
		IsCompliant      bool   `json:"is_compliant"`
		ComplianceStatus struct {
			Attestations []status `json:"attestations_statuses"`
			Artifacts    map[string]struct {
				Fingerprint  string   `json:"artifact_fingerprint"`
				ID           string   `json:"artifact_id"`
				Status       string   `json:"status"`
				IsCompliant  bool     `json:"is_compliant"`
				Attestations []status `json:"attestations_statuses"`
				Unexpected   bool     `json:"unexpected"`
			} `json:"artifacts_statuses"`
		} `json:"compliance_status"`
		Template struct {
			Content string `json:"content"`
		} `json:"template"`
	}
	conv := func(ss []status) []AttestationStatus {
		out := []AttestationStatus{}
		for _, s := range ss {
			out = append(out, AttestationStatus{Name: s.Name, Type: s.Type, ID: deref0(s.ID), OverriddenID: deref0(s.OverriddenID),
				Status: s.Status, IsCompliant: s.IsCompliant, Unexpected: s.Unexpected})
		}
		return canonicalOrder(out)
	}
	e := NewEngine(EngineOptions{})
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			var trail trailResponse
			if err := json.Unmarshal(readExample(t, "responses/"+f), &trail); err != nil {
				t.Fatal(err)
			}
			tpl := mustParse(t, trail.Template.Content)
			var in TrailInput
			at := 0.0
			add := func(s status, fp, target string) {
				if s.Status != StatusComplete {
					return
				}
				at++
				in.Attestations = append(in.Attestations, Attestation{ID: deref0(s.ID), Name: s.Name, Type: s.Type,
					IsCompliant: *s.IsCompliant, OverriddenID: deref0(s.OverriddenID), CreatedAt: at,
					ArtifactFingerprint: fp, TargetArtifact: target})
			}
			want := verdict(trail.ComplianceState, conv(trail.ComplianceStatus.Attestations), map[string]ArtifactStatus{})
			for _, s := range trail.ComplianceStatus.Attestations {
				add(s, "", "")
			}
			for name, a := range trail.ComplianceStatus.Artifacts {
				in.Artifacts = append(in.Artifacts, Artifact{ID: a.ID, Fingerprint: a.Fingerprint, TemplateName: name, CreatedAt: 0})
				for _, s := range a.Attestations {
					add(s, a.Fingerprint, name)
				}
				want.Artifacts[name] = ArtifactStatus{ID: a.ID, Fingerprint: a.Fingerprint, Status: a.Status, IsCompliant: a.IsCompliant,
					Attestations: conv(a.Attestations), Unexpected: a.Unexpected}
			}
			got, err := e.Evaluate(context.Background(), tpl, in)
			if err != nil {
				t.Fatal(err)
			}
			got.Attestations = canonicalOrder(got.Attestations)
			for k, a := range got.Artifacts {
				a.Attestations = canonicalOrder(a.Attestations)
				got.Artifacts[k] = a
			}
			if !reflect.DeepEqual(got, want) || got.IsCompliant != trail.IsCompliant {
				t.Errorf("got\n%s\nwant\n%s", dumpJSON(got), dumpJSON(want))
			}
		})
	}
}

func deref0(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// canonicalOrder keeps expected entries in place and sorts the unexpected ones by name.
func canonicalOrder(s []AttestationStatus) []AttestationStatus {
	i := slices.IndexFunc(s, func(a AttestationStatus) bool { return a.Unexpected })
	if i >= 0 {
		slices.SortStableFunc(s[i:], func(a, b AttestationStatus) int { return strings.Compare(a.Name, b.Name) })
	}
	return s
}

func TestEvaluateReleaseFlowComplete(t *testing.T) {
	tpl, in := releaseFlow(t)
	got, err := NewEngine(EngineOptions{}).Evaluate(context.Background(), tpl, in)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateCompliant || len(got.Artifacts) != 14 || len(got.Attestations) != 3 {
		t.Fatalf("got %s", dumpJSON(got))
	}
	for name, a := range got.Artifacts {
		if a.Status != StateCompliant || a.Unexpected {
			t.Errorf("%s: %+v", name, a)
		}
	}
}

// Each template version is prepared once, however many goroutines ask for it at the same time.
func TestEnginePreparesOncePerTemplate(t *testing.T) {
	e := NewEngine(EngineOptions{Timeout: time.Minute}) // a loaded machine under -race is slow
	a := mustParse(t, basicTemplate)
	b := mustParse(t, "# same template, other text\n"+basicTemplate)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tpl := a
			if i%2 == 1 {
				tpl = b
			}
			if _, err := e.Evaluate(context.Background(), tpl, basicComplete()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if s := e.Stats(); s.Misses != 1 || s.Hits != 31 || s.Len != 1 {
		t.Errorf("stats = %+v, want one preparation and 31 reuses", s)
	}
}

func TestEngineCacheIsBounded(t *testing.T) {
	e := NewEngine(EngineOptions{CacheSize: 2})
	for i := range 5 {
		tpl := mustParse(t, fmt.Sprintf("trail: {attestations: [{name: a%d, type: generic}]}", i))
		if _, err := e.Evaluate(context.Background(), tpl, TrailInput{}); err != nil {
			t.Fatal(err)
		}
	}
	if s := e.Stats(); s.Len != 2 || s.Evictions != 3 || s.Misses != 5 {
		t.Errorf("stats = %+v", s)
	}
}

// Run with -race: many goroutines share prepared queries, and evict them while others use them, and every result
// is the one a lone evaluation gives.
func TestEvaluateConcurrent(t *testing.T) {
	type job struct {
		tpl  *Template
		in   TrailInput
		want TrailCompliance
	}
	lone := NewEngine(EngineOptions{})
	var jobs []job
	for _, tc := range evalCases() {
		var tpl *Template
		if tc.template != "<nil>" {
			tpl = mustParse(t, tc.template)
		}
		want, err := lone.Evaluate(context.Background(), tpl, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job{tpl, tc.in, want})
	}
	distinct := map[string]bool{}
	for _, j := range jobs {
		distinct[j.tpl.key()] = true
	}
	run := func(t *testing.T, e *Engine, jobs []job, workers, rounds int) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					j := jobs[(w*7+r)%len(jobs)]
					got, err := e.Evaluate(context.Background(), j.tpl, j.in)
					if err != nil {
						t.Error(err)
						return
					}
					if !reflect.DeepEqual(got, j.want) {
						t.Errorf("concurrent result differs:\n%s\nwant\n%s", dumpJSON(got), dumpJSON(j.want))
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	t.Run("shared", func(t *testing.T) {
		e := NewEngine(EngineOptions{Timeout: time.Minute}) // a loaded machine under -race is slow
		run(t, e, jobs, 8, 2*len(jobs))
		if s := e.Stats(); s.Misses != uint64(len(distinct)) || s.Evictions != 0 {
			t.Errorf("stats = %+v, want %d preparations", s, len(distinct))
		}
	})
	t.Run("evicting", func(t *testing.T) {
		var few []job // four templates through a cache of two
		seen := map[string]bool{}
		for _, j := range jobs {
			if len(seen) < 4 || seen[j.tpl.key()] {
				seen[j.tpl.key()] = true
				few = append(few, j)
			}
		}
		e := NewEngine(EngineOptions{CacheSize: 2, Timeout: time.Minute})
		run(t, e, few, 4, 12)
		if s := e.Stats(); s.Evictions == 0 || s.Len > 2 {
			t.Errorf("stats = %+v, want evictions and at most 2 entries", s)
		}
	})
}

func TestEvaluateHonoursContext(t *testing.T) {
	e := NewEngine(EngineOptions{})
	tpl := mustParse(t, basicTemplate)
	if _, err := e.Evaluate(context.Background(), tpl, basicComplete()); err != nil { // prepared
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Evaluate(ctx, tpl, basicComplete()); err == nil {
		t.Error("Evaluate with a cancelled context succeeded")
	}
}

// A huge trail stops at the caller's deadline, or the engine's time limit, with an error instead of running on.
func TestEvaluateTimeLimit(t *testing.T) {
	// The trail must take far longer than the 5 ms limits below on any machine CI may run on:
	// 100,000 attestations take about 170 ms on two cores here (20,000 once finished inside a
	// 20 ms limit on a faster runner).
	var in TrailInput
	for i := range 100000 {
		in.Attestations = append(in.Attestations, artAtt(fmt.Sprint(i), fmt.Sprint("n", i), "generic", true, float64(i), "", fmt.Sprint("art", i%500)))
	}
	tpl := mustParse(t, basicTemplate)
	check := func(t *testing.T, e *Engine, ctx context.Context) {
		t.Helper()
		start := time.Now()
		_, err := e.Evaluate(ctx, tpl, in)
		if err == nil {
			t.Fatalf("a %d-attestation trail was evaluated within the limit", len(in.Attestations))
		}
		if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "cancel") {
			t.Errorf("err = %v, want a cancellation", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %v to stop", d)
		}
	}
	t.Run("caller deadline", func(t *testing.T) {
		e := NewEngine(EngineOptions{})
		if _, err := e.Evaluate(context.Background(), tpl, TrailInput{}); err != nil { // prepare outside the limit
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		check(t, e, ctx)
	})
	t.Run("engine limit", func(t *testing.T) {
		e := NewEngine(EngineOptions{Timeout: 5 * time.Millisecond})
		if _, err := e.queries.Prepared(context.Background(), tpl.ID, func() (rego.QuerySpec, error) {
			mod, err := Compile(tpl)
			return rego.QuerySpec{Query: RegoQuery, Modules: map[string]string{"t.rego": mod}}, err
		}); err != nil {
			t.Fatal(err)
		}
		check(t, e, context.Background())
	})
}

// releaseFlow is the release-flow-template example with every artifact and attestation reported, compliant.
func releaseFlow(t testing.TB) (*Template, TrailInput) {
	tpl, err := Parse(readExample(t, "templates/release-flow-template.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var in TrailInput
	at := 0.0
	for _, e := range tpl.Trail.Attestations {
		at++
		in.Attestations = append(in.Attestations, trailAtt(fmt.Sprint("t", at), e.Name, e.Type, true, at))
	}
	for i, a := range tpl.Trail.Artifacts {
		fp := fmt.Sprintf("%064x", i+1)
		at++
		in.Artifacts = append(in.Artifacts, artifact(fmt.Sprint("a", i), fp, a.Name, at))
		for _, e := range a.Attestations {
			at++
			in.Attestations = append(in.Attestations, artAtt(fmt.Sprint("x", at), e.Name, e.Type, true, at, fp, a.Name))
		}
	}
	return tpl, in
}

// benchmarkEvaluate measures the policy run (uncached) and the same input answered from the result cache, as the
// trails of one flow mostly are.
func benchmarkEvaluate(b *testing.B, tpl *Template, in TrailInput) {
	for _, c := range []struct {
		name string
		size int
	}{{"uncached", -1}, {"cached", 0}} {
		b.Run(c.name, func(b *testing.B) {
			e := NewEngine(EngineOptions{ResultCacheSize: c.size})
			ctx := context.Background()
			res, err := e.Evaluate(ctx, tpl, in) // prepare (and fill the cache) outside the timing
			if err != nil || res.State != StateCompliant {
				b.Fatalf("%v %+v", err, res)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := e.Evaluate(ctx, tpl, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEvaluateSmall: 2 trail attestations, 1 artifact with 3.
func BenchmarkEvaluateSmall(b *testing.B) {
	tpl := mustParse(b, `
trail:
  attestations:
  - {name: pr, type: pull_request}
  - {name: lint, type: generic}
  artifacts:
  - name: cli
    attestations:
    - {name: sbom, type: generic}
    - {name: scan, type: snyk}
    - {name: test, type: junit}
`)
	in := TrailInput{
		Attestations: []Attestation{
			trailAtt("1", "pr", "pull_request", true, 1),
			trailAtt("2", "lint", "generic", true, 2),
			artAtt("3", "sbom", "generic", true, 4, fpCli, "cli"),
			artAtt("4", "scan", "snyk", true, 5, fpCli, "cli"),
			artAtt("5", "test", "junit", true, 6, fpCli, "cli"),
		},
		Artifacts: []Artifact{artifact("a", fpCli, "cli", 3)},
	}
	benchmarkEvaluate(b, tpl, in)
}

// BenchmarkEvaluateLarge: the release-flow-template example, 3 trail attestations and 14 artifacts with theirs.
func BenchmarkEvaluateLarge(b *testing.B) {
	tpl, in := releaseFlow(b)
	benchmarkEvaluate(b, tpl, in)
}

func BenchmarkParse(b *testing.B) {
	content := readExample(b, "templates/release-flow-template.yml")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(content); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrepare is the cost of a cache miss: compiling and preparing one template.
func BenchmarkPrepare(b *testing.B) {
	tpl, _ := releaseFlow(b)
	mod, err := Compile(tpl)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rego.Prepare(context.Background(),
			rego.QuerySpec{Query: RegoQuery, Modules: map[string]string{"t.rego": mod}}); err != nil {
			b.Fatal(err)
		}
	}
}
