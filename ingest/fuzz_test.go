package ingest

import (
	"bytes"
	"context"
	"errors"
	"mime/multipart"
	"net/http"
	"testing"
)

// FuzzParseForm: any body and content type either parses within the limits or is a 4xx
// error body; it never panics and never returns a part larger than its limit.
func FuzzParseForm(f *testing.F) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.WriteField("data_json", `{"attestation_name": "x"}`)
	fw, _ := w.CreateFormFile("attachment_file", "a.txt")
	fw.Write([]byte("evidence"))
	w.Close()
	f.Add(w.FormDataContentType(), buf.Bytes())
	f.Add("multipart/form-data; boundary=x", []byte("--x\r\nContent-Disposition: form-data; name=\"data_json\"\r\n\r\n{}\r\n--x--\r\n"))
	f.Add("text/plain", []byte("hello"))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		const maxFile, maxPart = 64, 32
		form, err := parseForm(contentType, body, []string{"attachment_file"}, maxFile, maxPart)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 {
				t.Fatalf("error %v is not a 4xx error body", err)
			}
			return
		}
		for name, v := range form.values {
			if len(v) > maxPart {
				t.Fatalf("part %s has %d bytes, over %d", name, len(v), maxPart)
			}
		}
		for name, v := range form.files {
			limit := maxPart
			if name == "attachment_file" {
				limit = maxFile
			}
			if len(v.data) > limit {
				t.Fatalf("file %s has %d bytes, over %d", name, len(v.data), limit)
			}
		}
	})
}

// FuzzDataJSON: any data_json for the kinds judged without the store is accepted or refused
// with a 4xx; never a panic or a 5xx.
func FuzzDataJSON(f *testing.F) {
	seeds := []string{
		`{"attestation_name": "a", "is_compliant": false}`,
		`{"attestation_name": "a", "junit_results": [{"name": "s", "failures": 1, "errors": 0}]}`,
		`{"attestation_name": "a", "snyk_results": {"results": [{"high_count": 2}]}}`,
		`{"attestation_name": "a", "sonar_results": {"qualityGate": {"status": "OK"}}}`,
		`{"attestation_name": "a", "jira_results": [{"issue_exists": true}]}`,
		`{"attestation_name": "a", "git_provider": "bitbucket", "pull_requests": [{"url": "u", "commits": [{"verified": true}]}]}`,
		`{"attestation_name": "a", "type_name": "decision", "control": "C", "attestation_data": {"is_compliant": true}}`,
		`null`, `[]`, `{"junit_results": "x"}`,
	}
	kinds := []string{"generic", "junit", "snyk", "sonar", "jira", "pull_request", "system"}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	a := &API{}
	f.Fuzz(func(t *testing.T, k uint8, raw []byte) {
		kind := kinds[int(k)%len(kinds)]
		att := attestation{data: map[string]any{}}
		err := a.judge(context.Background(), nil, kind, raw, &att)
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Status >= http.StatusInternalServerError {
			t.Fatalf("%s: %v is not a 4xx error body", kind, err)
		}
	})
}
