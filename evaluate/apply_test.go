package evaluate

import (
	"encoding/json"
	"testing"

	"github.com/veritrail/veritrail/internal/contract"
)

// TestAttestationEventEncoding: the trail event of an attestation is the document the map it
// was built as encoded to, byte for byte, in every shape (trail or artifact attestation,
// override with and without a reason, text that JSON escapes).
func TestAttestationEventEncoding(t *testing.T) {
	asMap := func(e *contract.Envelope) []byte {
		b, err := attestationEventAsMap(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	base := func() *contract.AttestationInput {
		return &contract.AttestationInput{ID: "a-1", FlowID: "f", TrailName: "t", Name: "unit-tests", Type: "junit", IsCompliant: true}
	}
	for _, c := range []struct {
		name string
		edit func(*contract.AttestationInput)
	}{
		{"trail", func(*contract.AttestationInput) {}},
		{"not compliant", func(a *contract.AttestationInput) { a.IsCompliant = false }},
		{"artifact by fingerprint", func(a *contract.AttestationInput) { a.ArtifactFingerprint = "abc123" }},
		{"artifact by template name", func(a *contract.AttestationInput) { a.TargetArtifact = "backend" }},
		{"both", func(a *contract.AttestationInput) { a.ArtifactFingerprint, a.TargetArtifact = "abc123", "backend" }},
		{"override", func(a *contract.AttestationInput) {
			a.Overrides = &contract.Override{AttestationID: "a-0", Reason: "flaky"}
		}},
		{"override without a reason", func(a *contract.AttestationInput) { a.Overrides = &contract.Override{AttestationID: "a-0"} }},
		{"escaped text", func(a *contract.AttestationInput) { a.Name, a.Type = `<b>"x" & y</b>`, "custom:é\u2028" }},
		{"empty", func(a *contract.AttestationInput) { *a = contract.AttestationInput{} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := base()
			c.edit(a)
			e := &contract.Envelope{ID: "m-1", OrgID: "o", At: 1764100000.123456, Actor: contract.Actor{Name: "ci <bot>"}, Attestation: a}
			_, ev, err := attestationRows(e, "trail-1")
			if err != nil {
				t.Fatal(err)
			}
			if want := asMap(e); string(ev.Doc) != string(want) {
				t.Errorf("event %s\nwant  %s", ev.Doc, want)
			}
		})
	}
}

// attestationEventAsMap encodes the event as the map it used to be, as apply built it.
func attestationEventAsMap(e *contract.Envelope) ([]byte, error) {
	a := e.Attestation
	typ := "trail_attestation_reported"
	if a.ArtifactFingerprint != "" || a.TargetArtifact != "" {
		typ = "artifact_attestation_reported"
	}
	ev := map[string]any{"type": typ, "timestamp": e.At, "user": e.Actor.Name, "attestation_id": a.ID,
		"attestation_name": a.Name, "attestation_type": a.Type, "is_compliant": a.IsCompliant}
	if a.ArtifactFingerprint != "" {
		ev["artifact_fingerprint"] = a.ArtifactFingerprint
	}
	if a.TargetArtifact != "" {
		ev["template_reference_name"] = a.TargetArtifact
	}
	if a.Overrides != nil {
		ev["type"] = "attestation_overridden"
		ev["overridden_attestation_id"] = a.Overrides.AttestationID
		ev["reason"] = a.Overrides.Reason
	}
	return json.Marshal(ev)
}

// BenchmarkAttestationEvent: encoding an attestation's trail event as a struct against as the map it was.
func BenchmarkAttestationEvent(b *testing.B) {
	e := &contract.Envelope{ID: "m-1", OrgID: "o", At: 1764100000.123456, Actor: contract.Actor{Name: "ci"},
		Attestation: &contract.AttestationInput{ID: "019abcde-0000-7000-8000-000000000000", Name: "smoke", Type: "generic", IsCompliant: true}}
	b.Run("struct", func(b *testing.B) {
		for range b.N {
			if _, _, err := attestationRows(e, "trail-1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		for range b.N {
			if _, err := attestationEventAsMap(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
