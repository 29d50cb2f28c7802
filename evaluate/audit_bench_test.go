package evaluate

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store/sqlstore/sqlitetest"
	"github.com/veritrail/veritrail/policies/template"
)

// BenchmarkHandleAttestation applies attestation messages on SQLite, with and without the
// audit record they carry: the cost of writing the audit log with the evidence. Compare the
// two in one run (the machines here are noisy): go test -run x -bench HandleAttestation ./evaluate
func BenchmarkHandleAttestation(b *testing.B) {
	for _, audited := range []bool{false, true} {
		b.Run(fmt.Sprintf("audited=%v", audited), func(b *testing.B) {
			st := sqlitetest.Open(b)
			ev, err := New(Config{}, Deps{Store: st, Engine: template.NewEngine(template.EngineOptions{})})
			if err != nil {
				b.Fatal(err)
			}
			handle := func(e *contract.Envelope) {
				e.OrgID, e.Actor = "org-1", contract.Actor{KeyID: "k", Name: "ci"}
				if audited {
					e.Request = &contract.Request{Operation: "attest_generic", Target: "/attestations/acme/app/trail/t1/generic"}
				}
				p, err := contract.Marshal(e)
				if err != nil {
					b.Fatal(err)
				}
				if err := ev.Handle(message.NewMessage(e.ID, p)); err != nil {
					b.Fatal(err)
				}
			}
			handle(&contract.Envelope{ID: "flow", Kind: contract.KindFlowUpserted,
				Flow: &contract.FlowUpsert{ID: "flow-1", Name: "app", Visibility: "private"}})
			handle(&contract.Envelope{ID: "trail", Kind: contract.KindTrailBegun,
				Trail: &contract.TrailBegin{ID: "trail-1", FlowID: "flow-1", Name: "t1"}})
			b.ResetTimer()
			for i := range b.N {
				handle(&contract.Envelope{ID: fmt.Sprint("m-", i), Kind: contract.KindAttestationReported, At: float64(i),
					Attestation: &contract.AttestationInput{ID: fmt.Sprint("a-", i), FlowID: "flow-1", TrailName: "t1",
						Name: "tests", Type: "generic", IsCompliant: true, Data: json.RawMessage(`{}`)}})
			}
		})
	}
}

// BenchmarkEvaluateLongTrail: an attestation applied to a trail that holds many before it, and
// the trail evaluated, on SQLite; each iteration adds one, so the trail holds from before to
// before+b.N. The template input is kept folded between evaluations (foldCache), so an
// evaluation's cost should not follow the trail's length: compare the sub-benchmarks at a fixed
// count.
//
//	go test -run x -bench EvaluateLongTrail -benchtime 2000x ./evaluate
func BenchmarkEvaluateLongTrail(b *testing.B) {
	for _, before := range []int{10, 1000, 5000} {
		b.Run(fmt.Sprintf("before=%d", before), func(b *testing.B) {
			st := sqlitetest.Open(b)
			ev, err := New(Config{}, Deps{Store: st, Engine: template.NewEngine(template.EngineOptions{})})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			handle := func(e *contract.Envelope) {
				e.OrgID, e.Actor = "org-1", contract.Actor{KeyID: "k", Name: "ci"}
				p, err := contract.Marshal(e)
				if err != nil {
					b.Fatal(err)
				}
				if err := ev.Handle(message.NewMessage(e.ID, p)); err != nil {
					b.Fatal(err)
				}
			}
			attest := func(i int) {
				handle(&contract.Envelope{ID: fmt.Sprint("m-", i), Kind: contract.KindAttestationReported, At: float64(i),
					Attestation: &contract.AttestationInput{ID: fmt.Sprint("a-", i), FlowID: "flow-1", TrailName: "t1",
						Name: []string{"pr", "lint", "tests"}[i%3], Type: "generic", IsCompliant: true, Data: json.RawMessage(`{}`)}})
			}
			handle(&contract.Envelope{ID: "flow", Kind: contract.KindFlowUpserted,
				Flow: &contract.FlowUpsert{ID: "flow-1", Name: "app", Visibility: "private"}})
			handle(&contract.Envelope{ID: "trail", Kind: contract.KindTrailBegun,
				Trail: &contract.TrailBegin{ID: "trail-1", FlowID: "flow-1", Name: "t1"}})
			for i := range before {
				attest(i)
			}
			if err := ev.EvaluateTrail(ctx, "trail-1"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				attest(before + i)
				if err := ev.EvaluateTrail(ctx, "trail-1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
