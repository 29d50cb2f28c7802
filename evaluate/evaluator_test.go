package evaluate

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore/sqlitetest"
	"github.com/veritrail/veritrail/policies/template"
)

const tmplYAML = "version: 1\ntrail:\n  attestations:\n  - name: tests\n    type: generic\n"

type fixture struct {
	t     *testing.T
	st    store.Store
	ev    *Evaluator
	orgID string
	seq   int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, sqlitetest.Open(t), Config{}, nil)
}

// newFixtureOn is newFixture on st, with an evaluator configured by cfg that logs to log (nil:
// the default logger).
func newFixtureOn(t *testing.T, st store.Store, cfg Config, log *slog.Logger) *fixture {
	t.Helper()
	ev, err := New(cfg, Deps{Store: st, Engine: template.NewEngine(template.EngineOptions{}), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st, ev: ev, orgID: "org-1"}
	tmpl, err := template.Parse([]byte(tmplYAML))
	if err != nil {
		t.Fatal(err)
	}
	f.handle(f.env(contract.KindFlowUpserted, func(e *contract.Envelope) {
		e.Flow = &contract.FlowUpsert{ID: "flow-1", Name: "app", Visibility: "private", Template: tmpl.Content, TemplateID: tmpl.ID}
	}))
	f.handle(f.env(contract.KindTrailBegun, func(e *contract.Envelope) {
		e.Trail = &contract.TrailBegin{ID: "trail-1", FlowID: "flow-1", Name: "t1"}
	}))
	return f
}

func (f *fixture) env(kind contract.Kind, fill func(*contract.Envelope)) *message.Message {
	f.seq++
	e := &contract.Envelope{ID: "msg-" + string(rune('a'+f.seq)), Kind: kind, OrgID: f.orgID,
		Actor: contract.Actor{KeyID: "k", Name: "ci"}, At: float64(1000 + f.seq)}
	fill(e)
	b, err := contract.Marshal(e)
	if err != nil {
		f.t.Fatal(err)
	}
	return message.NewMessage(e.ID, b)
}

func (f *fixture) handle(m *message.Message) {
	f.t.Helper()
	if err := f.ev.Handle(m); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) attestation(name string, compliant bool) *message.Message {
	return f.env(contract.KindAttestationReported, func(e *contract.Envelope) {
		e.Attestation = &contract.AttestationInput{ID: "att-" + e.ID, FlowID: "flow-1", TrailName: "t1", Name: name,
			Type: "generic", IsCompliant: compliant, Data: json.RawMessage(`{}`)}
	})
}

// evaluateAll runs the evaluation loop until every dirty trail is clean.
func (f *fixture) evaluateAll() {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.ev.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		dirty, err := f.st.DirtyTrails(context.Background())
		if err != nil {
			f.t.Fatal(err)
		}
		if len(dirty) == 0 {
			break
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("trails still dirty: %v", dirty)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) trail() store.Trail {
	f.t.Helper()
	tr, err := f.st.TrailByID(context.Background(), "trail-1")
	if err != nil {
		f.t.Fatal(err)
	}
	return tr
}

// TestRedeliveryChangesNothing: the same message handled twice leaves one attestation and one event.
func TestRedeliveryChangesNothing(t *testing.T) {
	f := newFixture(t)
	m := f.attestation("tests", true)
	f.handle(m)
	f.handle(m.Copy())
	atts, err := f.st.TrailAttestations(context.Background(), "trail-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 1 {
		t.Fatalf("%d attestations after redelivery, want 1", len(atts))
	}
	events, err := f.st.TrailEvents(context.Background(), "trail-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 { // trail_reported + one attestation
		t.Fatalf("%d trail events after redelivery, want 2", len(events))
	}
}

// TestEvaluatesOncePerBurst: messages applied before the loop runs are evaluated together, and
// the result reflects all of them.
func TestEvaluatesOncePerBurst(t *testing.T) {
	f := newFixture(t)
	f.handle(f.attestation("tests", true))
	f.handle(f.attestation("lint", false))
	f.evaluateAll()
	tr := f.trail()
	if tr.State != "NON-COMPLIANT" {
		t.Fatalf("state %s, want NON-COMPLIANT", tr.State)
	}
	var c Compliance
	if err := json.Unmarshal(tr.Compliance, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.AttestationsStatuses) != 2 || !c.AttestationsStatuses[1].Unexpected {
		t.Fatalf("statuses: %+v", c.AttestationsStatuses)
	}
	// newFixture's trail_begun and both attestations were applied before the loop ran.
	if n := f.ev.Evaluations(); n != 1 {
		t.Fatalf("trail evaluated %d times for one burst, want 1", n)
	}
}

// TestOverrideAndReattestation: an override replaces compliance; a later attestation wins again.
func TestOverrideAndReattestation(t *testing.T) {
	f := newFixture(t)
	orig := f.attestation("tests", false)
	f.handle(orig)
	f.evaluateAll()
	if s := f.trail().State; s != "NON-COMPLIANT" {
		t.Fatalf("state %s", s)
	}
	origID := "att-" + orig.UUID
	f.handle(f.env(contract.KindAttestationReported, func(e *contract.Envelope) {
		e.Attestation = &contract.AttestationInput{ID: "ovr", FlowID: "flow-1", TrailName: "t1", Name: "tests", Type: "generic",
			IsCompliant: true, Overrides: &contract.Override{AttestationID: origID, Reason: "flaky"}, Data: json.RawMessage(`{}`)}
	}))
	f.evaluateAll()
	tr := f.trail()
	var c Compliance
	if err := json.Unmarshal(tr.Compliance, &c); err != nil {
		t.Fatal(err)
	}
	st := c.AttestationsStatuses[0]
	if tr.State != "COMPLIANT" || st.OverriddenAttestationID == nil || *st.OverriddenAttestationID != origID || *st.AttestationID != "ovr" {
		t.Fatalf("after override: %s %+v", tr.State, st)
	}
	f.handle(f.attestation("tests", false))
	f.evaluateAll()
	if s := f.trail().State; s != "NON-COMPLIANT" {
		t.Fatalf("a later attestation should win over the override: %s", s)
	}
}

// TestPermanentFailureIsAcknowledged: a message for a flow that no longer exists is
// acknowledged (nil error) and recorded as applied, so it neither blocks the partition nor
// leaves a read-your-writes waiter hanging.
func TestPermanentFailureIsAcknowledged(t *testing.T) {
	f := newFixture(t)
	m := f.env(contract.KindTrailBegun, func(e *contract.Envelope) {
		e.Trail = &contract.TrailBegin{ID: "x", FlowID: "no-such-flow", Name: "t2"}
	})
	if err := f.ev.Handle(m); err != nil {
		t.Fatalf("permanent failure returned %v, want nil (ack)", err)
	}
	var id string
	env, _ := contract.Unmarshal(m.Payload)
	id = env.ID
	ok, err := f.st.Visible(context.Background(), []string{id})
	if err != nil || !ok {
		t.Fatalf("failed message not marked applied: %v %v", ok, err)
	}
}

// TestDirtySurvivesRestart: a trail applied but not evaluated before a crash is evaluated by
// the next evaluator's Run.
func TestDirtySurvivesRestart(t *testing.T) {
	f := newFixture(t)
	f.handle(f.attestation("tests", true))
	fresh, err := New(Config{}, Deps{Store: f.st, Engine: template.NewEngine(template.EngineOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	f.ev = fresh // the first evaluator "crashed" with the trail dirty
	f.evaluateAll()
	if s := f.trail().State; s != "COMPLIANT" {
		t.Fatalf("state after restart %s, want COMPLIANT", s)
	}
}

// TestHandleBatch: a batch is applied in order, duplicates and redeliveries change nothing, a
// message that can never apply is set aside without holding back the others, the trail is
// evaluated once for the batch, and a store failure reports nothing done.
func TestHandleBatch(t *testing.T) {
	f := newFixture(t)
	first := f.attestation("tests", true)
	bad := f.env(contract.KindTrailBegun, func(e *contract.Envelope) {
		e.Trail = &contract.TrailBegin{ID: "x", FlowID: "no-such-flow", Name: "t2"}
	})
	batch := []*message.Message{first, f.attestation("lint", true), bad, f.attestation("sbom", false), first.Copy()}
	ctx := context.Background()
	for range 2 { // the second time is a redelivery of the whole batch
		done, err := f.ev.HandleBatch(ctx, batch)
		if err != nil || done != len(batch) {
			t.Fatalf("HandleBatch = %d, %v; want %d, nil", done, err, len(batch))
		}
	}
	atts, err := f.st.TrailAttestations(ctx, "trail-1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range atts {
		names = append(names, a.Name)
	}
	if want := []string{"tests", "lint", "sbom"}; !slices.Equal(names, want) {
		t.Fatalf("attestations %v, want %v", names, want)
	}
	if ok, err := f.st.Visible(ctx, []string{bad.UUID}); err != nil || !ok {
		t.Fatalf("the message that cannot apply is not marked applied: %v %v", ok, err)
	}
	f.evaluateAll()
	if s := f.trail().State; s != "NON-COMPLIANT" {
		t.Fatalf("state %s, want NON-COMPLIANT (sbom is not compliant)", s)
	}
	if n := f.ev.Evaluations(); n != 1 {
		t.Fatalf("trail evaluated %d times for one batch, want 1", n)
	}

	f.st.Close()
	if done, err := f.ev.HandleBatch(ctx, []*message.Message{f.attestation("a", true), f.attestation("b", true)}); err == nil || done != 0 {
		t.Fatalf("HandleBatch on a closed store = %d, %v; want 0 and an error", done, err)
	}
}

// TestEvaluatesDirtLeftByAnother: an evaluator that died between applying and evaluating leaves
// its trails dirty in the store, and a running evaluator, which applied none of it, evaluates
// them once they have been dirty for StaleDirtAfter.
func TestEvaluatesDirtLeftByAnother(t *testing.T) {
	st := sqlitetest.Open(t)
	running := newFixtureOn(t, st, Config{StaleDirtAfter: 10 * time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- running.ev.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// The one that dies: applies an attestation (the trail is dirtied in the store) and never evaluates.
	dead, err := New(Config{}, Deps{Store: st, Engine: template.NewEngine(template.EngineOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	running.seq = 100 // message IDs of its own
	if err := dead.Handle(running.attestation("tests", false)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for running.trail().State != "NON-COMPLIANT" {
		if time.Now().After(deadline) {
			t.Fatalf("the trail left dirty was not evaluated: state %q", running.trail().State)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStaleEvaluationDoesNotOverwrite: an evaluation that read a trail before another process
// applied and evaluated newer evidence must not save over that newer result when it finishes
// last (two evaluators after a partition handover, or the sweep of stale dirt): the trail would
// be left clean with a compliance that leaves out stored attestations.
func TestStaleEvaluationDoesNotOverwrite(t *testing.T) {
	ctx := context.Background()
	st := sqlitetest.Open(t)
	slow := newFixtureOn(t, st, Config{}, nil)
	stale, errs := slow.ev.evaluateMany(ctx, []string{"trail-1"}, nil)
	if len(errs) > 0 || len(stale) != 1 {
		t.Fatalf("evaluate: %v %v", stale, errs)
	}
	other, err := New(Config{}, Deps{Store: st, Engine: template.NewEngine(template.EngineOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	slow.seq = 100
	if err := other.Handle(slow.attestation("tests", false)); err != nil {
		t.Fatal(err)
	}
	if err := other.EvaluateTrail(ctx, "trail-1"); err != nil {
		t.Fatal(err)
	}
	if got := slow.trail().State; got != "NON-COMPLIANT" {
		t.Fatalf("after the other evaluation: %q", got)
	}
	if _, _, err := slow.ev.save(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if got := slow.trail().State; got != "NON-COMPLIANT" {
		t.Errorf("a stale evaluation saved last: state %q, want NON-COMPLIANT", got)
	}
}
