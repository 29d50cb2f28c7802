package ingest

import (
	"regexp"
	"testing"
)

// TestNewIDHostedForm: ids are the hosted service's 8-4-4-4-8 lowercase hex (CLIENT-2.md: the
// artifact_id and attestation_id of html_url query strings), and each is new.
func TestNewIDHostedForm(t *testing.T) {
	form := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{8}$`)
	seen := map[string]bool{}
	for range 10_000 {
		id := newID()
		if !form.MatchString(id) {
			t.Fatalf("newID() = %q, want 8-4-4-4-8 lowercase hex", id)
		}
		if seen[id] {
			t.Fatalf("newID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestProvenanceArtifactID(t *testing.T) {
	flows := []any{
		map[string]any{"flow_name": "other", "artifact_id": "a1"},
		map[string]any{"flow_name": "web", "artifact_id": ""},
		map[string]any{"flow_name": "web", "artifact_id": "a3"},
	}
	for _, tc := range []struct {
		flows any
		flow  string
		want  string
	}{
		{flows, "web", "a3"},
		{flows, "other", "a1"},
		{flows, "none", ""},
		{nil, "web", ""},
		{"not a list", "web", ""},
	} {
		if got := provenanceArtifactID(tc.flows, tc.flow); got != tc.want {
			t.Errorf("provenanceArtifactID(%v, %q) = %q, want %q", tc.flows, tc.flow, got, tc.want)
		}
	}
}
