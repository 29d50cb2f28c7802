package ingest

import (
	"encoding/json"
	"testing"
)

// TestEncodeData checks that an attestation's data encodes as json.Marshal would encode the same map, whatever the
// raw values' spacing, and stays valid JSON.
func TestEncodeData(t *testing.T) {
	tests := []map[string]any{
		{},
		{"is_compliant": json.RawMessage(`true`), "user_data": json.RawMessage(`{"a": [1, 2], "b": "x<y"}`)},
		{"attestation_name": json.RawMessage(`"unit"`), "git_provider": "github", "pull_requests": []map[string]any{{"url": "u"}},
			"odd \"key\"": json.RawMessage(`null`), "empty": json.RawMessage(nil)},
	}
	for _, data := range tests {
		got, err := encodeData(data)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %s", got)
		}
		want, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if gj, _ := json.Marshal(g); string(gj) != string(mustJSON(t, w)) {
			t.Errorf("encodeData = %s, json.Marshal = %s", got, want)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
