package evaluate

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
	"github.com/veritrail/veritrail/internal/store/sqlstore/sqlitetest"
	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/envpolicy/envpolicytest"
	"github.com/veritrail/veritrail/policies/template"
)

func (f *envFixture) policy(tb testing.TB, name, content string) {
	tb.Helper()
	p, err := envpolicy.Parse([]byte(content), envpolicy.ParseOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	f.handle(tb, func(e *contract.Envelope) {
		e.Kind, e.Policy = contract.KindPolicyVersion, &contract.PolicyVersion{Name: name, Format: store.PolicyYAML,
			Content: content, ContentID: p.ID}
	})
}

func (f *envFixture) attach(tb testing.TB, envID string, detach bool, names ...string) {
	tb.Helper()
	f.handle(tb, func(e *contract.Envelope) {
		e.Kind, e.Attach = contract.KindPolicyAttachment, &contract.PolicyAttachment{EnvID: envID, Names: names, Detach: detach}
	})
}

// attest reports an attestation in trail t1 (of artifact fp when fp is set) and evaluates the trail, as the
// evaluation loop would.
func (f *envFixture) attest(tb testing.TB, fp, name, typ string, compliant bool) {
	tb.Helper()
	f.handle(tb, func(e *contract.Envelope) {
		e.Kind, e.Attestation = contract.KindAttestationReported, &contract.AttestationInput{ID: e.ID, FlowID: "flow-1",
			TrailName: "t1", Name: name, Type: typ, IsCompliant: compliant, ArtifactFingerprint: fp, Data: json.RawMessage(`{}`)}
	})
	f.evaluateTrail(tb, "t1")
}

func (f *envFixture) evaluateTrail(tb testing.TB, name string) {
	tb.Helper()
	id, err := f.st.TrailID(context.Background(), "flow-1", name)
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.ev.EvaluateTrail(context.Background(), id); err != nil {
		tb.Fatal(err)
	}
}

// state is the environment's state and its latest snapshot's compliant, as "true", "false" or "null" each.
func (f *envFixture) state(tb testing.TB, envID string) string {
	tb.Helper()
	env, err := f.st.EnvironmentByID(context.Background(), "org-1", envID)
	if err != nil {
		tb.Fatal(err)
	}
	s, _ := f.latest(tb, envID)
	return show(env.State) + "/" + show(s.Compliant)
}

func (f *envFixture) verdicts(tb testing.TB, envID string) map[string]store.Verdict {
	tb.Helper()
	vs, err := f.st.Verdicts(context.Background(), envID, nil)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]store.Verdict{}
	for _, v := range vs {
		out[v.Name] = v
	}
	return out
}

