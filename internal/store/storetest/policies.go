package storetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

func policyVersion(n int, content string) store.PolicyVersion {
	return store.PolicyVersion{Version: n, Format: store.PolicyYAML, Content: content, ContentID: "id-" + content,
		Comment: "change " + content, CreatedBy: "alice", CreatedAt: t0 + float64(n)}
}

func (e *env) environment(t *testing.T, orgID, id, name string) store.Environment {
	t.Helper()
	en := store.Environment{ID: id, OrgID: orgID, Name: name, Type: "K8S", Tags: map[string]string{}, CreatedAt: t0, LastModifiedAt: t0}
	e.update(t, func(tx store.Tx) error {
		_, err := tx.UpsertEnvironment(e.ctx, en)
		return err
	})
	return en
}

func testPolicies(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "other")
	put := func(org, name, desc string, v store.PolicyVersion) {
		t.Helper()
		e.update(t, func(tx store.Tx) error { return tx.PutPolicyVersion(e.ctx, org, name, desc, v) })
	}
	put("org-a", "prod", "first", policyVersion(1, "a"))
	put("org-a", "prod", "", policyVersion(2, "b")) // an empty description keeps the policy's
	put("org-a", "beta", "beta one", policyVersion(1, "c"))
	put("org-b", "prod", "theirs", policyVersion(1, "z"))

	got, err := e.s.Policy(e.ctx, "org-a", "prod")
	must(t, "Policy", err)
	want := store.Policy{OrgID: "org-a", Name: "prod", Description: "first", CreatedBy: "alice", CreatedAt: t0 + 1,
		Versions: []store.PolicyVersion{policyVersion(1, "a"), policyVersion(2, "b")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Policy = %+v, want %+v", got, want)
	}
	if got.Latest().Version != 2 {
		t.Errorf("Latest = %+v, want version 2", got.Latest())
	}
	// Versions are immutable: a second version 2 is refused, not an overwrite.
	if err := e.s.Update(e.ctx, func(tx store.Tx) error {
		return tx.PutPolicyVersion(e.ctx, "org-a", "prod", "", policyVersion(2, "again"))
	}); err == nil {
		t.Error("PutPolicyVersion: a second version 2 was accepted")
	}
	e.update(t, func(tx store.Tx) error { return tx.SetPolicyDescription(e.ctx, "org-a", "prod", "second") })
	if p, err := e.s.Policy(e.ctx, "org-a", "prod"); err != nil || p.Description != "second" || len(p.Versions) != 2 {
		t.Errorf("after SetPolicyDescription: %+v, %v", p, err)
	}
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.SetPolicyDescription(e.ctx, "org-a", "nope", "x") })
	wantErr(t, "SetPolicyDescription unknown", err, store.ErrNotFound)
	_, err = e.s.Policy(e.ctx, "org-a", "nope")
	wantErr(t, "Policy unknown", err, store.ErrNotFound)

	list, err := e.s.ListPolicies(e.ctx, "org-a")
	must(t, "ListPolicies", err)
	if len(list) != 2 || list[0].Name != "beta" || list[1].Name != "prod" || len(list[0].Versions) != 1 || len(list[1].Versions) != 2 {
		t.Errorf("ListPolicies = %+v, want beta (1 version), prod (2)", list)
	}
	// Tenancy: the other organization's policy of the same name is its own.
	if p, err := e.s.Policy(e.ctx, "org-b", "prod"); err != nil || p.Description != "theirs" || len(p.Versions) != 1 {
		t.Errorf("org-b prod = %+v, %v", p, err)
	}
}

