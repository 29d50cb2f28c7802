package ingest

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

// TestJudgeAnswers: what policies/attestkind decides reaches the attestation, and its refusals
// are worded as the hosted service words them.
func TestJudgeAnswers(t *testing.T) {
	a := New(Config{}, Deps{})
	judge := func(kind, body string) (attestation, error) {
		_, fields, err := decodeAttestationData([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		att := attestation{data: map[string]any{}}
		for k, v := range fields {
			att.data[k] = v
		}
		return att, a.judge(context.Background(), nil, kind, []byte(body), &att)
	}

	att, err := judge("system", `{"attestation_name": "x", "type_name": "decision", "control": "C-1", "attestation_data": {"is_compliant": true}}`)
	if err != nil || att.typ != "decision" || !att.compliant || att.control != "C-1" {
		t.Fatalf("decision: %+v, %v", att, err)
	}
	att, err = judge("junit", `{"attestation_name": "x", "junit_results": [{"name": "s", "failures": 1}]}`)
	if err != nil || att.typ != "junit" || att.compliant {
		t.Fatalf("failing junit: %+v, %v", att, err)
	}

	for _, tt := range []struct {
		kind, body, field string
		status            int
	}{
		{"junit", `{"attestation_name": "x"}`, "junit_results", http.StatusBadRequest},
		{"generic", `{"attestation_name": "x", "is_compliant": "yes"}`, "is_compliant", http.StatusBadRequest},
		{"junit", `{"attestation_name": "x", "junit_results": "none"}`, "junit_results", http.StatusBadRequest}, // decodeJSONPart's
		{"nonsense", `{"attestation_name": "x"}`, "", http.StatusNotFound},
	} {
		_, err := judge(tt.kind, tt.body)
		var e *Error
		if !errors.As(err, &e) || e.Status != tt.status || (tt.field != "" && e.Errors[tt.field] == "") {
			t.Errorf("%s %s: %v, want %d naming %q", tt.kind, tt.body, err, tt.status, tt.field)
		}
		if tt.status == http.StatusBadRequest && e != nil && e.Message != "Input payload validation failed" {
			t.Errorf("%s %s: message %q", tt.kind, tt.body, e.Message)
		}
	}
}
