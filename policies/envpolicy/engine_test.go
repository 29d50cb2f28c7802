package envpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/veritrail/veritrail/policies/rego"
)

// Builders of evidence.

func onArtifact(name, typ string, ok bool, at float64) Attestation {
	return Attestation{ID: fmt.Sprint(name, "@", at), Name: name, Type: typ, Compliant: ok, CreatedAt: at, OnArtifact: true}
}

func onTrail(name, typ string, ok bool, at float64) Attestation {
	return Attestation{ID: fmt.Sprint(name, "@", at), Name: name, Type: typ, Compliant: ok, CreatedAt: at}
}

func decision(name, control string, ok bool, at float64) Attestation {
	a := onArtifact(name, "decision", ok, at)
	a.Control = control
	return a
}

func trail(flow, name, state string, tags map[string]string, atts ...Attestation) Trail {
	return Trail{Flow: Flow{Name: flow, Tags: tags}, Name: name, State: state, Attestations: atts}
}

func fingerprint(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

func artifact(name string, trails ...Trail) Artifact {
	return Artifact{Name: name, Fingerprint: fingerprint(name), Trails: trails}
}

var (
	highRisk = map[string]string{"risk-level": "high", "app.kubernetes.io/tier": "backend"}
	lowRisk  = map[string]string{"risk-level": "low", "app.kubernetes.io/tier": "frontend"}
	prod     = Environment{Name: "prod", Type: "K8S", Tags: map[string]string{"region": "eu"}}
)

// want is the expected evaluation of one rule.
type want struct {
	rule        string   // Rule.ID
	satisfied   bool     // ignored rules are satisfied too
	ignored     bool     //
	resolutions []string // resolution types, in order
}

func evaluateOne(t *testing.T, e *Engine, policy string, a Artifact) PolicyEvaluation {
	t.Helper()
	p := mustParse(t, schemaLine+policy)
	p.Name, p.Version = "prod-policy", 3
	evals, err := e.Evaluate(context.Background(), p, NewInput(prod, []Artifact{a}))
	if err != nil {
		t.Fatal(err)
	}
	return evals[0]
}

func checkRules(t *testing.T, got []RuleEvaluation, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("%d rule evaluations, want %d: %s", len(got), len(wants), dump(got))
	}
	for i, w := range wants {
		g := got[i]
		var types []string
		for _, r := range g.Resolutions {
			types = append(types, r.Type)
		}
		if g.Rule.ID != w.rule || g.Satisfied != w.satisfied || g.Ignored != w.ignored || !slices.Equal(types, w.resolutions) {
			t.Errorf("rule %d: got %s satisfied=%v ignored=%v %v\nwant %s satisfied=%v ignored=%v %v\n%s",
				i, g.Rule.ID, g.Satisfied, g.Ignored, types, w.rule, w.satisfied, w.ignored, w.resolutions, dump(g))
		}
	}
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

const (
	provenanceRequired = "artifacts:\n  provenance:\n    required: true\n"
	trailsCompliant    = "artifacts:\n  trail-compliance:\n    required: true\n"
)

var (
	ok           = []string{ResolutionRuleSatisfied}
	na           = []string{ResolutionRuleNotApplicable}
	missing      = []string{ResolutionMissingAttestation}
	nonCompliant = []string{ResolutionNonCompliantAttestation}
)

type evalCase struct {
	name     string
	policy   string
	artifact Artifact
	want     []want
}

func evalCases() []evalCase {
	backend := func(atts ...Attestation) Trail { return trail("backend-ci", "c0ffee", "COMPLIANT", highRisk, atts...) }
	docs := func(atts ...Attestation) Trail { return trail("docs-ci", "d0c5", "COMPLIANT", lowRisk, atts...) }
	return []evalCase{
		// provenance
		{"provenance: reported", provenanceRequired, artifact("api:1", backend()), []want{{"provenance", true, false, ok}}},
		{"provenance: no flow", provenanceRequired, artifact("api:1"), []want{{"provenance", false, false, []string{ResolutionNoProvenance}}}},
		{"provenance: not required asks nothing", "artifacts:\n  provenance:\n    required: false\n", artifact("api:1"), nil},
		{"provenance: exception on the name", provenanceRequired + "    exceptions:\n      - if: ${{ matches(artifact.name, \"^datadog:\") }}\n",
			artifact("datadog:agent-7"), []want{{"provenance", true, true, na}}},
		{"provenance: exception that does not hold", provenanceRequired + "    exceptions:\n      - if: ${{ matches(artifact.name, \"^datadog:\") }}\n",
			artifact("api:1"), []want{{"provenance", false, false, []string{ResolutionNoProvenance}}}},
		{"provenance: exception for no flow", provenanceRequired + "    exceptions:\n      - if: ${{ not exists(flow) }}\n",
			artifact("api:1"), []want{{"provenance", true, true, na}}},
		{"provenance: exception holds in every flow", provenanceRequired + "    exceptions:\n      - if: ${{ flow.name == 'docs-ci' }}\n      - if: ${{ flow.tags.risk-level == 'high' }}\n",
			artifact("api:1", backend(), docs()), []want{{"provenance", true, true, na}}},
		{"provenance: exception holds in one flow of two", provenanceRequired + "    exceptions:\n      - if: ${{ flow.name == 'docs-ci' }}\n",
			artifact("api:1", backend(), docs()), []want{{"provenance", true, false, ok}}},

		// trail-compliance
		{"trail-compliance: compliant", trailsCompliant, artifact("api:1", backend()), []want{{"trail-compliance", true, false, ok}}},
		{"trail-compliance: non-compliant trail", trailsCompliant, artifact("api:1", trail("backend-ci", "c0ffee", "NON-COMPLIANT", highRisk)),
			[]want{{"trail-compliance", false, false, []string{ResolutionNonCompliantInTrail}}}},
		{"trail-compliance: incomplete trail", trailsCompliant, artifact("api:1", trail("backend-ci", "c0ffee", "INCOMPLETE", highRisk)),
			[]want{{"trail-compliance", false, false, []string{ResolutionNonCompliantInTrail}}}},
		{"trail-compliance: one of two trails fails", trailsCompliant,
			artifact("api:1", backend(), trail("backend-ci", "bad", "NON-COMPLIANT", highRisk), docs()),
			[]want{{"trail-compliance", false, false, []string{ResolutionNonCompliantInTrail}}}},
		{"trail-compliance: exception on the failing flow", trailsCompliant + "    exceptions:\n      - if: ${{ flow.tags.risk-level == \"low\" }}\n",
			artifact("api:1", backend(), trail("docs-ci", "bad", "NON-COMPLIANT", lowRisk)), []want{{"trail-compliance", true, false, ok}}},
		{"trail-compliance: exception everywhere", trailsCompliant + "    exceptions:\n      - if: ${{ flow.tags[\"app.kubernetes.io/tier\"] in ['frontend', 'backend'] }}\n",
			artifact("api:1", trail("backend-ci", "bad", "NON-COMPLIANT", highRisk)), []want{{"trail-compliance", true, true, na}}},
		{"trail-compliance: no flow", trailsCompliant, artifact("api:1"), []want{{"trail-compliance", false, false, []string{ResolutionNoProvenance}}}},

		// named attestations
		{"named: on the artifact", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk}\n",
			artifact("api:1", backend(onArtifact("snyk", "snyk", true, 1))), []want{{"attestations[0]", true, false, ok}}},
		{"named: on the trail", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk}\n",
			artifact("api:1", backend(onTrail("snyk", "snyk", true, 1))), []want{{"attestations[0]", true, false, ok}}},
		{"named: missing", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk}\n",
			artifact("api:1", backend(onArtifact("tests", "junit", true, 1))), []want{{"attestations[0]", false, false, missing}}},
		{"named: other type", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk}\n",
			artifact("api:1", backend(onArtifact("snyk", "generic", true, 1))), []want{{"attestations[0]", false, false, missing}}},
		{"named: non-compliant", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk}\n",
			artifact("api:1", backend(onArtifact("snyk", "snyk", false, 1))), []want{{"attestations[0]", false, false, nonCompliant}}},
		{"named: the latest wins", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk}\n",
			artifact("api:1", backend(onArtifact("snyk", "snyk", true, 2), onArtifact("snyk", "snyk", false, 1))), []want{{"attestations[0]", true, false, ok}}},
		{"named: the latest fails", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk}\n",
			artifact("api:1", backend(onArtifact("snyk", "snyk", true, 1), onArtifact("snyk", "snyk", false, 2))), []want{{"attestations[0]", false, false, nonCompliant}}},
		{"named: missing in one trail of two", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk}\n",
			artifact("api:1", backend(onArtifact("snyk", "snyk", true, 1)), docs()), []want{{"attestations[0]", false, false, missing}}},
		{"named: any type", "artifacts:\n  attestations:\n    - {name: scan, type: '*'}\n",
			artifact("api:1", backend(onArtifact("scan", "custom:trivy", true, 1))), []want{{"attestations[0]", true, false, ok}}},
		{"named: decision type", "artifacts:\n  attestations:\n    - {name: release, type: decision}\n",
			artifact("api:1", backend(Attestation{Name: "release", Type: "system:decision", Compliant: true, OnArtifact: true, Control: "c"})),
			[]want{{"attestations[0]", true, false, ok}}},

		// any name
		{"any name: one of the type", "artifacts:\n  attestations:\n    - {type: junit}\n",
			artifact("api:1", backend(onArtifact("unit", "junit", true, 1))), []want{{"attestations[0]", true, false, ok}}},
		{"any name: none of the type", "artifacts:\n  attestations:\n    - {name: '*', type: junit}\n",
			artifact("api:1", backend(onArtifact("unit", "generic", true, 1))), []want{{"attestations[0]", false, false, missing}}},
		{"any name: every one of the type counts", "artifacts:\n  attestations:\n    - {type: junit}\n",
			artifact("api:1", backend(onArtifact("unit", "junit", true, 1), onTrail("e2e", "junit", false, 2), onArtifact("it", "junit", false, 3))),
			[]want{{"attestations[0]", false, false, []string{ResolutionNonCompliantAttestation, ResolutionNonCompliantAttestation}}}},
		{"any name any type", "artifacts:\n  attestations:\n    - {type: '*'}\n",
			artifact("api:1", backend()), []want{{"attestations[0]", false, false, missing}}},

		// must_be_compliant: false
		{"not compliant is enough", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk, must_be_compliant: false}\n",
			artifact("api:1", backend(onArtifact("snyk", "snyk", false, 1))), []want{{"attestations[0]", true, false, ok}}},
		{"not compliant, but there", "artifacts:\n  attestations:\n    - {type: junit, must_be_compliant: false}\n",
			artifact("api:1", backend(onArtifact("a", "snyk", false, 1))), []want{{"attestations[0]", false, false, missing}}},

		// if on flow tags (keys with dashes, and with dots and slashes)
		{"if: applies", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk, if: '${{ flow.tags.risk-level == \"high\" }}'}\n",
			artifact("api:1", backend()), []want{{"attestations[0]", false, false, missing}}},
		{"if: does not apply", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk, if: '${{ flow.tags.risk-level == \"high\" }}'}\n",
			artifact("api:1", docs()), []want{{"attestations[0]", true, true, na}}},
		{"if: applies in one trail, met there", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk, if: '${{ flow.tags.app.kubernetes.io/tier == \"backend\" }}'}\n",
			artifact("api:1", backend(onArtifact("snyk", "snyk", true, 1)), docs()), []want{{"attestations[0]", true, false, ok}}},
		{"if: applies in one trail, missing there", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk, if: '${{ flow.tags.app.kubernetes.io/tier == \"backend\" }}'}\n",
			artifact("api:1", backend(), docs(onArtifact("snyk", "snyk", true, 1))), []want{{"attestations[0]", false, false, missing}}},
		{"if: a tag the flow lacks", "artifacts:\n  attestations:\n    - {name: snyk, type: snyk, if: '${{ flow.tags.team != \"web\" }}'}\n",
			artifact("api:1", backend()), []want{{"attestations[0]", false, false, missing}}},
		{"if: on the artifact", "artifacts:\n  attestations:\n    - {name: sbom, type: generic, if: '${{ matches(artifact.name, \":1$\") }}'}\n",
			artifact("api:1", backend()), []want{{"attestations[0]", false, false, missing}}},
		{"if: false for the artifact", "artifacts:\n  attestations:\n    - {name: sbom, type: generic, if: '${{ matches(artifact.name, \":2$\") }}'}\n",
			artifact("api:1", backend()), []want{{"attestations[0]", true, true, na}}},

		// for_control
		{"for_control: met", "artifacts:\n  attestations:\n    - {name: release, type: decision, for_control: chg-1}\n",
			artifact("api:1", backend(decision("release", "chg-1", true, 1))), []want{{"attestations[0]", true, false, ok}}},
		{"for_control: missing", "artifacts:\n  attestations:\n    - {name: release, type: decision, for_control: chg-1}\n",
			artifact("api:1", backend(decision("release", "chg-2", true, 1))), []want{{"attestations[0]", false, false, missing}}},
		{"for_control: non-compliant", "artifacts:\n  attestations:\n    - {name: release, type: decision, for_control: chg-1}\n",
			artifact("api:1", backend(decision("release", "chg-1", false, 1))), []want{{"attestations[0]", false, false, nonCompliant}}},
		{"for_control: latest decision wins", "artifacts:\n  attestations:\n    - {type: decision, for_control: chg-1}\n",
			artifact("api:1", backend(decision("first", "chg-1", false, 1), decision("second", "chg-1", true, 2))), []want{{"attestations[0]", true, false, ok}}},
		{"for_control: latest decision fails", "artifacts:\n  attestations:\n    - {type: decision, for_control: chg-1}\n",
			artifact("api:1", backend(decision("first", "chg-1", true, 1), onTrail("second", "decision", false, 2))), []want{{"attestations[0]", true, false, ok}}},
		{"for_control: latest of the trail and the artifact", "artifacts:\n  attestations:\n    - {type: decision, for_control: chg-1}\n",
			artifact("api:1", backend(decision("first", "chg-1", true, 1), func() Attestation {
				a := decision("second", "chg-1", false, 2)
				a.OnArtifact = false
				return a
			}())), []want{{"attestations[0]", false, false, nonCompliant}}},
		{"for_control: not compliant allowed", "artifacts:\n  attestations:\n    - {name: release, type: decision, for_control: chg-1, must_be_compliant: false}\n",
			artifact("api:1", backend(decision("release", "chg-1", false, 1))), []want{{"attestations[0]", true, false, ok}}},
		{"for_control: no flow", "artifacts:\n  attestations:\n    - {name: release, type: decision, for_control: chg-1}\n",
			artifact("api:1"), []want{{"attestations[0]", false, false, missing}}},

		// artifacts of no flow
		{"no flow: every rule", provenanceRequired + "  trail-compliance:\n    required: true\n  attestations:\n    - {type: junit}\n" +
			"    - {name: snyk, type: snyk, if: '${{ flow.tags.risk-level == \"high\" }}'}\n    - {name: sbom, type: generic, if: '${{ not exists(flow) }}'}\n",
			artifact("scratch:latest"), []want{
				{"provenance", false, false, []string{ResolutionNoProvenance}},
				{"trail-compliance", false, false, []string{ResolutionNoProvenance}},
				{"attestations[0]", false, false, missing},
				{"attestations[1]", true, true, na},
				{"attestations[2]", false, false, missing},
			}},
		{"empty policy", "", artifact("api:1"), nil},
	}
}

