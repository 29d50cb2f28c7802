package evaluate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/snapshot"
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
		both(runningIn(insts...))
		w, _ := warm.latest(t, "env-1")
		c, _ := cold.latest(t, "env-1")
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
		index, digest, err := warm.st.LatestSnapshotDigest(context.Background(), "env-1")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := warm.ev.policies.latest.get(nil, "env-1", index, digest); !ok {
			t.Errorf("%s: the evaluator does not hold the snapshot it wrote", what)
		}
	}
	evaluate("t1")
	report("first")
	report("nothing changed but the extra artifact")

	unit := func(compliant bool) func(*contract.Envelope) {
		return func(e *contract.Envelope) {
			e.Kind, e.Attestation = contract.KindAttestationReported, &contract.AttestationInput{ID: e.ID, FlowID: "flow-1",
				TrailName: "t1", Name: "unit", Type: "junit", IsCompliant: compliant, ArtifactFingerprint: fp(1), Data: json.RawMessage(`{}`)}
		}
	}
	both(unit(false))
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

	both(unit(true))
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

// show is a *bool as "true", "false" or "null".
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
	f.handle(t, runningApps(0))
	f.handle(t, runningApps(1))
	mine := f.ev
	f.ev = other
	f.handle(t, runningApps(2))
	f.ev = mine
	f.handle(t, runningApps(2, 0))
	evs, _, err := f.st.EnvEvents(context.Background(), "env-1", store.EventFilter{FromIndex: 4, ToIndex: 4, Page: store.Page{Page: 1, PerPage: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != "started" || evs[0].ArtifactName != "app-0" {
		t.Errorf("snapshot 4 after another evaluator's snapshot 3: events %+v, want app-0 started alone", evs)
	}
}

// TestSnapshotsOfABatch: reports of one environment applied in one transaction start each from
// the one before it; a batch whose transaction rolls back leaves nothing of its snapshots in
// memory, and its messages, applied again one at a time, write what a cold evaluator writes.
func TestSnapshotsOfABatch(t *testing.T) {
	warm, cold := newEnvFixture(t, 4), newEnvFixture(t, 4)
	fails := func(e *contract.Envelope) { // no such trail: the batch's transaction fails
		e.Kind, e.Attestation = contract.KindAttestationReported, &contract.AttestationInput{ID: e.ID, FlowID: "flow-1",
			TrailName: "no-such-trail", Name: "unit", Type: "junit", IsCompliant: true, Data: json.RawMessage(`{}`)}
	}
	batch := func(fills ...func(*contract.Envelope)) {
		t.Helper()
		msgs := make([]*message.Message, len(fills))
		for i, fill := range fills {
			msgs[i] = warm.message(t, fill)
		}
		if n, err := warm.ev.HandleBatch(context.Background(), msgs); err != nil || n != len(msgs) {
			t.Fatalf("HandleBatch = %d, %v", n, err)
		}
		for _, fill := range fills { // the same messages, one at a time, each by a cold evaluator
			ev, err := New(Config{}, Deps{Store: cold.st, Engine: template.NewEngine(template.EngineOptions{})})
			if err != nil {
				t.Fatal(err)
			}
			cold.ev = ev
			_ = ev.Handle(cold.message(t, fill)) // the failing one is set aside
		}
	}
	batch(runningApps(0, 1), runningApps(1, 2), runningApps(1, 2, 3))
	batch(runningApps(2, 3), fails, runningApps(0, 3))
	w, _ := warm.latest(t, "env-1")
	c, _ := cold.latest(t, "env-1")
	if w.Index != 5 || w.Index != c.Index || string(w.Artifacts) != string(c.Artifacts) {
		t.Errorf("after the batches: snapshot %d %s, taken anew %d %s", w.Index, w.Artifacts, c.Index, c.Artifacts)
	}
	index, digest, err := warm.st.LatestSnapshotDigest(context.Background(), "env-1")
	if err != nil {
		t.Fatal(err)
	}
	l := warm.ev.policies.latest
	if _, ok := l.get(nil, "env-1", index, digest); !ok || len(l.staged) != 0 {
		t.Errorf("held: the latest %v, %d transactions still staged", ok, len(l.staged))
	}
}

func TestSameJSON(t *testing.T) {
	ctx := func(pod string, restarts float64) map[string]any {
		return map[string]any{"pod": pod, "restarts": restarts, "ready": true, "labels": map[string]any{"app": "web"},
			"ports": []any{80.0, "http"}, "node": nil}
	}
	for _, tc := range []struct {
		a, b any
		want bool
	}{
		{ctx("web-1", 0), ctx("web-1", 0), true},
		{ctx("web-1", 0), ctx("web-2", 0), false},
		{ctx("web-1", 0), ctx("web-1", 1), false},
		{map[string]any{"a": 1.0}, map[string]any{"b": 1.0}, false},
		{map[string]any{"a": 1.0}, map[string]any{"a": 1.0, "b": 2.0}, false},
		{[]any{1.0, 2.0}, []any{2.0, 1.0}, false},
		{"1", 1.0, false},
		{nil, false, false},
		{nil, nil, true},
		{int64(3), int64(3), true}, // not from JSON: compared deeply
	} {
		if got := sameJSON(tc.a, tc.b); got != tc.want {
			t.Errorf("sameJSON(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// running2 reports app-0 and app-1 (fingerprints 0 and 1) and, when extra names one, a third
// artifact, so that reports with and without it change the running set.
func (f *envFixture) running2(t *testing.T, extra string) {
	t.Helper()
	insts := []contract.RunningInstance{{Name: "app-0", Fingerprint: fp(0), CreationTimestamp: 1}, {Name: "app-1", Fingerprint: fp(1), CreationTimestamp: 1}}
	if extra != "" {
		insts = append(insts, contract.RunningInstance{Name: extra, Fingerprint: fp(9), CreationTimestamp: 1})
	}
	f.running(t, insts...)
}

// saveUnmarked saves trail t1 NON-COMPLIANT, with its artifacts, without marking where they
// run: a change no mark recorded.
func (f *envFixture) saveUnmarked(t *testing.T) {
	t.Helper()
	trail, err := f.st.TrailID(context.Background(), "flow-1", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.Update(context.Background(), func(tx store.Tx) error {
		return tx.SaveCompliance(context.Background(), trail, "NON-COMPLIANT", json.RawMessage(`{}`), 100,
			map[string]string{"art-0": "NON-COMPLIANT", "art-1": "NON-COMPLIANT"})
	}); err != nil {
		t.Fatal(err)
	}
}

// states answers the state of its trail each artifact of env-1's latest snapshot shows.
func (f *envFixture) states(t *testing.T) map[string]string {
	t.Helper()
	_, arts := f.latest(t, "env-1")
	out := map[string]string{}
	for _, a := range arts {
		if len(a.Flows) > 0 {
			out[a.Name] = a.Flows[0].State
		}
	}
	return out
}

// TestSnapshotCarryExpires: a change that no mark recorded (as one written by an evaluator of
// a build before the marks, during a rolling upgrade) shows in the first snapshot taken once the
// held one is older than latestMaxAge.
func TestSnapshotCarryExpires(t *testing.T) {
	f := newEnvFixture(t, 2)
	f.evaluateTrail(t, "t1")
	clock := time.Unix(1_800_000_000, 0)
	f.ev.policies.latest.now = func() time.Time { return clock }
	f.running2(t, "")
	f.running2(t, "other") // after this one, app-0 and app-1 are no longer new
	f.saveUnmarked(t)
	clock = clock.Add(latestMaxAge / 2)
	f.running2(t, "") // app-1 carried over, with the state it had
	if got := f.states(t)["app-1"]; got != "COMPLIANT" {
		t.Fatalf("app-1's state carried over: %s, want the held COMPLIANT", got)
	}
	clock = clock.Add(latestMaxAge)
	f.running2(t, "other")
	if got := f.states(t)["app-1"]; got != "NON-COMPLIANT" {
		t.Errorf("app-1's state once the held snapshot expired: %s, want NON-COMPLIANT", got)
	}
}

// TestStartedArtifactTakenAnewNextTime: a change of a new artifact's evidence that commits
// while the snapshot that starts it runs (another evaluator, on PostgreSQL) finds it in no
// environment's running index, so it marks nothing; the next snapshot takes the artifact anew
// all the same. The change is simulated by a save without marks after that snapshot.
func TestStartedArtifactTakenAnewNextTime(t *testing.T) {
	f := newEnvFixture(t, 2)
	f.evaluateTrail(t, "t1")
	f.running2(t, "") // app-0 and app-1 start
	f.saveUnmarked(t)
	f.running2(t, "extra")
	f.wantBothNonCompliant(t, "started by the snapshot before")
}

// TestStartedInBatchTakenAnewNextTime: the same race when one batch (one transaction) applies
// two reports of the environment, the first starting the artifacts and the second still
// running them. The second snapshot reads and clears the first one's marks, but the change
// beside the transaction still marked nothing here, since the running index holds the started
// artifacts only once the transaction commits; the next transaction's snapshot must take them
// anew all the same.
func TestStartedInBatchTakenAnewNextTime(t *testing.T) {
	f := newEnvFixture(t, 2)
	f.evaluateTrail(t, "t1")
	msgs := []*message.Message{f.message(t, runningApps(0, 1)), f.message(t, runningApps(0, 1, 9))}
	if n, err := f.ev.HandleBatch(context.Background(), msgs); err != nil || n != len(msgs) {
		t.Fatalf("HandleBatch = %d, %v", n, err)
	}
	f.saveUnmarked(t)
	f.running2(t, "")
	f.wantBothNonCompliant(t, "started in the batch before")
}

// wantBothNonCompliant checks that env-1's latest snapshot shows app-0's and app-1's trail
// NON-COMPLIANT; why says what the artifacts went through.
func (f *envFixture) wantBothNonCompliant(t *testing.T, why string) {
	t.Helper()
	states := f.states(t)
	if len(states) != 2 {
		t.Fatalf("states %v, want app-0's and app-1's", states)
	}
	for name, state := range states {
		if state != "NON-COMPLIANT" {
			t.Errorf("%s, %s: %s, want NON-COMPLIANT", name, why, state)
		}
	}
}

func TestStartedStillRunning(t *testing.T) {
	run := func(fps ...string) []snapshot.Running {
		out := make([]snapshot.Running, len(fps))
		for i, fp := range fps {
			out[i] = snapshot.Running{Name: "app-" + fp, Fingerprint: fp}
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		started   []string
		earlier   []string
		annotated []snapshot.Running
		want      []string
	}{
		{"only this snapshot's", []string{"a"}, nil, run("a", "b"), []string{"a"}},
		{"earlier ones still running", nil, []string{"a", "b"}, run("a", "b", "c"), []string{"a", "b"}},
		{"earlier ones stopped since", nil, []string{"a", "b"}, run("b"), []string{"b"}},
		{"started again: once", []string{"a"}, []string{"a", "b"}, run("a", "b"), []string{"a", "b"}},
		{"earlier listed twice: once", nil, []string{"b", "b"}, run("b"), []string{"b"}},
	} {
		started := make([]store.Running, len(tc.started))
		for i, fp := range tc.started {
			started[i] = store.Running{Fingerprint: fp}
		}
		if got := startedStillRunning(started, tc.earlier, tc.annotated); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
