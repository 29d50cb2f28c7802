package evaluate

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/template"
)

// TestSnapshotCarryMatchesFullRecompute: an evaluator that carries unchanged artifacts over from
// the snapshot it wrote last writes, after every kind of change to what a snapshot shows, the
// same snapshot documents as evaluators that start cold and take every artifact anew. Each step
// changes the running set too, so that every step writes a snapshot.
func TestSnapshotCarryMatchesFullRecompute(t *testing.T) {
	warm, cold := newEnvFixture(t, 4), newEnvFixture(t, 4)
	restart := func() {
		ev, err := New(Config{}, Deps{Store: cold.st, Engine: template.NewEngine(template.EngineOptions{})})
		if err != nil {
			t.Fatal(err)
		}
		cold.ev = ev
	}
	both := func(fill func(*contract.Envelope)) {
		t.Helper()
		warm.handle(t, fill)
		restart()
		cold.handle(t, fill)
	}
	evaluate := func(trail string) {
		t.Helper()
		warm.evaluateTrail(t, trail)
		cold.evaluateTrail(t, trail)
	}
	round := 0
	report := func(what string, instances ...int) {
		t.Helper()
		round++
		insts := []contract.RunningInstance{}
		for i, fpIndex := range []int{0, 1, 2, 3} {
			n := 1
			if i < len(instances) {
				n = instances[i]
			}
			for k := range n {
				insts = append(insts, contract.RunningInstance{Name: fmt.Sprint("app-", i), Fingerprint: fp(fpIndex), CreationTimestamp: float64(k + 1)})
			}
		}
		// A fifth artifact comes and goes, so that every round changes the running set.
		if round%2 == 1 {
			insts = append(insts, contract.RunningInstance{Name: "extra", Fingerprint: fp(9), CreationTimestamp: 1})
		}
		both(func(e *contract.Envelope) {
			e.Kind, e.Snapshot = contract.KindSnapshotReported, &contract.SnapshotReport{EnvID: "env-1", Type: "K8S", Instances: insts}
		})
		w, err := warm.st.LatestSnapshot(context.Background(), "env-1")
		if err != nil {
			t.Fatal(err)
		}
		c, err := cold.st.LatestSnapshot(context.Background(), "env-1")
		if err != nil {
			t.Fatal(err)
		}
		if w.Index != round || c.Index != round {
			t.Fatalf("%s: snapshots %d and %d, want %d", what, w.Index, c.Index, round)
		}
		if string(w.Artifacts) != string(c.Artifacts) {
			t.Errorf("%s: the carried snapshot differs from the one taken anew:\n%s\n%s", what, w.Artifacts, c.Artifacts)
		}
		if show(w.Compliant) != show(c.Compliant) {
			t.Errorf("%s: the carried snapshot's compliant is %s, taken anew %s", what, show(w.Compliant), show(c.Compliant))
		}
		events := func(f *envFixture) string {
			evs, _, err := f.st.EnvEvents(context.Background(), "env-1", store.EventFilter{FromIndex: round, ToIndex: round, Page: store.Page{Page: 1, PerPage: 100}})
			if err != nil {
				t.Fatal(err)
			}
			out := ""
			for _, ev := range evs {
				out += fmt.Sprintf("%s %s %s %v %s\n", ev.Type, ev.ArtifactName, ev.Fingerprint, ev.RepoNames, ev.Doc)
			}
			return out
		}
		if we, ce := events(warm), events(cold); we != ce || we == "" {
			t.Errorf("%s: the carried snapshot's events differ from those taken anew:\n%s\n%s", what, we, ce)
		}
		if _, ok := warm.ev.policies.latest.get("env-1", w.Index, w.Digest); !ok && w.Digest != nil {
			t.Errorf("%s: the evaluator does not hold the snapshot it wrote", what)
		}
	}
	evaluate("t1")
	report("first")
	report("nothing changed but the extra artifact")

	both(func(e *contract.Envelope) {
		e.Kind, e.Attestation = contract.KindAttestationReported, &contract.AttestationInput{ID: e.ID, FlowID: "flow-1",
			TrailName: "t1", Name: "unit", Type: "junit", IsCompliant: false, ArtifactFingerprint: fp(1), Data: json.RawMessage(`{}`)}
	})
	report("an attestation applied, its trail not evaluated yet")
	evaluate("t1")
	report("the trail evaluated")

	both(func(e *contract.Envelope) {
		e.Kind, e.Flow = contract.KindFlowUpserted, &contract.FlowUpsert{ID: "flow-2", Name: "other", Template: "", TemplateID: ""}
	})
	both(func(e *contract.Envelope) {
		e.Kind, e.Artifact = contract.KindArtifactReported, &contract.ArtifactReport{ID: "art-x", FlowID: "flow-2",
			TrailName: "t2", Fingerprint: fp(2), Report: json.RawMessage(`{"filename": "y", "commit_url": "https://example.com/c"}`)}
	})
	report("the artifact reported in another flow, its trail not evaluated yet")

	both(func(e *contract.Envelope) {
		e.Kind, e.FlowRename = contract.KindFlowRenamed, &contract.FlowRename{FlowID: "flow-2", NewName: "renamed"}
	})
	report("a flow renamed")

	both(func(e *contract.Envelope) {
		e.Kind, e.Allow = contract.KindAllowlisted, &contract.AllowlistEntry{ID: "al-1", EnvID: "env-1", Fingerprint: fp(3)}
	})
	report("an artifact allowlisted")

	report("instances scaled", 3, 1, 2)

	warm.policy(t, "tests", "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  trail-compliance:\n    required: true\n")
	cold.policy(t, "tests", "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  trail-compliance:\n    required: true\n")
	both(func(e *contract.Envelope) {
		e.Kind, e.Attach = contract.KindPolicyAttachment, &contract.PolicyAttachment{EnvID: "env-1", Names: []string{"tests"}}
	})
	report("a policy attached")

	both(func(e *contract.Envelope) {
		e.Kind, e.Attestation = contract.KindAttestationReported, &contract.AttestationInput{ID: e.ID, FlowID: "flow-1",
			TrailName: "t1", Name: "unit", Type: "junit", IsCompliant: true, ArtifactFingerprint: fp(1), Data: json.RawMessage(`{}`)}
	})
	evaluate("t1")
	report("the trail compliant again, under the policy")

	warm.policy(t, "tests", "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  provenance:\n    required: true\n")
	cold.policy(t, "tests", "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  provenance:\n    required: true\n")
	report("a new version of the policy")

	name := "production"
	both(func(e *contract.Envelope) {
		e.Kind, e.EnvChange = contract.KindEnvironmentChanged, &contract.EnvironmentChange{EnvID: "env-1", NewName: &name}
	})
	report("the environment renamed, which policies see")

	both(func(e *contract.Envelope) {
		e.Kind, e.FlowArchive = contract.KindFlowArchived, &contract.FlowRef{FlowID: "flow-2"}
	})
	report("a flow archived")

	both(func(e *contract.Envelope) {
		e.Kind, e.Attach = contract.KindPolicyAttachment, &contract.PolicyAttachment{EnvID: "env-1", Names: []string{"tests"}, Detach: true}
	})
	report("the policy detached")
}