func TestEvaluateRules(t *testing.T) {
	e := NewEngine(Options{})
	for _, tc := range evalCases() {
		t.Run(tc.name, func(t *testing.T) {
			got := evaluateOne(t, e, tc.policy, tc.artifact)
			checkRules(t, got.RuleEvaluations, tc.want)
			compliant := true
			for _, w := range tc.want {
				compliant = compliant && w.satisfied
			}
			wantStatus := map[bool]string{true: StatusCompliant, false: StatusNonCompliant}[compliant]
			if got.Compliant != compliant || got.Status != wantStatus || got.PolicyName != "prod-policy" || got.PolicyVersion != 3 {
				t.Errorf("policy evaluation: %+v", got)
			}
		})
	}
}

// The compiled fast paths are an optimization: every evaluation equals what the judges alone give, for the cases
// above and for random evidence.
func TestFastPathsMatchTheJudges(t *testing.T) {
	var arts []Artifact
	var policies []string
	for _, tc := range evalCases() {
		arts = append(arts, tc.artifact)
		policies = append(policies, tc.policy)
	}
	policies = append(policies, benchPolicies...)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		arts = append(arts, randomArtifact(rng, i))
	}
	in := NewInput(prod, arts)
	e := NewEngine(Options{})
	for _, src := range policies {
		if !strings.HasPrefix(src, "_schema") {
			src = schemaLine + src
		}
		p := mustParse(t, src)
		fast, err := e.Evaluate(context.Background(), p, in)
		if err != nil {
			t.Fatal(err)
		}
		mod, err := compile(p, false)
		if err != nil {
			t.Fatal(err)
		}
		pq, err := rego.Prepare(context.Background(), rego.QuerySpec{Query: queryResults, Modules: map[string]string{"ref.rego": mod}})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := evaluateBatch(context.Background(), p, pq, time.Minute, in) // every artifact evaluated
		if err != nil {
			t.Fatal(err)
		}
		for i := range fast {
			if !reflect.DeepEqual(fast[i], ref[i]) {
				t.Fatalf("policy\n%s\nartifact %s:\nfast path %s\njudges %s", src, dump(arts[i]), dump(fast[i]), dump(ref[i]))
			}
		}
	}
}