// TestPolicyVerdictsFollowEvidence: attach, an attestation (through the trail's evaluation), a new policy
// version, an allowlist entry and detach each change the verdicts, the snapshot's compliant and the state.
func TestPolicyVerdictsFollowEvidence(t *testing.T) {
	f := newEnvFixture(t, 2)
	f.evaluateTrail(t, "t1")
	f.report(t, 2, 0)
	if got := f.state(t, "env-1"); got != "null/null" {
		t.Fatalf("without policies: %s, want null/null", got)
	}
	f.policy(t, "tests", "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  trail-compliance:\n    required: true\n"+
		"  attestations:\n    - name: unit-tests\n      type: junit\n")
	f.attach(t, "env-1", false, "tests")
	if got := f.state(t, "env-1"); got != "false/false" {
		t.Fatalf("after attach: %s, want false/false (unit-tests missing)", got)
	}
	v := f.verdicts(t, "env-1")
	if len(v) != 2 || v["app-0"].Compliant || len(v["app-0"].Policies) != 1 || v["app-0"].Policies[0].Version != 1 {
		t.Fatalf("verdicts after attach: %+v", v)
	}

	f.attest(t, fp(0), "unit-tests", "junit", true)
	v = f.verdicts(t, "env-1")
	if !v["app-0"].Compliant || v["app-1"].Compliant || f.state(t, "env-1") != "false/false" {
		t.Fatalf("after app-0's tests: %+v, %s", v, f.state(t, "env-1"))
	}
	f.attest(t, fp(1), "unit-tests", "junit", true)
	if got := f.state(t, "env-1"); got != "true/true" {
		t.Fatalf("after both tests: %s, want true/true", got)
	}
	f.attest(t, "", "lint", "generic", false) // the trail turns NON-COMPLIANT
	if got := f.state(t, "env-1"); got != "false/false" {
		t.Fatalf("after a failing trail attestation: %s, want false/false", got)
	}

	f.policy(t, "tests", "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  attestations:\n    - name: unit-tests\n      type: junit\n")
	v = f.verdicts(t, "env-1")
	if got := f.state(t, "env-1"); got != "true/true" || v["app-0"].Policies[0].Version != 2 {
		t.Fatalf("after version 2 (no trail-compliance): %s, %+v", got, v)
	}
	f.policy(t, "tests", "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  attestations:\n    - name: snyk\n      type: snyk\n")
	if got := f.state(t, "env-1"); got != "false/false" {
		t.Fatalf("after version 3 (snyk): %s, want false/false", got)
	}
	f.handle(t, func(e *contract.Envelope) {
		e.Kind, e.Allow = contract.KindAllowlisted, &contract.AllowlistEntry{ID: "al-1", EnvID: "env-1", Fingerprint: fp(0)}
	})
	v = f.verdicts(t, "env-1")
	if !v["app-0"].Compliant || !v["app-0"].Allowlisted || v["app-0"].Policies[0].Compliant || v["app-1"].Compliant {
		t.Fatalf("after allowlisting app-0: %+v", v)
	}
	f.handle(t, func(e *contract.Envelope) {
		e.Kind, e.Allow = contract.KindAllowlisted, &contract.AllowlistEntry{ID: "al-2", EnvID: "env-1", Fingerprint: fp(1)}
	})
	if got := f.state(t, "env-1"); got != "true/true" {
		t.Fatalf("after allowlisting both: %s, want true/true", got)
	}

	f.attach(t, "env-1", true, "tests")
	if got, v := f.state(t, "env-1"), f.verdicts(t, "env-1"); got != "null/null" || len(v) != 0 {
		t.Fatalf("after detach: %s, %d verdicts; want null/null and none", got, len(v))
	}
}