func show(b *bool) string {
	if b == nil {
		return "null"
	}
	return fmt.Sprint(*b)
}

// TestSnapshotAfterAnotherEvaluator: an evaluator whose latest snapshot of an environment is no
// longer the store's (another evaluator wrote one since, as when partitions move in the
// distributed mode) diffs against the store's.
func TestSnapshotAfterAnotherEvaluator(t *testing.T) {
	f := newEnvFixture(t, 3)
	other, err := New(Config{}, Deps{Store: f.st, Engine: template.NewEngine(template.EngineOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	run := func(fps ...int) func(*contract.Envelope) {
		return func(e *contract.Envelope) {
			insts := make([]contract.RunningInstance, len(fps))
			for i, n := range fps {
				insts[i] = contract.RunningInstance{Name: fmt.Sprint("app-", n), Fingerprint: fp(n), CreationTimestamp: 1}
			}
			e.Kind, e.Snapshot = contract.KindSnapshotReported, &contract.SnapshotReport{EnvID: "env-1", Type: "K8S", Instances: insts}
		}
	}
	f.handle(t, run(0))
	f.handle(t, run(1))
	mine := f.ev
	f.ev = other
	f.handle(t, run(2))
	f.ev = mine
	f.handle(t, run(2, 0))
	evs, _, err := f.st.EnvEvents(context.Background(), "env-1", store.EventFilter{FromIndex: 4, ToIndex: 4, Page: store.Page{Page: 1, PerPage: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != "started" || evs[0].ArtifactName != "app-0" {
		t.Errorf("snapshot 4 after another evaluator's snapshot 3: events %+v, want app-0 started alone", evs)
	}
}
