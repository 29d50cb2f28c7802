package evaluate

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// TestAuditRecords: the audit record a message carries is written with the evidence, once
// however often the message is delivered, and as rejected when the message cannot apply.
func TestAuditRecords(t *testing.T) {
	f := newFixture(t) // its flow and trail messages carry no request: no audit records
	applied := f.env(contract.KindAttestationReported, func(e *contract.Envelope) {
		e.Attestation = &contract.AttestationInput{ID: "att-1", FlowID: "flow-1", TrailName: "t1", Name: "tests",
			Type: "generic", IsCompliant: true, Data: json.RawMessage(`{}`)}
		e.Request = &contract.Request{Operation: "attest_generic", Target: "/attestations/acme/app/trail/t1/generic"}
	})
	f.handle(applied)
	f.handle(applied) // redelivered
	rejected := f.env(contract.KindTrailBegun, func(e *contract.Envelope) {
		e.Trail = &contract.TrailBegin{ID: "x", FlowID: "no-such-flow", Name: "t2"}
		e.Request = &contract.Request{Operation: "beginTrail", Target: "/trails/acme/gone"}
	})
	f.handle(rejected)

	got, total, err := f.st.ListAudit(context.Background(), f.orgID, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.AuditRecord{
		{ID: rejected.UUID, OrgID: f.orgID, KeyID: "k", Actor: "ci", Operation: "beginTrail", Target: "/trails/acme/gone",
			Outcome: store.AuditRejected, At: 1004},
		{ID: applied.UUID, OrgID: f.orgID, KeyID: "k", Actor: "ci", Operation: "attest_generic",
			Target: "/attestations/acme/app/trail/t1/generic", Outcome: store.AuditApplied, At: 1003},
	}
	if total != 2 || !reflect.DeepEqual(got, want) {
		t.Fatalf("audit = %+v (total %d), want %+v", got, total, want)
	}
}