// TestUnchangedArtifactsKeepTheirEvaluations: a new snapshot evaluates only the artifacts whose input changed;
// the others keep their verdict, evaluation time included.
func TestUnchangedArtifactsKeepTheirEvaluations(t *testing.T) {
	f := newEnvFixture(t, 4)
	for i, src := range envpolicytest.Policies() {
		f.policy(t, fmt.Sprint("p", i), src)
	}
	f.attach(t, "env-1", false, "p0", "p1", "p2")
	f.report(t, 3, 0)
	before := f.verdicts(t, "env-1")
	evals := func() int {
		var hashes []string
		for _, v := range f.verdicts(t, "env-1") {
			hashes = append(hashes, v.InputHash)
		}
		got, err := f.st.PolicyEvaluations(context.Background(), "org-1", hashes)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if n := evals(); n != 9 {
		t.Fatalf("%d evaluations stored for 3 artifacts and 3 policies, want 9", n)
	}
	// app-2 changes build; app-0 and app-1 stay.
	f.handle(t, func(e *contract.Envelope) {
		e.Kind, e.Snapshot = contract.KindSnapshotReported, &contract.SnapshotReport{EnvID: "env-1", Type: "K8S", Instances: []contract.RunningInstance{
			{Name: "app-0", Fingerprint: fp(0), CreationTimestamp: 1}, {Name: "app-1", Fingerprint: fp(1), CreationTimestamp: 1},
			{Name: "app-2", Fingerprint: fp(3), CreationTimestamp: 1}}}
	})
	after := f.verdicts(t, "env-1")
	for _, name := range []string{"app-0", "app-1"} {
		if after[name].EvaluatedAt != before[name].EvaluatedAt || after[name].InputHash != before[name].InputHash {
			t.Errorf("%s was judged again: %+v, before %+v", name, after[name], before[name])
		}
	}
	if after["app-2"].Fingerprint != fp(3) || after["app-2"].EvaluatedAt == before["app-2"].EvaluatedAt {
		t.Errorf("app-2's new build was not judged: %+v", after["app-2"])
	}
	if n := evals(); n != 9 {
		t.Errorf("%d evaluations for the current verdicts, want 9", n)
	}
	_, arts := f.latest(t, "env-1")
	for _, a := range arts {
		v := after[a.Name]
		if a.PolicyVerdict == nil || a.PolicyVerdict.InputHash != v.InputHash || a.PolicyVerdict.Compliant != v.Compliant {
			t.Errorf("snapshot artifact %s keeps %+v, want the verdict %+v", a.Name, a.PolicyVerdict, v)
		}
	}
}

// TestPolicyErrorJudgesNonCompliant: a raw Rego policy that leaves rule_evaluations undefined judges no artifact
// compliant, and says why, without stopping the evaluator.
func TestPolicyErrorJudgesNonCompliant(t *testing.T) {
	f := newEnvFixture(t, 1)
	src := "package broken\n\nrule_evaluations := [] if { input.artifact.name == \"never\" }\n"
	p, err := envpolicy.ParseRego([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	f.handle(t, func(e *contract.Envelope) {
		e.Kind, e.Policy = contract.KindPolicyVersion, &contract.PolicyVersion{Name: "broken", Format: store.PolicyRego, Content: src, ContentID: p.ID}
	})
	f.attach(t, "env-1", false, "broken")
	f.report(t, 1, 0)
	v := f.verdicts(t, "env-1")["app-0"]
	if v.Compliant || len(v.Policies) != 1 || f.state(t, "env-1") != "false/false" {
		t.Fatalf("verdict of a failing policy: %+v, %s", v, f.state(t, "env-1"))
	}
	evals, err := f.st.PolicyEvaluations(context.Background(), "org-1", []string{v.InputHash})
	if err != nil {
		t.Fatal(err)
	}
	if len(evals) != 1 || !evals[0].Failed || !strings.Contains(string(evals[0].RuleEvaluations), "evaluation_error") {
		t.Fatalf("stored evaluation of a failing policy: %+v", evals)
	}
	// Judged again by the next snapshot, not reused.
	f.handle(t, func(e *contract.Envelope) {
		e.Kind, e.Snapshot = contract.KindSnapshotReported, &contract.SnapshotReport{EnvID: "env-1", Type: "K8S", Instances: []contract.RunningInstance{
			{Name: "app-0", Fingerprint: fp(0), CreationTimestamp: 1}, {Name: "sidecar", Fingerprint: fp(0), CreationTimestamp: 1}}}
	})
	if again := f.verdicts(t, "env-1")["app-0"]; again.EvaluatedAt == v.EvaluatedAt || !again.Failed {
		t.Errorf("a failed evaluation was reused: %+v, before %+v", again, v)
	}
}

// TestFlowTagsReJudge: policies see flow tags, so tagging a flow re-judges its running artifacts at once.
func TestFlowTagsReJudge(t *testing.T) {
	f := newEnvFixture(t, 1)
	f.policy(t, "risky", "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  attestations:\n"+
		"    - name: snyk\n      type: snyk\n      if: ${{ flow.tags.risk == \"high\" }}\n")
	f.attach(t, "env-1", false, "risky")
	f.report(t, 1, 0)
	if got := f.state(t, "env-1"); got != "true/true" {
		t.Fatalf("before tagging: %s, want true/true (the rule does not apply)", got)
	}
	f.handle(t, func(e *contract.Envelope) {
		e.Kind, e.FlowTags = contract.KindFlowTagged, &contract.FlowTags{FlowID: "flow-1", SetTags: map[string]string{"risk": "high"}}
	})
	if got := f.state(t, "env-1"); got != "false/false" {
		t.Fatalf("after tagging the flow high risk: %s, want false/false (snyk missing)", got)
	}
}

// TestSnapshotRoundTripsDoNotGrowWithPolicies: with three policies attached, a 1,000-artifact snapshot costs no
// more store round trips than a 10-artifact one, on PostgreSQL.
func TestSnapshotRoundTripsDoNotGrowWithPolicies(t *testing.T) {
	trips := func(n int) int64 {
		st, _, _ := openPostgres(t)
		f := newPolicyFixtureOn(t, st, n)
		f.report(t, n, 0)
		before := f.st.Statements()
		f.report(t, n, 1)
		return f.st.Statements() - before
	}
	// A small snapshot may take a few more: its rows go in parts of the sizes whose statements
	// stay prepared (sqlstore's preparedChunks), a large one's in one statement a table.
	small, large := trips(10), trips(1000)
	if large > small {
		t.Fatalf("a 10-artifact snapshot took %d round trips, a 1,000-artifact one %d", small, large)
	}
	t.Logf("round trips per snapshot with 3 policies: %d", large)
}

// newPolicyFixture is an environment with the three benchmark policies attached and n artifacts, each reported in
// one of 20 trails (of two flows with tags) with tests, a scan, a pull request and a decision.
func newPolicyFixture(tb testing.TB, n int) *envFixture {
	tb.Helper()
	return newPolicyFixtureOn(tb, sqlitetest.Open(tb), n)
}

// newPolicyFixtureOn is newPolicyFixture on st.
func newPolicyFixtureOn(tb testing.TB, st *sqlstore.Store, n int) *envFixture {
	tb.Helper()
	f := newEnvFixtureOn(tb, st, 0)
	f.handle(tb, func(e *contract.Envelope) {
		tmpl, _ := template.Parse(nil)
		e.Kind, e.Flow = contract.KindFlowUpserted, &contract.FlowUpsert{ID: "flow-2", Name: "api", Template: tmpl.Content, TemplateID: tmpl.ID}
	})
	f.handle(tb, func(e *contract.Envelope) {
		e.Kind, e.FlowTags = contract.KindFlowTagged, &contract.FlowTags{FlowID: "flow-2", SetTags: map[string]string{"risk-level": "high", "tier": "3"}}
	})
	f.handle(tb, func(e *contract.Envelope) {
		e.Kind, e.Control = contract.KindControlChanged, &contract.ControlChange{Identifier: "change-approval", Op: contract.ControlCreate}
	})
	att := func(flow, trail, fp, name, typ string) {
		f.handle(tb, func(e *contract.Envelope) {
			e.Kind, e.Attestation = contract.KindAttestationReported, &contract.AttestationInput{ID: e.ID, FlowID: flow,
				TrailName: trail, Name: name, Type: typ, IsCompliant: true, ArtifactFingerprint: fp,
				Data: json.RawMessage(`{"control":"change-approval"}`)}
		})
	}
	for i := range n + 1 { // one spare build for the benchmark that changes an artifact
		flow, trail := []string{"flow-1", "flow-2"}[i%2], fmt.Sprint("t", i%20)
		f.handle(tb, func(e *contract.Envelope) {
			e.Kind, e.Artifact = contract.KindArtifactReported, &contract.ArtifactReport{ID: fmt.Sprint("pa-", i), FlowID: flow,
				TrailName: trail, Fingerprint: fp(i), Report: json.RawMessage(`{"filename": "x"}`)}
		})
		if i < 20 {
			att(flow, trail, "", "pr", "pull_request")
		}
		att(flow, trail, fp(i), "unit-tests", "junit")
		att(flow, trail, fp(i), "snyk", "snyk")
		att(flow, trail, fp(i), "release", "decision")
	}
	dirty, err := f.st.DirtyTrails(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	for _, id := range dirty {
		if err := f.ev.EvaluateTrail(context.Background(), id); err != nil {
			tb.Fatal(err)
		}
	}
	for i, src := range envpolicytest.Policies() {
		f.policy(tb, fmt.Sprint("policy-", i), src)
	}
	f.attach(tb, "env-1", false, "policy-0", "policy-1", "policy-2")
	return f
}

// BenchmarkApplySnapshot1000Policies: a 1,000-artifact snapshot applied end to end in the evaluator against 3
// policies, in a new environment each time. Cold: a new evaluator each time too, so every policy is compiled and
// prepared; Warm: the queries stay prepared. In both, the evaluations stored by the iteration before are deleted
// first (untimed), so every artifact is evaluated by every policy: the policies are YAML, whose evaluations
// would otherwise carry over from the environment before. Promoted keeps them: the same artifacts run in one
// environment after another with the same policy versions, as a build promoted through environments does.
// NoPolicies is the same apply without policies, in the same run.
func BenchmarkApplySnapshot1000Policies(b *testing.B) {
	for _, mode := range []string{"NoPolicies", "Cold", "Warm", "Promoted"} {
		withPolicies := mode != "NoPolicies"
		b.Run(mode, func(b *testing.B) {
			f := newPolicyFixture(b, 1000)
			insts := make([]contract.RunningInstance, 1000)
			for j := range insts {
				insts[j] = contract.RunningInstance{Name: fmt.Sprint("app-", j), Fingerprint: fp(j), CreationTimestamp: 1}
			}
			if mode == "Promoted" {
				f.report(b, 1000, 0) // judged in env-1 first, as in staging before production
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				envID := fmt.Sprint("env-b", i)
				f.handle(b, func(e *contract.Envelope) {
					e.Kind, e.Environment = contract.KindEnvironmentUpserted, &contract.EnvironmentUpsert{ID: envID, Name: envID, Type: "K8S"}
				})
				if withPolicies {
					f.attach(b, envID, false, "policy-0", "policy-1", "policy-2")
				}
				if mode == "Cold" || mode == "Warm" {
					if _, err := f.st.DB().Exec(`DELETE FROM policy_evaluations`); err != nil {
						b.Fatal(err)
					}
				}
				if mode == "Cold" {
					ev, err := New(Config{}, Deps{Store: f.st, Engine: template.NewEngine(template.EngineOptions{})})
					if err != nil {
						b.Fatal(err)
					}
					f.ev = ev
				}
				b.StartTimer()
				f.handle(b, func(e *contract.Envelope) {
					e.Kind, e.Snapshot = contract.KindSnapshotReported, &contract.SnapshotReport{EnvID: envID, Type: "K8S", Instances: insts}
				})
			}
			b.StopTimer()
			if withPolicies {
				if v := f.verdicts(b, fmt.Sprint("env-b", b.N-1)); len(v) != 1000 {
					b.Fatalf("%d verdicts, want 1000", len(v))
				}
			}
		})
	}
}

// BenchmarkApplySnapshot1000PoliciesOneChanged: the same environment reports 1,000 artifacts again with one of them
// a different build: only that one is evaluated, against the 3 policies. NoPolicies is the same without policies.
func BenchmarkApplySnapshot1000PoliciesOneChanged(b *testing.B) {
	for _, withPolicies := range []bool{false, true} {
		b.Run(map[bool]string{false: "NoPolicies", true: "Policies"}[withPolicies], func(b *testing.B) {
			f := newPolicyFixture(b, 1000)
			if !withPolicies {
				f.attach(b, "env-1", true, "policy-0", "policy-1", "policy-2")
			}
			f.report(b, 1000, 0)
			var builds [2]func() *message.Message // artifact 0 of the new build, then of the old one
			for k := range builds {
				insts := make([]contract.RunningInstance, 1000)
				for j := range insts {
					insts[j] = contract.RunningInstance{Name: fmt.Sprint("app-", j), Fingerprint: fp(j), CreationTimestamp: 1}
				}
				insts[0].Fingerprint = fp(1000 * (1 - k))
				builds[k] = f.encoded(b, runningIn(insts...))
			}
			b.ResetTimer()
			reportCPU(b)
			for i := range b.N {
				if err := f.ev.Handle(builds[i%2]()); err != nil { // alternate artifact 0 between two builds
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if v := f.verdicts(b, "env-1"); withPolicies != (len(v) == 1000) {
				b.Fatalf("%d verdicts with policies %v", len(v), withPolicies)
			}
		})
	}
}

// regoPolicy stores a version of a raw Rego policy named name.
func (f *envFixture) regoPolicy(tb testing.TB, name, src string) {
	tb.Helper()
	p, err := envpolicy.ParseRego([]byte(src))
	if err != nil {
		tb.Fatal(err)
	}
	f.handle(tb, func(e *contract.Envelope) {
		e.Kind, e.Policy = contract.KindPolicyVersion, &contract.PolicyVersion{Name: name, Format: store.PolicyRego, Content: src, ContentID: p.ID}
	})
}

// envNamedProd is a raw Rego policy that reads the environment: compliant in an environment named prod only.
const envNamedProd = "package envname\n\nrule_evaluations := [{\"rule\": {\"type\": \"custom\", \"id\": \"env-name\", \"definition\": {}}, " +
	"\"satisfied\": input.environment.name == \"prod\", \"ignored\": false, \"resolutions\": []}]\n"

// TestEnvironmentRenameReJudges: a raw Rego policy may read the environment's name and tags, so renaming it
// judges its artifacts again, with the new name in their input. YAML policies cannot read them: their
// evaluations hold, and the verdicts are written again without an OPA evaluation.
func TestEnvironmentRenameReJudges(t *testing.T) {
	f := newEnvFixture(t, 1)
	f.policy(t, "prov", "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  provenance:\n    required: true\n")
	f.regoPolicy(t, "env-name", envNamedProd)
	f.attach(t, "env-1", false, "prov", "env-name")
	f.report(t, 1, 0)
	before := f.verdicts(t, "env-1")["app-0"]
	rename := func(name string) {
		f.handle(t, func(e *contract.Envelope) {
			e.Kind, e.EnvChange = contract.KindEnvironmentChanged, &contract.EnvironmentChange{EnvID: "env-1", NewName: &name}
		})
	}
	rename("staging")
	after := f.verdicts(t, "env-1")["app-0"]
	if after.InputHash == before.InputHash || after.EvaluatedAt == before.EvaluatedAt || after.Compliant || !before.Compliant {
		t.Errorf("after renaming prod to staging: %+v, before %+v", after, before)
	}

	f.attach(t, "env-1", true, "env-name")
	yamlOnly := f.verdicts(t, "env-1")["app-0"]
	evaluations := f.ev.policies.engine.Judged()
	rename("production")
	again := f.verdicts(t, "env-1")["app-0"]
	if again.InputHash != yamlOnly.InputHash || !again.Compliant || again.EvaluatedAt == yamlOnly.EvaluatedAt {
		t.Errorf("YAML policies only, after a rename: %+v, before %+v; want the same input hash, written again", again, yamlOnly)
	}
	if n := f.ev.policies.engine.Judged() - evaluations; n != 0 {
		t.Errorf("YAML policies only: a rename made %d OPA evaluations, want none", n)
	}
}

// TestPromotionReusesEvaluations: an artifact judged by YAML policies in one environment keeps those evaluations
// when it runs in another with the same policy versions (a promotion): the second environment's verdicts cost no
// OPA evaluation, and say what the first one's do. A raw Rego policy, which may read the environment, is
// evaluated again there.
func TestPromotionReusesEvaluations(t *testing.T) {
	f := newEnvFixture(t, 2)
	f.handle(t, func(e *contract.Envelope) {
		e.Kind, e.Environment = contract.KindEnvironmentUpserted, &contract.EnvironmentUpsert{ID: "env-2", Name: "staging", Type: "K8S"}
	})
	for i, src := range envpolicytest.Policies() {
		f.policy(t, fmt.Sprint("policy-", i), src)
	}
	f.regoPolicy(t, "env-name", envNamedProd)
	f.attach(t, "env-1", false, "policy-0", "policy-1", "policy-2")
	f.attach(t, "env-2", false, "policy-0", "policy-1", "policy-2")
	running := runningIn(contract.RunningInstance{Name: "app-0", Fingerprint: fp(0), CreationTimestamp: 1},
		contract.RunningInstance{Name: "app-1", Fingerprint: fp(1), CreationTimestamp: 1})
	stats := f.ev.policies.engine.Judged // artifacts OPA evaluated, one a policy
	snapshot := func(envID string) {
		f.handle(t, func(e *contract.Envelope) { running(e); e.Snapshot.EnvID = envID })
	}
	before := stats()
	snapshot("env-2")
	if n := stats() - before; n == 0 {
		t.Fatal("the first environment's snapshot made no OPA evaluation")
	}
	before = stats()
	snapshot("env-1")
	if n := stats() - before; n != 0 {
		t.Errorf("the promoted snapshot made %d OPA evaluations, want none", n)
	}
	staging, prod := f.verdicts(t, "env-2"), f.verdicts(t, "env-1")
	for _, name := range []string{"app-0", "app-1"} {
		s, p := staging[name], prod[name]
		if s.InputHash == "" || s.InputHash != p.InputHash || !reflect.DeepEqual(s.Policies, p.Policies) || s.Compliant != p.Compliant {
			t.Errorf("%s: staging %+v, prod %+v: want the same evaluations", name, s, p)
		}
	}
	// With a policy that reads the environment among them, each environment's inputs are its own.
	f.attach(t, "env-1", false, "env-name")
	f.attach(t, "env-2", false, "env-name")
	staging, prod = f.verdicts(t, "env-2"), f.verdicts(t, "env-1")
	if a, b := staging["app-0"], prod["app-0"]; a.InputHash == b.InputHash || a.Compliant || len(b.Policies) != 4 {
		t.Errorf("with a policy reading the environment: staging %+v, prod %+v", a, b)
	}
}