// TestShapesShareEvaluations: a YAML policy judges the artifacts of one shape (ArtifactInput.shape) alike where
// it finds them compliant (and, for a policy whose conditions read the artifact, where those conditions agree), so
// it evaluates one of each and those it does not find compliant; every evaluation equals the one OPA gives that
// artifact alone, for random evidence where many artifacts share a shape with others of other names,
// fingerprints, trail names, attestation IDs and times.
func TestShapesShareEvaluations(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var arts []Artifact
	for i := range 200 {
		a := randomArtifact(rng, i)
		arts = append(arts, a)
		for k := range rng.IntN(4) { // the same evidence under other names
			b := a
			b.Name, b.Fingerprint = fmt.Sprintf("%s-copy%d", a.Name, k), fingerprint(fmt.Sprint(a.Name, k))
			b.Trails = make([]Trail, len(a.Trails))
			for j, tr := range a.Trails {
				tr.Name = fmt.Sprintf("%s-%d-%d", tr.Name, i, k)
				tr.Attestations = slices.Clone(tr.Attestations)
				for x := range tr.Attestations {
					tr.Attestations[x].ID = fmt.Sprint(tr.Attestations[x].ID, "-", k)
					if rng.IntN(3) == 0 { // another time: the same shape unless it picks another decision
						tr.Attestations[x].CreatedAt += float64(rng.IntN(3))
					}
				}
				// Now and then evidence that differs where it counts, which must not pass for the other's.
				if rng.IntN(6) == 0 {
					tr.State = []string{"COMPLIANT", "NON-COMPLIANT", "INCOMPLETE"}[rng.IntN(3)]
				}
				if n := len(tr.Attestations); n > 0 && rng.IntN(6) == 0 {
					tr.Attestations[rng.IntN(n)].Compliant = rng.IntN(2) == 0
				}
				if n := len(tr.Attestations); n > 0 && rng.IntN(4) == 0 { // the latest decision, whatever it was
					tr.Attestations[rng.IntN(n)].CreatedAt = 10
				}
				b.Trails[j] = tr
			}
			b.Allowlisted = a.Allowlisted != (rng.IntN(8) == 0)
			arts = append(arts, b)
		}
	}
	// Two artifacts that differ only in which of their decisions is the latest: one shape would be wrong.
	for i, times := range [][2]float64{{2, 1}, {1, 2}} {
		approved, rejected := decision("release", "change-approval", true, times[0]), decision("release", "change-approval", false, times[1])
		rejected.OnArtifact = false
		arts = append(arts, artifact(fmt.Sprint("svc:", i), trail("backend-ci", fmt.Sprint("r", i), "COMPLIANT", highRisk, approved, rejected)))
	}
	in := NewInput(prod, arts)
	policies := slices.Clone(benchPolicies)
	for _, tc := range evalCases() {
		policies = append(policies, tc.policy)
	}
	e := NewEngine(Options{})
	ctx := context.Background()
	shared, sharedReading := 0, 0
	for _, src := range policies {
		if !strings.HasPrefix(src, "_schema") {
			src = schemaLine + src
		}
		p := mustParse(t, src)
		before := e.Judged()
		got, err := e.Evaluate(ctx, p, in)
		if err != nil {
			t.Fatal(err)
		}
		judged := e.Judged() - before
		pq, err := e.prepared(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		want, err := evaluateBatch(ctx, p, pq, time.Minute, in)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("policy\n%s\nartifact %s:\njudged by shape %s\nalone %s", src, dump(arts[i]), dump(got[i]), dump(want[i]))
			}
		}
		if judged < int64(len(arts)) {
			shared++
			if p.readsArtifact() {
				sharedReading++
			}
		}
	}
	if shared < len(policies)/2 || sharedReading == 0 {
		t.Errorf("only %d policies of %d judged an artifact by the evaluation of another, %d of those that read the artifact",
			shared, len(policies), sharedReading)
	}
}

