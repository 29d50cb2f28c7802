package evaluate

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/policies/template"
)

// TestPostgresBatchesTouchTrailsInOneOrder: a batch whose attestations come in several runs
// (other messages between them) locks every trail it adds to first, in ID order. Locked run by
// run, two evaluators applying overlapping batches during a handover took the same trails in
// different orders and deadlocked (the fault harness saw "touch trails: deadlock detected").
// Two evaluators here apply batches of three runs over a few trails in random orders; a
// deadlock shows as a batch applied again one message at a time, which the evaluator logs.
func TestPostgresBatchesTouchTrailsInOneOrder(t *testing.T) {
	st, _, _ := openPostgres(t)
	ctx := context.Background()
	logs := &logRecords{}
	var evs [2]*Evaluator
	for i := range evs {
		ev, err := New(Config{}, Deps{Store: st, Engine: template.NewEngine(template.EngineOptions{}), Log: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		evs[i] = ev
	}
	msg := func(fill func(*contract.Envelope)) *message.Message {
		e := &contract.Envelope{ID: uuid.NewString(), OrgID: "org-1", Actor: contract.Actor{KeyID: "k", Name: "ci"}, At: 1000}
		fill(e)
		b, err := contract.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return message.NewMessage(e.ID, b)
	}
	begin := func(flow, name string) *message.Message {
		return msg(func(e *contract.Envelope) {
			e.Kind, e.Trail = contract.KindTrailBegun, &contract.TrailBegin{ID: uuid.NewString(), FlowID: flow, Name: name}
		})
	}
	attest := func(trail string) *message.Message {
		return msg(func(e *contract.Envelope) {
			e.Kind, e.Attestation = contract.KindAttestationReported, &contract.AttestationInput{ID: uuid.NewString(),
				FlowID: "flow-1", TrailName: trail, Name: "tests", Type: "generic", IsCompliant: true}
		})
	}
	tmpl, err := template.Parse([]byte(tmplYAML))
	if err != nil {
		t.Fatal(err)
	}
	setup := []*message.Message{msg(func(e *contract.Envelope) {
		e.Kind, e.Flow = contract.KindFlowUpserted, &contract.FlowUpsert{ID: "flow-1", Name: "app", Visibility: "private",
			Template: tmpl.Content, TemplateID: tmpl.ID}
	})}
	const trails = 6
	for i := range trails {
		setup = append(setup, begin("flow-1", fmt.Sprint("t", i)))
	}
	if n, err := evs[0].HandleBatch(ctx, setup); err != nil || n != len(setup) {
		t.Fatalf("setup: %d, %v", n, err)
	}
	var wg sync.WaitGroup
	for w, ev := range evs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for i := range 60 {
				var batch []*message.Message
				for run, tr := range rng.Perm(trails)[:3] { // three runs, each to one trail, in a random order
					if run > 0 {
						batch = append(batch, begin("flow-1", fmt.Sprintf("w%d-%d-%d", w, i, run)))
					}
					batch = append(batch, attest(fmt.Sprint("t", tr)))
				}
				if n, err := ev.HandleBatch(ctx, batch); err != nil || n != len(batch) {
					t.Errorf("evaluator %d, batch %d: %d applied, %v", w, i, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, r := range logs.recs {
		var text strings.Builder
		text.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { text.WriteString(" " + a.String()); return true })
		if strings.Contains(text.String(), "deadlock") {
			t.Errorf("a batch deadlocked: %s", text.String())
		}
	}
}
