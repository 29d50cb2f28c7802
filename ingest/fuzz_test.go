package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
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
// with a 4xx, as attest decodes and judges it; never a panic or a 5xx, and never accepted with a
// string the store cannot hold (bytes that are not UTF-8, or a NUL, in a key or a value).
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
		`{"attestation_name": "nul\u0000name"}`, `{"attestation_name": "a", "user_data": {"k\u0000": [1, "\u0000"]}}`,
		`{"attestation_name": "a", "d": "\\u0000 is text"}`, `{"attestation\u005fname": "a", "x": "\u0000"}`,
		"{\"attestation_name\": \"a\", \"user_data\": \"\xff\xfe\"}", "{\"attestation_name\": \"\xc3\"}",
		"{\"attestation_name\": \"a\", \"junit_results\": [{\"name\": \"\xed\xa0\x80\", \"failures\": 0}]}",
	}
	kinds := []string{"generic", "junit", "snyk", "sonar", "jira", "pull_request", "system"}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	a := &API{}
	f.Fuzz(func(t *testing.T, k uint8, raw []byte) {
		kind := kinds[int(k)%len(kinds)]
		att := attestation{data: map[string]any{}}
		_, fields, err := decodeAttestationData(raw)
		if err == nil {
			for k, v := range fields {
				att.data[k] = v
			}
			err = a.judge(context.Background(), nil, kind, raw, &att)
		}
		if err == nil {
			if !storable(raw) {
				t.Fatalf("%s: %q was accepted", kind, raw)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Status >= http.StatusInternalServerError {
			t.Fatalf("%s: %v is not a 4xx error body", kind, err)
		}
	})
}

// storable reports whether every key and string of the JSON document raw is UTF-8 without a NUL,
// by decoding it, independently of the text rules' scan of the raw bytes.
func storable(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return true // nothing the decoder accepted
	}
	var ok func(any) bool
	ok = func(v any) bool {
		switch x := v.(type) {
		case string:
			return !strings.ContainsRune(x, 0)
		case []any:
			for _, e := range x {
				if !ok(e) {
					return false
				}
			}
		case map[string]any:
			for k, e := range x {
				if strings.ContainsRune(k, 0) || !ok(e) {
					return false
				}
			}
		}
		return true
	}
	return ok(v)
}
