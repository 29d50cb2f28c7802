package evaluate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore/sqlitetest"
)

// TestEvaluatesInTheBatchTransaction: with EvaluateInApply, a batch's trails are evaluated in its
// own transaction: once HandleBatch returns, with no evaluation loop running, the trail shows
// the batch's evidence, nothing is left dirty, and the messages read as visible.
func TestEvaluatesInTheBatchTransaction(t *testing.T) {
	f := newFixtureOn(t, sqlitetest.Open(t), Config{EvaluateInApply: true}, nil)
	f.evaluateAll() // the trail's beginning, applied alone, left it to the loop
	before := f.ev.Evaluations()
	ctx := context.Background()
	steps := []struct {
		batch []*message.Message
		want  string
	}{
		{[]*message.Message{f.attestation("tests", true), f.attestation("lint", true), f.attestation("sbom", false)}, "NON-COMPLIANT"},
		{[]*message.Message{f.attestation("sbom", true), f.attestation("tests", true)}, "COMPLIANT"},
	}
	for i, step := range steps {
		if done, err := f.ev.HandleBatch(ctx, step.batch); err != nil || done != len(step.batch) {
			t.Fatalf("batch %d: HandleBatch = %d, %v", i, done, err)
		}
		if s := f.trail().State; s != step.want {
			t.Fatalf("batch %d: state %s right after the batch, want %s", i, s, step.want)
		}
		if dirty, err := f.st.DirtyTrails(ctx); err != nil || len(dirty) != 0 {
			t.Fatalf("batch %d: dirty trails %v, %v; want none", i, dirty, err)
		}
		f.ev.mu.Lock()
		left := len(f.ev.dirty)
		f.ev.mu.Unlock()
		if left != 0 {
			t.Fatalf("batch %d: %d trails left to the evaluation loop", i, left)
		}
		var ids []string
		for _, m := range step.batch {
			ids = append(ids, m.UUID)
		}
		if ok, err := f.st.Visible(ctx, ids); err != nil || !ok {
			t.Fatalf("batch %d: messages visible %v, %v", i, ok, err)
		}
		if n := f.ev.Evaluations() - before; n != int64(i+1) {
			t.Fatalf("batch %d: %d evaluations, want one a batch", i, n)
		}
	}
}

// TestBatchRolledBackKeepsNothing: when the batch's transaction fails after its trails were
// evaluated in it, nothing of that evaluation stays: the facts and folds it read are not kept
// (they held attestations that never committed), no evaluation is counted, and the messages,
// applied one at a time after it, are evaluated by the loop as without EvaluateInApply.
func TestBatchRolledBackKeepsNothing(t *testing.T) {
	st := &failingAudits{Store: sqlitetest.Open(t)}
	f := newFixtureOn(t, st, Config{EvaluateInApply: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	batch := []*message.Message{f.attestation("tests", true), f.attestation("lint", true), f.attestation("sbom", false)}
	if done, err := f.ev.HandleBatch(context.Background(), batch); err != nil || done != len(batch) {
		t.Fatalf("HandleBatch = %d, %v", done, err)
	}
	if !st.failed {
		t.Fatal("the batch's transaction did not fail: the test proves nothing")
	}
	f.ev.facts.mu.Lock()
	facts, factsKept := f.ev.facts.kept.Peek("trail-1")
	f.ev.facts.mu.Unlock()
	f.ev.folds.mu.Lock()
	_, foldKept := f.ev.folds.kept.Peek("trail-1")
	f.ev.folds.mu.Unlock()
	if factsKept || foldKept {
		t.Fatalf("kept after the rollback: facts %v (%d), fold %v", factsKept, len(facts.facts), foldKept)
	}
	if n := f.ev.Evaluations(); n != 0 {
		t.Fatalf("%d evaluations counted of a transaction that did not commit", n)
	}
	f.evaluateAll()
	if s := f.trail().State; s != "NON-COMPLIANT" {
		t.Fatalf("state %s, want NON-COMPLIANT", s)
	}
	atts, err := st.TrailAttestations(context.Background(), "trail-1")
	if err != nil || len(atts) != 3 {
		t.Fatalf("%d attestations, %v; want 3", len(atts), err)
	}
}

// failingAudits is a store whose batch transactions fail at their audit records (InsertAudits),
// after everything else of the batch, its trails' evaluation included, is done; a message
// applied alone (InsertAudit) goes through.
type failingAudits struct {
	store.Store
	failed bool
}

func (s *failingAudits) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(failingAuditsTx{Tx: tx, s: s}) })
}

type failingAuditsTx struct {
	store.Tx
	s *failingAudits
}

func (t failingAuditsTx) InsertAudits(context.Context, []store.AuditRecord) error {
	t.s.failed = true
	return errors.New("no space left on device")
}
