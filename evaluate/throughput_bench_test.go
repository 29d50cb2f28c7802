package evaluate

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/evaluate/store/sqlstore"
	"github.com/veritrail/veritrail/ingest/contract"
	"github.com/veritrail/veritrail/policies/template"
)

// BenchmarkEvaluatorThroughput is the evaluator's whole job per attestation on SQLite, as
// `veritrail bench` loads it: batches of 64 messages spread over 1,000 trails, each batch applied
// (HandleBatch, audit records included) and its trails evaluated and saved (evaluateAll). ns/op
// is per message. Message and attestation IDs are time-ordered UUIDs as ingest makes them
// (ids=v7), or random ones (ids=v4) to show what their order is worth; trail IDs are random, as
// trails begun over days are to the attestations of one moment; the data is about 1 KB, as the
// bench sends it.
//
//	go test -run x -bench EvaluatorThroughput -cpuprofile cpu.pprof ./evaluate
func BenchmarkEvaluatorThroughput(b *testing.B) {
	v7 := func() string { return uuid.Must(uuid.NewV7()).String() }
	for _, ids := range []struct {
		name string
		new  func() string
	}{{"v7", v7}, {"v4", uuid.NewString}} {
		b.Run("ids="+ids.name, func(b *testing.B) { benchmarkEvaluatorThroughput(b, ids.new) })
	}
}

func benchmarkEvaluatorThroughput(b *testing.B, newID func() string) {
	const trails, batchSize = 1000, 64
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ev, err := New(Config{}, Deps{Store: st, Engine: template.NewEngine(template.EngineOptions{})})
	if err != nil {
		b.Fatal(err)
	}
	tmpl, err := template.Parse([]byte("version: 1\ntrail:\n  attestations:\n  - name: smoke\n    type: generic\n"))
	if err != nil {
		b.Fatal(err)
	}
	msg := func(e *contract.Envelope) *message.Message {
		e.OrgID, e.Actor = "org-1", contract.Actor{KeyID: "k", Name: "ci"}
		p, err := contract.Marshal(e)
		if err != nil {
			b.Fatal(err)
		}
		return message.NewMessage(e.ID, p)
	}
	apply := func(msgs []*message.Message) {
		if n, err := ev.HandleBatch(ctx, msgs); err != nil || n != len(msgs) {
			b.Fatalf("HandleBatch = %d, %v", n, err)
		}
		ev.mu.Lock()
		ids := make([]string, 0, len(ev.dirty))
		for id := range ev.dirty {
			ids = append(ids, id)
		}
		clear(ev.dirty)
		ev.mu.Unlock()
		ev.evaluateAll(ctx, ids)
	}
	setup := []*message.Message{msg(&contract.Envelope{ID: "flow", Kind: contract.KindFlowUpserted,
		Flow: &contract.FlowUpsert{ID: "flow-1", Name: "app", Visibility: "private", Template: tmpl.Content, TemplateID: tmpl.ID}})}
	for i := range trails {
		setup = append(setup, msg(&contract.Envelope{ID: newID(), Kind: contract.KindTrailBegun,
			Trail: &contract.TrailBegin{ID: uuid.NewString(), FlowID: "flow-1", Name: fmt.Sprint("trail-", i)}}))
	}
	for len(setup) > 0 {
		n := min(len(setup), batchSize)
		apply(setup[:n])
		setup = setup[n:]
	}
	data := json.RawMessage(`{"origin_url": "https://ci.example/run", "user_data": {"pad": "` + strings.Repeat("x", 900) + `"}}`)
	batch := make([]*message.Message, 0, batchSize)
	b.ResetTimer()
	for i := range b.N {
		batch = append(batch, msg(&contract.Envelope{ID: newID(), Kind: contract.KindAttestationReported, At: float64(i),
			Request: &contract.Request{Operation: "attest_generic", Target: "/attestations/acme/app/trail/t/generic"}, // audited, as ingest sends it
			Attestation: &contract.AttestationInput{ID: newID(), FlowID: "flow-1", TrailName: fmt.Sprint("trail-", i%trails),
				Name: "smoke", Type: "generic", IsCompliant: true, Data: data}}))
		if len(batch) == batchSize || i == b.N-1 {
			apply(batch)
			batch = batch[:0]
		}
	}
}