// randomArtifact has 0 to 3 trails in two flows, each with a few of the attestations the policies above name.
func randomArtifact(rng *rand.Rand, i int) Artifact {
	a := artifact(fmt.Sprintf("%s:%d", []string{"api", "datadog:agent", "docs"}[rng.IntN(3)], i))
	names := []string{"snyk", "unit-tests", "pr", "release", "tests", "scan"}
	types := []string{"snyk", "junit", "pull_request", "generic", "custom:trivy"}
	for j := range rng.IntN(4) {
		tags := highRisk
		flow := "backend-ci"
		if rng.IntN(2) == 0 {
			tags, flow = lowRisk, "docs-ci"
		}
		if rng.IntN(3) == 0 {
			tags = map[string]string{"tier": fmt.Sprint(rng.IntN(4))}
		}
		tr := trail(flow, fmt.Sprint("t", j), []string{"COMPLIANT", "NON-COMPLIANT", "INCOMPLETE"}[rng.IntN(3)], tags)
		for k := range rng.IntN(6) {
			at := float64(rng.IntN(4))
			switch rng.IntN(4) {
			case 0:
				d := decision([]string{"release", "first"}[rng.IntN(2)], []string{"change-approval", "chg-1"}[rng.IntN(2)], rng.IntN(3) > 0, at)
				d.OnArtifact = rng.IntN(2) == 0
				d.ID = fmt.Sprint(k)
				tr.Attestations = append(tr.Attestations, d)
			default:
				x := onArtifact(names[rng.IntN(len(names))], types[rng.IntN(len(types))], rng.IntN(3) > 0, at)
				x.OnArtifact = rng.IntN(2) == 0
				tr.Attestations = append(tr.Attestations, x)
			}
		}
		a.Trails = append(a.Trails, tr)
	}
	return a
}