func testPolicyAttachments(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "other")
	for _, name := range []string{"p1", "p2", "p3"} {
		e.update(t, func(tx store.Tx) error {
			return tx.PutPolicyVersion(e.ctx, "org-a", name, "", policyVersion(1, name))
		})
	}
	e.update(t, func(tx store.Tx) error { return tx.PutPolicyVersion(e.ctx, "org-a", "p2", "", policyVersion(2, "p2b")) })
	prod := e.environment(t, "org-a", "env-1", "prod")
	e.environment(t, "org-a", "env-2", "staging")
	e.environment(t, "org-b", "env-3", "prod")

	attach := func(envID, orgID string, names ...string) {
		t.Helper()
		e.update(t, func(tx store.Tx) error { return tx.AttachPolicies(e.ctx, orgID, envID, names, t0) })
	}
	attach("env-1", "org-a", "p2", "p1")
	attach("env-1", "org-a", "p1", "p3") // p1 again changes nothing
	attach("env-2", "org-a", "p2")

	got, err := e.s.AttachedPolicies(e.ctx, "env-1")
	must(t, "AttachedPolicies", err)
	var names []string
	for _, a := range got {
		names = append(names, a.Name)
	}
	if !slices.Equal(names, []string{"p2", "p1", "p3"}) {
		t.Fatalf("AttachedPolicies names = %v, want p2 p1 p3 (attachment order)", names)
	}
	if got[0].Version != 2 || got[0].Content != "p2b" || got[1].Version != 1 || got[1].ContentID != "id-p1" {
		t.Errorf("AttachedPolicies versions: %+v, want the latest of each", got)
	}
	all, err := e.s.AttachedPolicyNames(e.ctx, "org-a")
	must(t, "AttachedPolicyNames", err)
	if !reflect.DeepEqual(all, map[string][]string{"env-1": {"p2", "p1", "p3"}, "env-2": {"p2"}}) {
		t.Errorf("AttachedPolicyNames = %v", all)
	}
	if envs, err := e.s.PolicyEnvironments(e.ctx, "org-a", "p2"); err != nil || !slices.Equal(envs, []string{"env-1", "env-2"}) {
		t.Errorf("PolicyEnvironments(p2) = %v, %v", envs, err)
	}

	e.update(t, func(tx store.Tx) error { return tx.DetachPolicies(e.ctx, "env-1", []string{"p1", "not-attached"}) })
	if got, _ := e.s.AttachedPolicyNames(e.ctx, "org-a"); !slices.Equal(got["env-1"], []string{"p2", "p3"}) {
		t.Errorf("after detach: %v, want p2 p3", got["env-1"])
	}
	// An archived environment no longer consumes its policies.
	e.update(t, func(tx store.Tx) error {
		env2, err := tx.EnvironmentByID(e.ctx, "org-a", "env-2")
		if err != nil {
			return err
		}
		env2.Archived = true
		return tx.UpdateEnvironment(e.ctx, env2)
	})
	if envs, err := e.s.PolicyEnvironments(e.ctx, "org-a", "p2"); err != nil || !slices.Equal(envs, []string{"env-1"}) {
		t.Errorf("PolicyEnvironments(p2) after archiving env-2 = %v, %v", envs, err)
	}

	// Where fingerprints run, only in environments with policies.
	fpA, fpB := fp("aa"), fp("bb")
	e.update(t, func(tx store.Tx) error {
		if err := tx.SetRunning(e.ctx, "org-a", "env-1", nil, []store.Running{{Fingerprint: fpA, Name: "web", Since: t0}}); err != nil {
			return err
		}
		if err := tx.SetRunning(e.ctx, "org-a", "env-1", nil, []store.Running{{Fingerprint: fpA, Name: "web-2", Since: t0}}); err != nil {
			return err
		}
		return tx.SetRunning(e.ctx, "org-b", "env-3", nil, []store.Running{{Fingerprint: fpB, Name: "api", Since: t0}})
	})
	e.environment(t, "org-a", "env-4", "dev") // no policies
	e.update(t, func(tx store.Tx) error {
		return tx.SetRunning(e.ctx, "org-a", "env-4", nil, []store.Running{{Fingerprint: fpB, Name: "api", Since: t0}})
	})
	running, err := e.s.RunningWithPolicies(e.ctx, "org-a", []string{fpA, fpB})
	must(t, "RunningWithPolicies", err)
	if len(running) != 2 || running[0].EnvID != "env-1" || running[0].Name != "web" || running[1].Name != "web-2" {
		t.Errorf("RunningWithPolicies = %+v, want web and web-2 in env-1 only", running)
	}
	// The same, found by a flow that reported fpA (twice) and fpB.
	f := e.flow(t, "org-a", "flow-1", "app")
	tr := e.trail(t, f, "trail-1", "t1", t0)
	e.artifact(t, tr, "art-1", fpA, "", "", t0)
	e.artifact(t, tr, "art-2", fpA, "", "", t0+1)
	e.artifact(t, tr, "art-3", fpB, "", "", t0+2)
	byFlow, err := e.s.RunningWithPoliciesOfFlow(e.ctx, "org-a", "flow-1")
	must(t, "RunningWithPoliciesOfFlow", err)
	if !reflect.DeepEqual(byFlow, running) {
		t.Errorf("RunningWithPoliciesOfFlow = %+v, want %+v", byFlow, running)
	}
	if none, err := e.s.RunningWithPoliciesOfFlow(e.ctx, "org-a", "flow-x"); err != nil || len(none) != 0 {
		t.Errorf("RunningWithPoliciesOfFlow of an unknown flow = %+v, %v", none, err)
	}
	// Many fingerprints, which a store may ask about in parts, in two environments: the answer is
	// in environment order as a whole (the evaluator locks environments in that order).
	e.environment(t, "org-a", "env-5", "canary")
	attach("env-5", "org-a", "p1")
	var many []string
	e.update(t, func(tx store.Tx) error {
		for i := range 150 {
			x := fp(fmt.Sprintf("%04d", i))
			many = append(many, x)
			for _, env := range []string{"env-5", "env-1"} {
				if err := tx.SetRunning(e.ctx, "org-a", env, nil, []store.Running{{Fingerprint: x, Name: "svc", Since: t0}}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	slices.Reverse(many)
	running, err = e.s.RunningWithPolicies(e.ctx, "org-a", many)
	must(t, "RunningWithPolicies of many", err)
	if len(running) != 300 || !slices.IsSortedFunc(running, func(x, y store.Running) int {
		return cmp.Or(cmp.Compare(x.EnvID, y.EnvID), cmp.Compare(x.Fingerprint, y.Fingerprint))
	}) {
		t.Errorf("RunningWithPolicies of 150 fingerprints in 2 environments: %d, sorted %v; want 300 in environment order",
			len(running), slices.IsSortedFunc(running, func(x, y store.Running) int { return cmp.Compare(x.EnvID, y.EnvID) }))
	}
	must(t, "LockEnvironment", e.s.Update(e.ctx, func(tx store.Tx) error { return tx.LockEnvironment(e.ctx, prod.ID) }))
}

func testVerdicts(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.environment(t, "org-a", "env-1", "prod")
	e.environment(t, "org-a", "env-2", "staging")
	refs := []store.VerdictPolicy{{Name: "p1", Version: 2, ID: "id-1", Compliant: true}, {Name: "p2", Version: 1, ID: "id-2"}}
	v := func(env, name, fpc string, compliant bool) store.Verdict {
		return store.Verdict{EnvID: env, Name: name, Fingerprint: fp(fpc), InputHash: "h-" + name, Compliant: compliant,
			Policies: refs, EvaluatedAt: t0}
	}
	e.update(t, func(tx store.Tx) error {
		return tx.PutVerdicts(e.ctx, "org-a", []store.Verdict{v("env-1", "web", "a", true), v("env-1", "api", "b", false),
			v("env-1", "web-2", "a", false), v("env-2", "web", "a", false)})
	})
	all, err := e.s.Verdicts(e.ctx, "env-1", nil)
	must(t, "Verdicts", err)
	if len(all) != 3 || all[0].Name != "web" || all[1].Name != "web-2" || all[2].Name != "api" {
		t.Fatalf("Verdicts = %+v, want web, web-2 (fingerprint a), api (b)", all)
	}
	if !reflect.DeepEqual(all[0], v("env-1", "web", "a", true)) {
		t.Errorf("Verdict = %+v, want %+v", all[0], v("env-1", "web", "a", true))
	}
	// With the environment and the evaluations of the verdicts' inputs, in one read.
	e.update(t, func(tx store.Tx) error {
		return tx.PutPolicyEvaluations(e.ctx, "org-a", []store.PolicyEvaluation{
			{PolicyID: "id-1", InputHash: "h-web", Compliant: true, RuleEvaluations: json.RawMessage(`[]`)},
			{PolicyID: "id-2", InputHash: "h-web", RuleEvaluations: json.RawMessage(`[{"satisfied":false}]`)},
			{PolicyID: "id-1", InputHash: "h-api", Compliant: true, RuleEvaluations: json.RawMessage(`[]`)}})
	})
	en, vs, evs, err := e.s.EnvironmentVerdicts(e.ctx, "org-a", "prod", fp("a"))
	must(t, "EnvironmentVerdicts", err)
	if en.ID != "env-1" || len(vs) != 2 || !reflect.DeepEqual(vs[0], v("env-1", "web", "a", true)) || vs[1].Name != "web-2" ||
		len(evs) != 2 || evs[0].InputHash != "h-web" || evs[1].InputHash != "h-web" {
		t.Errorf("EnvironmentVerdicts = %+v, %+v, %+v", en, vs, evs)
	}
	if en, vs, evs, err := e.s.EnvironmentVerdicts(e.ctx, "org-a", "staging", fp("b")); err != nil || en.ID != "env-2" || len(vs) != 0 || len(evs) != 0 {
		t.Errorf("EnvironmentVerdicts without a verdict = %+v, %+v, %+v, %v", en, vs, evs, err)
	}
	_, _, _, err = e.s.EnvironmentVerdicts(e.ctx, "org-a", "nope", fp("a"))
	wantErr(t, "EnvironmentVerdicts of an unknown environment", err, store.ErrNotFound)
	some, err := e.s.Verdicts(e.ctx, "env-1", []string{fp("b"), fp("cc")})
	must(t, "Verdicts of fingerprints", err)
	if len(some) != 1 || some[0].Name != "api" {
		t.Errorf("Verdicts(b, c) = %+v, want api", some)
	}
	if n, err := e.s.NonCompliantVerdicts(e.ctx, "env-1"); err != nil || n != 2 {
		t.Errorf("NonCompliantVerdicts = %d, %v, want 2", n, err)
	}
	states, err := e.s.VerdictStates(e.ctx, "env-1", nil)
	must(t, "VerdictStates", err)
	if len(states) != 3 || states[store.VerdictKey{Name: "web-2", Fingerprint: fp("a")}] != (store.VerdictState{InputHash: "h-web-2"}) ||
		!states[store.VerdictKey{Name: "web", Fingerprint: fp("a")}].Compliant {
		t.Errorf("VerdictStates = %v", states)
	}
	if states, err := e.s.VerdictStates(e.ctx, "env-1", []string{fp("b")}); err != nil || len(states) != 1 ||
		states[store.VerdictKey{Name: "api", Fingerprint: fp("b")}].InputHash != "h-api" {
		t.Errorf("VerdictStates(b) = %v, %v", states, err)
	}
	// A verdict is replaced, not added, and deleting by key leaves the rest.
	replaced := v("env-1", "api", "b", true)
	replaced.Allowlisted, replaced.Failed, replaced.InputHash, replaced.Policies = true, true, "h-new", nil
	e.update(t, func(tx store.Tx) error { return tx.PutVerdicts(e.ctx, "org-a", []store.Verdict{replaced}) })
	if got, _ := e.s.Verdicts(e.ctx, "env-1", []string{fp("b")}); len(got) != 1 || !got[0].Compliant || !got[0].Allowlisted ||
		!got[0].Failed || got[0].InputHash != "h-new" || len(got[0].Policies) != 0 {
		t.Errorf("replaced verdict = %+v", got)
	}
	e.update(t, func(tx store.Tx) error {
		return tx.DeleteVerdicts(e.ctx, "env-1", []store.VerdictKey{{Name: "web-2", Fingerprint: fp("a")}, {Name: "gone", Fingerprint: fp("ff")}})
	})
	if n, err := e.s.NonCompliantVerdicts(e.ctx, "env-1"); err != nil || n != 0 {
		t.Errorf("NonCompliantVerdicts after delete = %d, %v, want 0", n, err)
	}
	e.update(t, func(tx store.Tx) error { return tx.DeleteVerdicts(e.ctx, "env-1", nil) })
	if got, _ := e.s.Verdicts(e.ctx, "env-1", nil); len(got) != 0 {
		t.Errorf("after deleting all: %+v", got)
	}
	if got, _ := e.s.Verdicts(e.ctx, "env-2", nil); len(got) != 1 {
		t.Errorf("another environment's verdicts: %+v, want 1 left", got)
	}
}

func testPolicyEvaluations(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "other")
	ev := func(policy, hash string, ok bool) store.PolicyEvaluation {
		return store.PolicyEvaluation{PolicyID: policy, InputHash: hash, Compliant: ok,
			RuleEvaluations: json.RawMessage(`[{"rule":{"type":"provenance"},"satisfied":` + map[bool]string{true: "true", false: "false"}[ok] + `}]`)}
	}
	e.update(t, func(tx store.Tx) error {
		return tx.PutPolicyEvaluations(e.ctx, "org-a", []store.PolicyEvaluation{ev("p1", "h1", true), ev("p2", "h1", false), ev("p1", "h2", true)})
	})
	// Stored once: the same pair again keeps the first, unless the first failed.
	failed := ev("p3", "h1", false)
	failed.Failed = true
	e.update(t, func(tx store.Tx) error {
		return tx.PutPolicyEvaluations(e.ctx, "org-a", []store.PolicyEvaluation{ev("p1", "h1", false), failed})
	})
	outcomes, err := e.s.PolicyOutcomes(e.ctx, "org-a", []string{"h1"})
	must(t, "PolicyOutcomes", err)
	if len(outcomes) != 2 || slices.ContainsFunc(outcomes, func(o store.PolicyOutcome) bool { return o.PolicyID == "p3" }) {
		t.Errorf("PolicyOutcomes(h1) = %+v, want p1 and p2 (not the failed p3)", outcomes)
	}
	e.update(t, func(tx store.Tx) error {
		return tx.PutPolicyEvaluations(e.ctx, "org-a", []store.PolicyEvaluation{ev("p3", "h1", true)})
	})
	e.update(t, func(tx store.Tx) error {
		return tx.PutPolicyEvaluations(e.ctx, "org-b", []store.PolicyEvaluation{ev("p1", "h1", false)})
	})
	got, err := e.s.PolicyEvaluations(e.ctx, "org-a", []string{"h1", "h3", "h1"})
	must(t, "PolicyEvaluations", err)
	slices.SortFunc(got, func(a, b store.PolicyEvaluation) int {
		if a.PolicyID < b.PolicyID {
			return -1
		}
		return 1
	})
	if len(got) != 3 || got[0].PolicyID != "p1" || !got[0].Compliant || got[1].PolicyID != "p2" || got[1].Compliant ||
		got[2].PolicyID != "p3" || !got[2].Compliant || got[2].Failed {
		t.Fatalf("PolicyEvaluations(h1) = %+v, want p1 compliant, p2 not, p3 replaced by its success", got)
	}
	checkJSON(t, "rule evaluations", got[0].RuleEvaluations, ev("p1", "h1", true).RuleEvaluations)
}

func testEnvironmentState(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.environment(t, "org-a", "env-1", "prod")
	yes, no := true, false
	set := func(state *bool) bool {
		t.Helper()
		var changed bool
		e.update(t, func(tx store.Tx) (err error) {
			changed, err = tx.SetEnvironmentState(e.ctx, "org-a", "env-1", state)
			return err
		})
		got, err := e.s.EnvironmentByID(e.ctx, "org-a", "env-1")
		must(t, "EnvironmentByID", err)
		if (got.State == nil) != (state == nil) || (state != nil && *got.State != *state) {
			t.Errorf("state = %v after setting %v", got.State, state)
		}
		return changed
	}
	for i, step := range []struct {
		state   *bool
		changed bool
	}{{&yes, true}, {&yes, false}, {&no, true}, {nil, true}, {nil, false}} {
		if got := set(step.state); got != step.changed {
			t.Errorf("step %d: changed = %v, want %v", i, got, step.changed)
		}
	}

	// Only the latest snapshot's compliance changes; an environment without snapshots is no error.
	e.update(t, func(tx store.Tx) error {
		for i := 1; i <= 2; i++ {
			if err := tx.InsertSnapshot(e.ctx, store.Snapshot{EnvID: "env-1", Index: i, Timestamp: t0, Type: "K8S",
				Artifacts: json.RawMessage(`[]`)}); err != nil {
				return err
			}
		}
		if err := tx.SetLatestSnapshotCompliance(e.ctx, "env-none", &yes); err != nil {
			return err
		}
		return tx.SetLatestSnapshotCompliance(e.ctx, "env-1", &no)
	})
	first, err := e.s.SnapshotByIndex(e.ctx, "env-1", 1)
	must(t, "SnapshotByIndex", err)
	latest, err := e.s.LatestSnapshot(e.ctx, "env-1")
	must(t, "LatestSnapshot", err)
	if first.Compliant != nil || latest.Compliant == nil || *latest.Compliant {
		t.Errorf("snapshot compliance: first %v, latest %v; want null and false", first.Compliant, latest.Compliant)
	}

	refs := []store.SnapshotPolicy{{Name: "p1", Version: 3, ID: "id-1"}, {Name: "p0", Version: 1, ID: "id-0"}}
	e.update(t, func(tx store.Tx) error { return tx.PutSnapshotPolicies(e.ctx, "env-1", 2, refs) })
	if got, err := e.s.SnapshotPolicies(e.ctx, "env-1", 2); err != nil || !reflect.DeepEqual(got, refs) {
		t.Errorf("SnapshotPolicies(2) = %+v, %v, want %+v", got, err, refs)
	}
	if got, err := e.s.SnapshotPolicies(e.ctx, "env-1", 1); err != nil || got != nil {
		t.Errorf("SnapshotPolicies of a snapshot without policies = %+v, %v", got, err)
	}
}

func testAttestationFactsByTrails(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := e.flow(t, "org-a", "flow-1", "app")
	t1 := e.trail(t, f, "trail-1", "t1", t0)
	t2 := e.trail(t, f, "trail-2", "t2", t0)
	e.attestation(t, t1, "att-1", "tests", t0+1)
	e.attestation(t, t2, "att-2", "scan", t0+2)
	d := newAttestation(t1, "att-3", "release", t0+3)
	d.Type, d.Data = "decision", json.RawMessage(`{"control":"CTL-1","attestation_data":{"is_compliant":true}}`)
	e.update(t, func(tx store.Tx) error { return tx.InsertAttestation(e.ctx, d) })

	facts, err := e.s.TrailAttestationFactsByIDs(e.ctx, []string{"trail-1", "trail-2", "trail-none"})
	must(t, "TrailAttestationFactsByIDs", err)
	one, err := e.s.TrailAttestationFacts(e.ctx, "trail-1")
	must(t, "TrailAttestationFacts", err)
	if len(facts) != 2 || !reflect.DeepEqual(facts["trail-1"], one) || len(facts["trail-2"]) != 1 || facts["trail-2"][0].ID != "att-2" {
		t.Errorf("TrailAttestationFactsByIDs = %+v, want trail-1 as TrailAttestationFacts gives it and trail-2's one", facts)
	}

	// Read from the start, then only what each trail gained after the position it answered.
	all, last, err := e.s.TrailAttestationFactsAfter(e.ctx, map[string]int64{"trail-1": 0, "trail-2": 0, "trail-none": 0})
	must(t, "TrailAttestationFactsAfter", err)
	if !reflect.DeepEqual(all, facts) || len(last) != 2 || last["trail-1"] <= last["trail-2"] {
		t.Errorf("TrailAttestationFactsAfter(0) = %+v, %v; want %+v and trail-1's position beyond trail-2's", all, last, facts)
	}
	e.attestation(t, t1, "att-4", "tests", t0+4)
	e.attestation(t, t2, "att-5", "scan", t0+5)
	e.attestation(t, t1, "att-6", "scan", t0+6)
	more, last2, err := e.s.TrailAttestationFactsAfter(e.ctx, map[string]int64{"trail-1": last["trail-1"], "trail-2": last["trail-2"]})
	must(t, "TrailAttestationFactsAfter", err)
	var got []string
	for _, trail := range []string{"trail-1", "trail-2"} {
		for _, a := range more[trail] {
			got = append(got, trail+":"+a.ID)
		}
	}
	if want := []string{"trail-1:att-4", "trail-1:att-6", "trail-2:att-5"}; !reflect.DeepEqual(got, want) {
		t.Errorf("TrailAttestationFactsAfter(last) = %v, want %v", got, want)
	}
	if last2["trail-1"] <= last["trail-1"] || last2["trail-2"] <= last["trail-2"] {
		t.Errorf("TrailAttestationFactsAfter positions %v after %v: want both beyond", last2, last)
	}
	whole, err := e.s.TrailAttestationFacts(e.ctx, "trail-1")
	must(t, "TrailAttestationFacts", err)
	if joined := append(slices.Clone(all["trail-1"]), more["trail-1"]...); !reflect.DeepEqual(joined, whole) {
		t.Errorf("facts read in two parts = %+v, want the trail's facts %+v", joined, whole)
	}
	none, nonePos, err := e.s.TrailAttestationFactsAfter(e.ctx, map[string]int64{"trail-1": last2["trail-1"]})
	must(t, "TrailAttestationFactsAfter", err)
	if len(none) != 0 || len(nonePos) != 0 {
		t.Errorf("TrailAttestationFactsAfter(its last position) = %v, %v; want nothing", none, nonePos)
	}

	controls, err := e.s.DecisionControls(e.ctx, []string{"att-3", "att-1"})
	must(t, "DecisionControls", err)
	if !reflect.DeepEqual(controls, map[string]string{"att-3": "CTL-1"}) {
		t.Errorf("DecisionControls = %v, want att-3: CTL-1 only", controls)
	}
}

// testTouchOrdersTrailAttestations: a transaction that touched a trail holds every other that
// touches it until it ends. The evaluator touches a trail before inserting its attestations, so
// a trail's attestations are numbered in the order they commit, and a reader that has read a
// trail up to a position never sees a smaller one appear later (the facts it keeps between
// evaluations rely on that; ARCHITECTURE.md, "Batching on the hot path").
func testTouchOrdersTrailAttestations(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := e.flow(t, "org-a", "flow-1", "app")
	tr := e.trail(t, f, "trail-1", "t1", t0)
	apply := func(a store.Attestation, inserted func()) error {
		return e.s.Update(e.ctx, func(tx store.Tx) error {
			if err := tx.TouchTrails(e.ctx, map[string]float64{tr.ID: a.CreatedAt}); err != nil {
				return err
			}
			if err := tx.InsertAttestations(e.ctx, []store.Attestation{a}); err != nil {
				return err
			}
			inserted()
			return nil
		})
	}

	held, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- apply(newAttestation(tr, "att-1", "tests", t0+1), func() { close(held); <-release })
	}()
	select {
	case <-held:
	case err := <-first:
		t.Fatalf("first transaction: %v", err)
	}
	second := make(chan error, 1)
	go func() { second <- apply(newAttestation(tr, "att-2", "scan", t0+2), func() {}) }()
	select {
	case err := <-second:
		close(release)
		t.Fatalf("a second transaction on the trail committed (err %v) while the first still held it", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	must(t, "first transaction", <-first)
	must(t, "second transaction", <-second)

	facts, last, err := e.s.TrailAttestationFactsAfter(e.ctx, map[string]int64{tr.ID: 0})
	must(t, "TrailAttestationFactsAfter", err)
	var ids []string
	for _, a := range facts[tr.ID] {
		ids = append(ids, a.ID)
	}
	if !reflect.DeepEqual(ids, []string{"att-1", "att-2"}) || last[tr.ID] == 0 {
		t.Errorf("facts in position order = %v (last %v), want att-1 then att-2", ids, last)
	}
}
