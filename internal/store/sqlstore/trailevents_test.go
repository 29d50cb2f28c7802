package sqlstore

import (
	"encoding/json"
	"testing"
)

// TestAttestationEventEncoding: the event built from an attestation's row is, byte for byte,
// the document that earlier builds stored for it (a map, encoded with sorted keys), in every
// shape: trail or artifact attestation, override with and without a reason, text that JSON
// escapes.
func TestAttestationEventEncoding(t *testing.T) {
	base := attestationEventRow{id: "a-1", name: "unit-tests", typ: "junit", isCompliant: true, reportedBy: "ci <bot>",
		createdAt: 1764100000.123456}
	for _, c := range []struct {
		name string
		edit func(*attestationEventRow)
	}{
		{"trail", func(*attestationEventRow) {}},
		{"not compliant", func(a *attestationEventRow) { a.isCompliant = false }},
		{"artifact by fingerprint", func(a *attestationEventRow) { a.fingerprint = "abc123" }},
		{"artifact by template name", func(a *attestationEventRow) { a.targetArtifact = "backend" }},
		{"both", func(a *attestationEventRow) { a.fingerprint, a.targetArtifact = "abc123", "backend" }},
		{"override", func(a *attestationEventRow) { a.overridesID, a.overrideReason = "a-0", "flaky" }},
		{"override without a reason", func(a *attestationEventRow) { a.overridesID = "a-0" }},
		{"escaped text", func(a *attestationEventRow) { a.name, a.typ = `<b>"x" & y</b>`, "custom:é\u2028" }},
		{"empty", func(a *attestationEventRow) { *a = attestationEventRow{} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := base
			c.edit(&a)
			got, err := attestationEventDoc(a)
			if err != nil {
				t.Fatal(err)
			}
			if want := attestationEventAsMap(t, a); string(got) != string(want) {
				t.Errorf("event %s\nwant  %s", got, want)
			}
		})
	}
}

// attestationEventAsMap encodes the event as the map that builds before derived events stored.
func attestationEventAsMap(t *testing.T, a attestationEventRow) []byte {
	typ := "trail_attestation_reported"
	if a.fingerprint != "" || a.targetArtifact != "" {
		typ = "artifact_attestation_reported"
	}
	ev := map[string]any{"type": typ, "timestamp": a.createdAt, "user": a.reportedBy, "attestation_id": a.id,
		"attestation_name": a.name, "attestation_type": a.typ, "is_compliant": a.isCompliant}
	if a.fingerprint != "" {
		ev["artifact_fingerprint"] = a.fingerprint
	}
	if a.targetArtifact != "" {
		ev["template_reference_name"] = a.targetArtifact
	}
	if a.overridesID != "" {
		ev["type"] = "attestation_overridden"
		ev["overridden_attestation_id"] = a.overridesID
		ev["reason"] = a.overrideReason
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