func TestResolutionsSayWhatToDo(t *testing.T) {
	e := NewEngine(Options{})
	a := artifact("api:1", trail("backend-ci", "c0ffee", "NON-COMPLIANT", highRisk,
		onArtifact("unit", "junit", false, 1), onTrail("pr", "pull_request", false, 2), decision("release", "chg-1", false, 3)))
	fp := a.Fingerprint[:7]
	got := evaluateOne(t, e, provenanceRequired+"  trail-compliance:\n    required: true\n  attestations:\n"+
		"    - {name: snyk, type: snyk}\n    - {type: junit}\n    - {type: pull_request}\n"+
		"    - {name: release, type: decision, for_control: chg-1}\n    - {type: decision, for_control: chg-9}\n", a)
	want := []Resolution{
		{ResolutionRuleSatisfied, "the artifact was reported in a flow", ResolutionContext{}},
		{ResolutionNonCompliantInTrail, "trail c0ffee of flow backend-ci, which reported artifact api:1 (" + fp + "), is NON-COMPLIANT",
			ResolutionContext{FlowName: "backend-ci", TrailName: "c0ffee"}},
		{ResolutionMissingAttestation, "attestation 'snyk' of type snyk is missing on artifact api:1 (" + fp + ") in trail c0ffee of flow backend-ci",
			ResolutionContext{FlowName: "backend-ci", TrailName: "c0ffee", AttestationName: "snyk", AttestationType: "snyk"}},
		{ResolutionNonCompliantAttestation, "attestation 'unit' of type junit on artifact api:1 (" + fp + ") in trail c0ffee of flow backend-ci is not compliant",
			ResolutionContext{FlowName: "backend-ci", TrailName: "c0ffee", AttestationName: "unit", AttestationType: "junit"}},
		{ResolutionNonCompliantAttestation, "attestation 'pr' of type pull_request on the trail of artifact api:1 (" + fp + ") in trail c0ffee of flow backend-ci is not compliant",
			ResolutionContext{FlowName: "backend-ci", TrailName: "c0ffee", AttestationName: "pr", AttestationType: "pull_request"}},
		{ResolutionNonCompliantAttestation, "the latest decision for control 'chg-1' ('release') on artifact api:1 (" + fp + ") in trail c0ffee of flow backend-ci is not compliant",
			ResolutionContext{FlowName: "backend-ci", TrailName: "c0ffee", ForControl: "chg-1", AttestationName: "release", AttestationType: "decision"}},
		{ResolutionMissingAttestation, "artifact api:1 (" + fp + ") in trail c0ffee of flow backend-ci is missing required decision for control 'chg-9'",
			ResolutionContext{FlowName: "backend-ci", TrailName: "c0ffee", ForControl: "chg-9"}},
	}
	if len(got.RuleEvaluations) != len(want) {
		t.Fatalf("%s", dump(got))
	}
	for i, w := range want {
		if r := got.RuleEvaluations[i].Resolutions; len(r) != 1 || r[0] != w {
			t.Errorf("rule %d:\n got %+v\nwant %+v", i, r, w)
		}
	}

	none := evaluateOne(t, e, "artifacts:\n  provenance:\n    required: true\n  trail-compliance:\n    required: true\n  attestations:\n"+
		"    - {name: snyk, type: snyk}\n    - {type: decision, for_control: chg-9}\n", artifact("scratch:1"))
	fp = fingerprint("scratch:1")[:7]
	wantNone := []Resolution{
		{ResolutionNoProvenance, "artifact scratch:1 (" + fp + ") was not reported in any flow: report it in the flow that builds it", ResolutionContext{}},
		{ResolutionNoProvenance, "artifact scratch:1 (" + fp + ") was not reported in any flow, so no trail shows it compliant", ResolutionContext{}},
		{ResolutionMissingAttestation, "artifact scratch:1 (" + fp + ") was not reported in any flow, so it has no attestation 'snyk' of type snyk", ResolutionContext{}},
		{ResolutionMissingAttestation, "artifact scratch:1 (" + fp + ") was not reported in any flow, so it has no decision for control 'chg-9'", ResolutionContext{ForControl: "chg-9"}},
	}
	for i, w := range wantNone {
		if r := none.RuleEvaluations[i].Resolutions; len(r) != 1 || r[0] != w {
			t.Errorf("no flow, rule %d:\n got %+v\nwant %+v", i, r, w)
		}
	}
	// The definition is the rule as the policy states it, defaults included.
	def := string(got.RuleEvaluations[5].Rule.Definition)
	if got.RuleEvaluations[5].Rule.Type != RuleAttestation ||
		def != `{"for_control":"chg-1","if":null,"must_be_compliant":true,"name":"release","type":"decision"}` {
		t.Errorf("rule = %s %s", got.RuleEvaluations[5].Rule.Type, def)
	}
}

