package ingest

import (
	"context"
	"encoding/json"
	"testing"
)

// TestGenericCompliance: a generic attestation's is_compliant is read as encoding/json reads it, whatever path the
// body takes (the split-out field, or the whole body when a key differs only in case).
func TestGenericCompliance(t *testing.T) {
	a := New(Config{}, Deps{})
	tests := []struct {
		body      string
		compliant bool
		fails     bool
	}{
		{`{"attestation_name": "x", "is_compliant": true}`, true, false},
		{`{"attestation_name": "x", "is_compliant": false}`, false, false},
		{`{"attestation_name": "x"}`, true, false}, // the CLI's default
		{`{"attestation_name": "x", "is_compliant": null}`, true, false},
		{`{"attestation_name": "x", "Is_Compliant": false}`, false, false},
		{`{"attestation_name": "x", "is_compliant": false, "IS_COMPLIANT": true}`, true, false},
		{`{"attestation_name": "x", "is_compliant": "yes"}`, false, true},
	}
	for _, tt := range tests {
		var fields map[string]json.RawMessage
		if err := decodeJSONPart("data_json", []byte(tt.body), &fields); err != nil {
			t.Fatal(err)
		}
		att := attestation{data: map[string]any{}}
		for k, v := range fields {
			att.data[k] = v
		}
		err := a.judge(context.Background(), nil, "generic", []byte(tt.body), &att)
		if tt.fails {
			if e, ok := err.(*Error); !ok || e.Errors["is_compliant"] == "" {
				t.Errorf("%s: error %v, want one naming is_compliant", tt.body, err)
			}
			continue
		}
		if err != nil || att.compliant != tt.compliant {
			t.Errorf("%s: compliant %v, %v; want %v", tt.body, att.compliant, err, tt.compliant)
		}
	}
}
