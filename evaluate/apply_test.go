package evaluate

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore/sqlitetest"
)

// TestLastModifiedFollowsAttestations: a trail's last_modified_at is the time of its latest
// attestation once the attestations are evaluated, on both stores, whether they came one by one
// or in a batch, and a late message with an older time does not take it back. On SQLite the
// applies leave it to the save (applier.lockTrails), which this fails without.
func TestLastModifiedFollowsAttestations(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"sqlite", func(t *testing.T) store.Store { return sqlitetest.Open(t) }},
		{"postgres", func(t *testing.T) store.Store { st, _, _ := openPostgres(t); return st }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixtureOn(t, c.open(t), Config{}, nil)
			begun := f.trail().LastModifiedAt
			f.handle(f.attestation("tests", true))
			f.evaluateAll()
			if got, want := f.trail().LastModifiedAt, begun+1; got != want {
				t.Fatalf("last_modified_at %v after one attestation, want its time %v", got, want)
			}
			batch := []*message.Message{f.attestation("lint", true), f.attestation("sbom", true)}
			if done, err := f.ev.HandleBatch(context.Background(), batch); err != nil || done != len(batch) {
				t.Fatalf("HandleBatch = %d, %v", done, err)
			}
			f.evaluateAll()
			latest := begun + 3
			if got := f.trail().LastModifiedAt; got != latest {
				t.Fatalf("last_modified_at %v after a batch, want its last attestation's time %v", got, latest)
			}
			late := f.env(contract.KindAttestationReported, func(e *contract.Envelope) {
				e.At = begun - 100 // an ingest process whose clock is behind
				e.Attestation = &contract.AttestationInput{ID: "att-late", FlowID: "flow-1", TrailName: "t1", Name: "tests",
					Type: "generic", IsCompliant: true, Data: json.RawMessage(`{}`)}
			})
			f.handle(late)
			f.evaluateAll()
			if got := f.trail().LastModifiedAt; got != latest {
				t.Fatalf("last_modified_at %v after a late message, want %v kept", got, latest)
			}
		})
	}
}