func TestAllowlistedArtifactsAreCompliant(t *testing.T) {
	e := NewEngine(Options{})
	p := mustParse(t, schemaLine+provenanceRequired)
	a := artifact("scratch:1")
	a.Allowlisted = true
	res, err := e.Assert(context.Background(), []*Policy{p}, prod, a)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Compliant || !res.Allowlisted || res.Policies[0].Compliant || res.Policies[0].Status != StatusNonCompliant {
		t.Errorf("allowlisted: %s", dump(res))
	}
	a.Allowlisted = false
	res, err = e.Assert(context.Background(), []*Policy{p}, prod, a)
	if err != nil || res.Compliant || res.Allowlisted {
		t.Errorf("not allowlisted: %v %s", err, dump(res))
	}
	res, err = e.Assert(context.Background(), nil, prod, a)
	if err != nil || !res.Compliant || len(res.Policies) != 0 {
		t.Errorf("no policies: %v %s", err, dump(res))
	}
}

// A snapshot is one evaluation per policy; each artifact's verdict equals the one it gets alone.
func TestEvaluateSnapshot(t *testing.T) {
	e := NewEngine(Options{})
	var ps []*Policy
	for i, src := range benchPolicies {
		p := mustParse(t, src)
		p.Name, p.Version = fmt.Sprint("p", i), i+1
		ps = append(ps, p)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var arts []Artifact
	for i := range 50 {
		arts = append(arts, randomArtifact(rng, i))
	}
	arts = append(arts, benchArtifacts(5)...)
	in := NewInput(prod, arts)
	res, err := e.EvaluateSnapshot(context.Background(), ps, in)
	if err != nil {
		t.Fatal(err)
	}
	prepared := uint64(len(ps)) // one query a policy, and one more for a policy whose conditions read the artifact
	for _, p := range ps {
		if p.readsArtifact() {
			prepared++
		}
	}
	if s := e.Stats(); s.Misses != prepared {
		t.Errorf("stats = %+v, want %d preparations", s, prepared)
	}
	compliant := 0
	for i, a := range arts {
		alone, err := e.Assert(context.Background(), ps, prod, a)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res[i], alone) {
			t.Fatalf("artifact %d in the snapshot:\n%s\nalone:\n%s", i, dump(res[i]), dump(alone))
		}
		if res[i].Name != a.Name || res[i].Fingerprint != a.Fingerprint || res[i].InputHash != in.Artifacts[i].Hash {
			t.Errorf("artifact %d: %+v", i, res[i])
		}
		for j, pe := range res[i].Policies {
			if pe.PolicyName != ps[j].Name || pe.PolicyVersion != ps[j].Version {
				t.Errorf("policy order: %+v", pe)
			}
		}
		if res[i].Compliant {
			compliant++
		}
	}
	if compliant < 3 || compliant == len(arts) {
		t.Errorf("%d of %d compliant: the snapshot should hold both", compliant, len(arts))
	}
	// Within a policy's evaluation, equal results are one slice, and only equal ones: callers
	// encode each once, by its first element's address.
	for j := range ps {
		byDoc := map[string]*RuleEvaluation{}
		byAddr := map[*RuleEvaluation]string{}
		for i := range arts {
			rules := res[i].Policies[j].RuleEvaluations
			doc := dump(rules)
			if first, ok := byDoc[doc]; ok && first != &rules[0] {
				t.Errorf("policy %d: artifact %d's result equals an earlier one but is another slice", j, i)
			}
			byDoc[doc] = &rules[0]
			if other, ok := byAddr[&rules[0]]; ok && other != doc {
				t.Errorf("policy %d: artifact %d shares a slice with a different result", j, i)
			}
			byAddr[&rules[0]] = doc
		}
		if len(byDoc) >= len(arts) {
			t.Errorf("policy %d: %d distinct results of %d artifacts: the test shares none", j, len(byDoc), len(arts))
		}
	}
	if s := e.Stats(); s.Misses != prepared {
		t.Errorf("stats = %+v, want the queries reused", s)
	}
}

