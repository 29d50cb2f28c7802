package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/veritrail/veritrail/internal/store"
)

// A trail's events are the rows of trail_events (its begin and updates, artifact reports,
// environment changes) and one event per attestation, built here from the attestation's row
// rather than stored: an attestation's event says nothing its row does not, and storing it was
// one row and one index entry by trail per attestation, most of the pages an evaluator
// transaction wrote after the attestation itself (docs/PERFORMANCE.md).
//
// Builds before this one stored attestation events too. Those rows are left where they are and
// skipped when read (the attestation's row gives the same event), so a database they wrote, or
// one they still write to during a rolling upgrade, shows each attestation once.

// attestationEventTypes are the types of the events attestationEvent builds.
var attestationEventTypes = []string{"trail_attestation_reported", "artifact_attestation_reported", "attestation_overridden"}

// attestationEvent is the trail event of an attestation. Its fields are in the order of their
// names, so it encodes as the map that earlier builds stored did (encoding/json sorts a map's
// keys).
type attestationEvent struct {
	ArtifactFingerprint     string  `json:"artifact_fingerprint,omitempty"`
	AttestationID           string  `json:"attestation_id"`
	AttestationName         string  `json:"attestation_name"`
	AttestationType         string  `json:"attestation_type"`
	IsCompliant             bool    `json:"is_compliant"`
	OverriddenAttestationID *string `json:"overridden_attestation_id,omitempty"`
	Reason                  *string `json:"reason,omitempty"`
	TemplateReferenceName   string  `json:"template_reference_name,omitempty"`
	Timestamp               float64 `json:"timestamp"`
	Type                    string  `json:"type"`
	User                    string  `json:"user"`
}

// attestationEventDoc is the event of the attestation a.
func attestationEventDoc(a attestationEventRow) (json.RawMessage, error) {
	ev := attestationEvent{Type: "trail_attestation_reported", Timestamp: a.createdAt, User: a.reportedBy,
		AttestationID: a.id, AttestationName: a.name, AttestationType: a.typ, IsCompliant: a.isCompliant,
		ArtifactFingerprint: a.fingerprint, TemplateReferenceName: a.targetArtifact}
	if a.fingerprint != "" || a.targetArtifact != "" {
		ev.Type = "artifact_attestation_reported"
	}
	if a.overridesID != "" {
		ev.Type = "attestation_overridden"
		ev.OverriddenAttestationID, ev.Reason = &a.overridesID, &a.overrideReason
	}
	doc, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode the event of attestation %s: %w", a.id, err)
	}
	return doc, nil
}

// attestationEventRow is what an attestation's event is built from.
type attestationEventRow struct {
	id, name, typ, fingerprint, targetArtifact, overridesID, overrideReason, reportedBy string
	isCompliant                                                                         bool
	createdAt                                                                           float64
}

// TrailEvents are the trail's events in time order; events of the same time come stored
// events first, then attestations, each in the order they were applied.
func (r reads) TrailEvents(ctx context.Context, trailID string) ([]store.TrailEvent, error) {
	stored, err := r.storedTrailEvents(ctx, trailID)
	if err != nil {
		return nil, err
	}
	rows, err := r.rows(ctx, `SELECT id, name, type, is_compliant, artifact_fingerprint, target_artifact, overrides_id,
		override_reason, reported_by, created_at FROM attestations WHERE trail_id = ? ORDER BY seq`, trailID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: trail events: %w", err)
	}
	defer rows.Close()
	var attested []store.TrailEvent
	for rows.Next() {
		var a attestationEventRow
		var compliant int
		if err := rows.Scan(&a.id, &a.name, &a.typ, &compliant, &a.fingerprint, &a.targetArtifact, &a.overridesID,
			&a.overrideReason, &a.reportedBy, &a.createdAt); err != nil {
			return nil, fmt.Errorf("sqlstore: trail events: %w", err)
		}
		a.isCompliant = compliant != 0
		doc, err := attestationEventDoc(a)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: trail events: %w", err)
		}
		attested = append(attested, store.TrailEvent{TrailID: trailID, Doc: doc, At: a.createdAt})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: trail events: %w", err)
	}
	out := append(stored, attested...)
	slices.SortStableFunc(out, func(a, b store.TrailEvent) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return out, nil
}

// storedTrailEvents are the trail's rows of trail_events in the order they were appended,
// without the attestation events that earlier builds stored.
func (r reads) storedTrailEvents(ctx context.Context, trailID string) ([]store.TrailEvent, error) {
	rows, err := r.rows(ctx, `SELECT doc, created_at FROM trail_events WHERE trail_id = ? ORDER BY seq`, trailID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: trail events: %w", err)
	}
	defer rows.Close()
	var out []store.TrailEvent
	for rows.Next() {
		var doc string
		var at float64
		if err := rows.Scan(&doc, &at); err != nil {
			return nil, fmt.Errorf("sqlstore: trail events: %w", err)
		}
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal([]byte(doc), &head) == nil && slices.Contains(attestationEventTypes, head.Type) {
			continue // built from the attestation's row instead
		}
		out = append(out, store.TrailEvent{TrailID: trailID, Doc: json.RawMessage(doc), At: at})
	}
	return out, rows.Err()
}
