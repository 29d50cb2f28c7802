package evaluate

import (
	"encoding/json"
	"fmt"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/template"
)

// attestationInput is the engine's view of the stored attestation a, with the override o folded
// in when there is one (overridden): the override takes the original's place (and its report
// time, so a later re-attestation of the same name still wins).
func attestationInput(a, o store.AttestationFact, overridden bool) template.Attestation {
	item := template.Attestation{
		ID: a.ID, Name: a.Name, Type: a.Type, IsCompliant: a.IsCompliant, CreatedAt: a.CreatedAt,
		ArtifactFingerprint: a.ArtifactFingerprint, TargetArtifact: a.TargetArtifact,
	}
	if overridden {
		item.ID, item.OverriddenID, item.IsCompliant = o.ID, a.ID, o.IsCompliant
	}
	return item
}

// artifactsInput is the engine's view of a trail's stored artifacts.
func artifactsInput(arts []store.Artifact) []template.Artifact {
	out := make([]template.Artifact, 0, len(arts))
	for _, a := range arts {
		out = append(out, template.Artifact{ID: a.ID, Fingerprint: a.Fingerprint, TemplateName: a.TemplateName, CreatedAt: a.CreatedAt})
	}
	return out
}

// Compliance is the stored compliance_status document of a trail, in the shape the API serves.
type Compliance struct {
	Status               string                    `json:"status"`
	IsCompliant          bool                      `json:"is_compliant"`
	AttestationsStatuses []AttestationStatus       `json:"attestations_statuses"`
	ArtifactsStatuses    map[string]ArtifactStatus `json:"artifacts_statuses"`
	EvaluatedAt          float64                   `json:"evaluated_at"`
	FlowTemplateID       string                    `json:"flow_template_id"`
	// TrailStatus is the state of the trail-level evidence alone; an artifact is only as
	// compliant as the trail it was built in.
	TrailStatus string `json:"trail_status"`
}

// AttestationStatus is one row of attestations_statuses.
type AttestationStatus struct {
	AttestationName         string  `json:"attestation_name"`
	AttestationType         string  `json:"attestation_type"`
	AttestationID           *string `json:"attestation_id"`
	OverriddenAttestationID *string `json:"overridden_attestation_id"`
	Status                  string  `json:"status"`
	IsCompliant             *bool   `json:"is_compliant"`
	Unexpected              bool    `json:"unexpected"`
}

// ArtifactStatus is one entry of artifacts_statuses.
type ArtifactStatus struct {
	ArtifactFingerprint  *string             `json:"artifact_fingerprint"`
	ArtifactID           *string             `json:"artifact_id"`
	Status               string              `json:"status"`
	IsCompliant          bool                `json:"is_compliant"`
	AttestationsStatuses []AttestationStatus `json:"attestations_statuses"`
	Unexpected           bool                `json:"unexpected"`
	EvaluatedAt          float64             `json:"evaluated_at"`
	FlowTemplateID       string              `json:"flow_template_id"`
}

// DisplayType is how an attestation type is shown: decisions are system attestations.
func DisplayType(t string) string {
	if t == "decision" {
		return "system:decision"
	}
	return t
}

func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func statuses(in []template.AttestationStatus) []AttestationStatus {
	out := make([]AttestationStatus, 0, len(in))
	for _, s := range in {
		out = append(out, AttestationStatus{
			AttestationName: s.Name, AttestationType: DisplayType(s.Type), AttestationID: strOrNil(s.ID),
			OverriddenAttestationID: strOrNil(s.OverriddenID), Status: s.Status, IsCompliant: s.IsCompliant,
			Unexpected: s.Unexpected,
		})
	}
	return out
}

// trailLevelState is the state of the trail's own attestations, ignoring its artifacts.
func trailLevelState(in []template.AttestationStatus) string {
	state := "COMPLIANT"
	for _, s := range in {
		switch {
		case s.Status == "COMPLETE" && s.IsCompliant != nil && !*s.IsCompliant:
			return "NON-COMPLIANT"
		case s.Status == "MISSING":
			state = "INCOMPLETE"
		}
	}
	return state
}

// combine is the worse of two states.
func combine(a, b string) string {
	rank := map[string]int{"COMPLIANT": 0, "INCOMPLETE": 1, "MISSING": 1, "NON-COMPLIANT": 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// complianceDoc renders the engine's result and derives each stored artifact's state.
func complianceDoc(res template.TrailCompliance, templateID string, at float64, arts []store.Artifact) (json.RawMessage, map[string]string, error) {
	doc := Compliance{
		Status: res.State, IsCompliant: res.IsCompliant, AttestationsStatuses: statuses(res.Attestations),
		ArtifactsStatuses: make(map[string]ArtifactStatus, len(res.Artifacts)), EvaluatedAt: at,
		FlowTemplateID: templateID, TrailStatus: trailLevelState(res.Attestations),
	}
	byFingerprint := map[string]string{}
	states := map[string]string{}
	for name, a := range res.Artifacts {
		doc.ArtifactsStatuses[name] = ArtifactStatus{
			ArtifactFingerprint: strOrNil(a.Fingerprint), ArtifactID: strOrNil(a.ID), Status: a.Status,
			IsCompliant: a.IsCompliant, AttestationsStatuses: statuses(a.Attestations), Unexpected: a.Unexpected,
			EvaluatedAt: at, FlowTemplateID: templateID,
		}
		if a.Fingerprint != "" {
			st := combine(a.Status, doc.TrailStatus)
			byFingerprint[a.Fingerprint] = st
			if a.ID != "" {
				states[a.ID] = st
			}
		}
	}
	// Re-reports of the same fingerprint share the state of the one that fills the slot.
	for _, a := range arts {
		if _, ok := states[a.ID]; !ok {
			if st, ok := byFingerprint[a.Fingerprint]; ok {
				states[a.ID] = st
			}
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("encode compliance: %w", err)
	}
	return b, states, nil
}