func TestInputHash(t *testing.T) {
	base := artifact("api:1",
		trail("backend-ci", "b", "COMPLIANT", map[string]string{"a": "1", "b": "2"}, onArtifact("snyk", "snyk", true, 1), onTrail("pr", "pull_request", true, 2)),
		trail("docs-ci", "a", "COMPLIANT", nil, decision("release", "chg", true, 3)))
	hash := func(env Environment, a Artifact) string { return NewInput(env, []Artifact{a}).Artifacts[0].Hash }
	h := hash(prod, base)

	reordered := base
	reordered.Trails = []Trail{base.Trails[1], base.Trails[0]}
	reordered.Trails[1].Attestations = []Attestation{base.Trails[0].Attestations[1], base.Trails[0].Attestations[0]}
	older := base
	older.Trails = slices.Clone(base.Trails)
	older.Trails[0].Attestations = append(slices.Clone(base.Trails[0].Attestations), onArtifact("snyk", "snyk", false, 0.5))
	for name, a := range map[string]Artifact{"reordered": reordered, "an older attestation": older} {
		if hash(prod, a) != h {
			t.Errorf("%s: the hash changed, though what a policy sees did not", name)
		}
	}

	changed := map[string]func(a *Artifact, env *Environment){
		"compliance": func(a *Artifact, _ *Environment) {
			a.Trails = slices.Clone(a.Trails)
			a.Trails[0].Attestations = append(slices.Clone(a.Trails[0].Attestations), onArtifact("snyk", "snyk", false, 9))
		},
		"trail state": func(a *Artifact, _ *Environment) {
			a.Trails = slices.Clone(a.Trails)
			a.Trails[0].State = "INCOMPLETE"
		},
		"flow tag": func(a *Artifact, _ *Environment) {
			a.Trails = slices.Clone(a.Trails)
			a.Trails[0].Flow.Tags = map[string]string{"a": "1", "b": "3"}
		},
		"allowlisted":     func(a *Artifact, _ *Environment) { a.Allowlisted = true },
		"name":            func(a *Artifact, _ *Environment) { a.Name = "api:2" },
		"environment tag": func(_ *Artifact, env *Environment) { env.Tags = map[string]string{"region": "us"} },
		"tag split": func(a *Artifact, _ *Environment) { // lengths are part of the encoding
			a.Trails = slices.Clone(a.Trails)
			a.Trails[0].Flow.Tags = map[string]string{"a": "1b", "": "2"}
		},
	}
	for name, change := range changed {
		a, env := base, prod
		change(&a, &env)
		if hash(env, a) == h {
			t.Errorf("%s: the hash did not change", name)
		}
	}
}

// TestInputForHash: the Hash of an input for policies that cannot read the environment (YAML) is the same in
// every environment, and YAML evaluations carried over by it are the evaluations made there; a raw Rego policy,
// or one that did not parse, puts the environment back in.
func TestInputForHash(t *testing.T) {
	yaml := mustParse(t, "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  provenance:\n    required: true\n")
	raw := mustParseRego(t, "package envtest\n\nrule_evaluations := [{\"rule\": {\"type\": \"custom\", \"id\": \"env\", \"definition\": {}}, \"satisfied\": input.environment.name == \"prod\", \"ignored\": false, \"resolutions\": []}]\n")
	a := artifact("api:1", trail("backend-ci", "b", "COMPLIANT", nil, onArtifact("snyk", "snyk", true, 1)))
	staging := Environment{Name: "staging", Type: "K8S"}
	hash := func(policies []*Policy, env Environment) string {
		return NewInputFor(policies, env, []Artifact{a}).Artifacts[0].Hash
	}
	if hash([]*Policy{yaml}, prod) != hash([]*Policy{yaml}, staging) {
		t.Error("YAML policies: the hash differs between environments")
	}
	for name, ps := range map[string][]*Policy{"raw": {raw}, "YAML and raw": {yaml, raw}, "did not parse": {yaml, nil}} {
		if hash(ps, prod) == hash(ps, staging) {
			t.Errorf("%s: the hash is the same in two environments", name)
		}
		if hash(ps, prod) != NewInput(prod, []Artifact{a}).Artifacts[0].Hash {
			t.Errorf("%s: the hash is not NewInput's", name)
		}
	}
	// What the YAML policy says of the artifact is the same in both environments, so the shared key is sound.
	e := NewEngine(Options{})
	ctx := context.Background()
	var docs []string
	for _, env := range []Environment{prod, staging} {
		evals, err := e.Evaluate(ctx, yaml, NewInputFor([]*Policy{yaml}, env, []Artifact{a}))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(evals)
		docs = append(docs, string(b))
	}
	if docs[0] != docs[1] {
		t.Errorf("a YAML policy judged one artifact differently in two environments:\n%s\n%s", docs[0], docs[1])
	}
	// The raw policy reads the environment: its evaluations differ, which is why its hash must.
	var compliant []bool
	for _, env := range []Environment{prod, staging} {
		evals, err := e.Evaluate(ctx, raw, NewInputFor([]*Policy{raw}, env, []Artifact{a}))
		if err != nil {
			t.Fatal(err)
		}
		compliant = append(compliant, evals[0].Compliant)
	}
	if !compliant[0] || compliant[1] {
		t.Errorf("the raw policy judged prod %v and staging %v, want true and false", compliant[0], compliant[1])
	}
}

// Select evaluates only the artifacts whose hash changed; their documents are built once and shared.
func TestSelectChanged(t *testing.T) {
	e := NewEngine(Options{})
	ps := []*Policy{mustParse(t, benchPolicies[0]), mustParse(t, benchPolicies[2])}
	arts := benchArtifacts(20)
	first := NewInput(prod, arts)
	before, err := e.EvaluateSnapshot(context.Background(), ps, first)
	if err != nil {
		t.Fatal(err)
	}
	arts[7].Trails[0].State = "NON-COMPLIANT"
	second := NewInput(prod, arts)
	seen := map[string]bool{}
	for _, a := range first.Artifacts {
		seen[a.Hash] = true
	}
	changed := second.Select(func(a ArtifactInput) bool { return !seen[a.Hash] })
	if len(changed.Artifacts) != 1 || changed.Artifacts[0].Name != arts[7].Name {
		t.Fatalf("changed = %+v", changed.Artifacts)
	}
	res, err := e.EvaluateSnapshot(context.Background(), ps, changed)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Compliant || !before[7].Compliant {
		t.Errorf("before %v, after %v", before[7].Compliant, res[0].Compliant)
	}
	doc, err := changed.Document(0)
	if err != nil || !strings.Contains(string(doc), `"compliance_state":"NON-COMPLIANT"`) || !strings.Contains(string(doc), `"environment":{"name":"prod"`) {
		t.Errorf("document = %s, %v", doc, err)
	}
}

func TestEngineCache(t *testing.T) {
	e := NewEngine(Options{CacheSize: 2})
	a := mustParse(t, schemaLine+provenanceRequired)
	b := mustParse(t, "# same meaning\n"+schemaLine+"artifacts: {provenance: {required: true, exceptions: []}}\n")
	in := NewInput(prod, benchArtifacts(3))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			p := a
			if i%2 == 1 {
				p = b
			}
			if _, err := e.Evaluate(context.Background(), p, in); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if s := e.Stats(); s.Misses != 1 || s.Hits != 15 {
		t.Errorf("stats = %+v, want one preparation shared by both versions", s)
	}
	if evals, err := e.Evaluate(context.Background(), a, NewInput(prod, nil)); err != nil || len(evals) != 0 {
		t.Errorf("empty snapshot: %v %v", evals, err)
	}
	if _, err := e.Evaluate(context.Background(), &Policy{Name: "by hand", Kind: KindYAML}, in); err == nil {
		t.Error("a policy without an ID was evaluated")
	}
}

func TestEvaluateHonoursContext(t *testing.T) {
	e := NewEngine(Options{})
	p := mustParse(t, benchPolicies[1])
	in := NewInput(prod, benchArtifacts(10))
	if err := e.Prepare(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Evaluate(ctx, p, in); err == nil {
		t.Error("Evaluate with a cancelled context succeeded")
	}
}
