package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"
)

// openAPIDoc is the served /api/v2/openapi.json, decoded loosely.
type openAPIDoc map[string]any

func serveOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	a := New(Config{}, Deps{Log: quiet()})
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v2/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/v2/openapi.json: %d %s", rec.Code, rec.Body)
	}
	var doc openAPIDoc
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// obj follows keys through nested objects; nil when one is missing.
func obj(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

// resolve follows a schema's $ref into components.
func (d openAPIDoc) resolve(s map[string]any) map[string]any {
	if ref, ok := s["$ref"].(string); ok {
		return obj(map[string]any(d), "components", "schemas", strings.TrimPrefix(ref, "#/components/schemas/"))
	}
	return s
}

// field returns the schema at a dotted path of properties ("a.b"), through $refs and array items.
func (d openAPIDoc) field(s map[string]any, path string) map[string]any {
	for _, name := range strings.Split(path, ".") {
		s = d.resolve(s)
		if items := obj(s, "items"); items != nil {
			s = d.resolve(items)
		}
		s = obj(s, "properties", name)
		if s == nil {
			return nil
		}
	}
	return d.resolve(s)
}

// TestOpenAPIDocumentsMultipartParts: every multipart operation documents its JSON part, as a
// JSON document (encoding application/json) of its payload's schema, and its file parts; each
// attestation kind's data_json schema holds the fields the client contract gives it.
func TestOpenAPIDocumentsMultipartParts(t *testing.T) {
	common := []string{"attestation_name", "artifact_fingerprint", "target_artifacts", "git_commit_info", "repo_info",
		"external_urls", "origin_url", "description", "annotations", "user_data"}
	attest := func(fields ...string) []string { return append(slices.Clone(common), fields...) }
	type want struct {
		json     string
		required []string
		files    []string
		fields   []string // dotted paths into the JSON part's schema
	}
	ops := map[string]want{
		"attest_generic": {"data_json", []string{"data_json"}, []string{"attachment_file"}, attest("is_compliant")},
		"attest_custom":  {"data_json", []string{"data_json"}, []string{"attachment_file"}, attest("type_name", "attestation_data")},
		"attest_junit": {"data_json", []string{"data_json"}, []string{"attachment_file"}, attest("junit_results.name",
			"junit_results.failures", "junit_results.errors", "junit_results.skipped", "junit_results.total", "junit_results.duration",
			"junit_results.timestamp")},
		"attest_snyk": {"data_json", []string{"data_json"}, []string{"attachment_file"}, attest("snyk_results.schema_version",
			"snyk_results.tool.name", "snyk_results.results.high_count", "snyk_results.results.medium_count",
			"snyk_results.results.low_count", "snyk_results.results.high")},
		"attest_sonar": {"data_json", []string{"data_json"}, []string{"attachment_file"}, attest("sonar_results.serverUrl",
			"sonar_results.taskId", "sonar_results.status", "sonar_results.project", "sonar_results.qualityGate.status")},
		"attest_jira": {"data_json", []string{"data_json"}, []string{"attachment_file"}, attest("jira_results.issue_id",
			"jira_results.issue_url", "jira_results.issue_exists", "jira_results.issue_fields")},
		"attest_pull_request": {"data_json", []string{"data_json"}, []string{"attachment_file"}, attest("git_provider",
			"pull_requests.url", "pull_requests.state", "pull_requests.author", "pull_requests.head_ref", "pull_requests.approvers",
			"pull_requests.commits.sha1", "pull_requests.commits.verified", "pull_requests.commits.signature_state")},
		"attest_system": {"data_json", []string{"data_json"}, []string{"attachment_file"}, attest("type_name", "control",
			"attestation_data.is_compliant", "attestation_data.format", "attestation_data.original_fingerprint", "attestation_data.document")},
		"attest_sarif": {"data_json", []string{"data_json"}, []string{"attachment_file"}, attest("is_compliant",
			"sarif_results.schema_version", "sarif_results.tool.name", "sarif_results.results.high_count", "sarif_results.results.high")},
		"beginTrail": {"data_json", []string{"data_json"}, []string{"template_file"}, []string{"name", "description",
			"git_commit_info", "repo_info", "origin_url", "external_urls", "user_data"}},
		"createFlowWithTemplate": {"data_json", []string{"data_json"}, []string{"template_file"}, []string{"name", "description", "visibility"}},
		"whatIfFlowTemplate":     {"payload", []string{"template_file"}, []string{"template_file"}, []string{"name"}},
		"createCustomType": {"data_json", []string{"data_json"}, []string{"type_schema"}, []string{"name", "description",
			"evaluator.content_type", "evaluator.rules", "summary"}},
		"createPolicy": {"payload", []string{"payload", "policy_file"}, []string{"policy_file"}, []string{"name", "description", "comment", "type"}},
		"putPolicy":    {"payload", []string{"policy_file"}, []string{"policy_file"}, []string{"name", "description", "comment", "type"}},
		"whatIfPolicy": {"payload", []string{"policy_file"}, []string{"policy_file"}, []string{"name", "type"}},
	}

	doc := serveOpenAPI(t)
	seen := map[string]bool{}
	for path, methods := range obj(map[string]any(doc), "paths") {
		for method, o := range methods.(map[string]any) {
			id, _ := obj(methods, method)["operationId"].(string)
			body := obj(o, "requestBody", "content", "multipart/form-data")
			if body == nil {
				continue
			}
			seen[id] = true
			w, ok := ops[id]
			if !ok {
				t.Errorf("%s %s (%s) takes multipart/form-data but this test does not know its parts", method, path, id)
				continue
			}
			schema := obj(body, "schema")
			var parts []string
			for p := range obj(schema, "properties") {
				parts = append(parts, p)
			}
			if wantParts := append([]string{w.json}, w.files...); !sameSet(parts, wantParts) {
				t.Errorf("%s: parts %v, want %v", id, parts, wantParts)
			}
			var required []string
			for _, r := range schema["required"].([]any) {
				required = append(required, r.(string))
			}
			if !sameSet(required, w.required) {
				t.Errorf("%s: required parts %v, want %v", id, required, w.required)
			}
			if ct := obj(body, "encoding", w.json)["contentType"]; ct != "application/json" {
				t.Errorf("%s: %s has content type %v, want application/json", id, w.json, ct)
			}
			for _, f := range w.files {
				if s := obj(schema, "properties", f); s["type"] != "string" || s["format"] != "binary" {
					t.Errorf("%s: file part %s is %v, want a binary string", id, f, s)
				}
			}
			payload := doc.resolve(obj(schema, "properties", w.json))
			if payload["type"] != "object" {
				t.Errorf("%s: %s is documented as %v, want an object schema", id, w.json, payload)
				continue
			}
			for _, f := range w.fields {
				if doc.field(payload, f) == nil {
					t.Errorf("%s: %s documents no %s", id, w.json, f)
				}
			}
		}
	}
	for id := range ops {
		if !seen[id] {
			t.Errorf("operation %s documents no multipart/form-data body", id)
		}
	}
}

func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}

// TestRegisterFormParsesByDeclaration: the adapter parses the body by the declared parts: a
// missing required JSON part is "Field required", a large file part may exceed the limit of the
// other parts, and the payload arrives decoded with the files beside it.
func TestRegisterFormParsesByDeclaration(t *testing.T) {
	installErrorModel()
	type payload struct {
		Name string `json:"name"`
	}
	type input struct {
		FormBody
	}
	type output struct{ Body string }
	a := &API{cfg: Config{MaxFileBytes: 1024, MaxPartBytes: 16}}
	mux := chi.NewRouter()
	a.huma = humachi.New(mux, huma.DefaultConfig("t", "1"))
	parts := formParts{json: "data_json", files: []filePart{{name: "big", large: true}, {name: "small"}}}
	registerForm(a, huma.Operation{OperationID: "t", Method: http.MethodPost, Path: "/t"}, parts,
		func(_ context.Context, _ *input, f *Form[payload]) (*output, error) {
			big, _ := f.file("big")
			small, _ := f.part("small")
			return &output{Body: f.Payload.Name + "|" + big.name + ":" + string(big.data) + "|" + string(small) + "|" + string(f.Raw)}, nil
		})
	post := func(build func(w *multipart.Writer)) (int, string) {
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		build(w)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/t", &b)
		req.Header.Set("Content-Type", w.FormDataContentType())
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	file := func(w *multipart.Writer, part, name, data string) {
		fw, err := w.CreateFormFile(part, name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write([]byte(data))
	}

	code, body := post(func(w *multipart.Writer) {
		_ = w.WriteField("data_json", `{"name":"n"}`)
		file(w, "big", "b.txt", strings.Repeat("x", 100))
		_ = w.WriteField("small", "s")
	})
	if want := `"n|b.txt:` + strings.Repeat("x", 100) + `|s|{\"name\":\"n\"}"`; code != http.StatusOK || strings.TrimSpace(body) != want {
		t.Fatalf("whole form: %d %s, want 200 %s", code, body, want)
	}
	code, body = post(func(w *multipart.Writer) { file(w, "big", "b.txt", "x") })
	if code != http.StatusBadRequest || !strings.Contains(body, `"data_json":"Field required [input: None]"`) {
		t.Fatalf("no data_json: %d %s", code, body)
	}
	code, body = post(func(w *multipart.Writer) {
		_ = w.WriteField("data_json", `{"name":"n"}`)
		file(w, "small", "s.txt", strings.Repeat("x", 100))
	})
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "Part 'small' is larger than the limit of 16 bytes") {
		t.Fatalf("small part over its limit: %d %s", code, body)
	}
	code, body = post(func(w *multipart.Writer) { _ = w.WriteField("data_json", `{"name":1}`) })
	if code != http.StatusBadRequest || !strings.Contains(body, `"name":"Input should be a valid string [input: number]"`) {
		t.Fatalf("payload of the wrong type: %d %s", code, body)
	}
}

// BenchmarkMultipartAdapter measures what registerForm adds to a request over parsing the same
// body by hand in the handler, as the operations did before it: a 1 KB attestation body through
// Huma to a handler that takes its data_json.
func BenchmarkMultipartAdapter(b *testing.B) {
	type input struct {
		FormBody
	}
	type output struct{ Body int }
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	data := `{"attestation_name":"a","is_compliant":true,"user_data":{"note":"` + strings.Repeat("x", 900) + `"}}`
	_ = w.WriteField("data_json", data)
	_ = w.Close()
	serve := func(b *testing.B, mux *chi.Mux) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, "/t", bytes.NewReader(body.Bytes()))
			req.Header.Set("Content-Type", w.FormDataContentType())
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("%d %s", rec.Code, rec.Body)
			}
		}
	}
	newAPI := func() (*API, *chi.Mux) {
		mux := chi.NewRouter()
		return &API{cfg: Config{MaxFileBytes: 10 << 20, MaxPartBytes: 1 << 20}, huma: humachi.New(mux, huma.DefaultConfig("t", "1"))}, mux
	}
	o := huma.Operation{OperationID: "t", Method: http.MethodPost, Path: "/t"}
	b.Run("registerForm", func(b *testing.B) {
		a, mux := newAPI()
		parts := formParts{json: "data_json", decoding: decodeByHandler, files: []filePart{{name: "attachment_file", large: true}}}
		registerForm(a, o, parts, func(_ context.Context, _ *input, f *Form[GenericAttestation]) (*output, error) {
			return &output{Body: len(f.Raw)}, nil
		})
		serve(b, mux)
	})
	b.Run("by hand", func(b *testing.B) {
		a, mux := newAPI()
		ho := o
		ho.MaxBodyBytes, ho.SkipValidateBody = a.cfg.MaxFileBytes+a.cfg.MaxPartBytes, true
		huma.Register(a.huma, ho, func(_ context.Context, in *input) (*output, error) {
			f, err := parseForm(in.ContentType, in.RawBody, []string{"attachment_file"}, a.cfg.MaxFileBytes, a.cfg.MaxPartBytes)
			if err != nil {
				return nil, err
			}
			raw, ok := f.part("data_json")
			if !ok {
				return nil, fieldError("data_json", "Field required")
			}
			return &output{Body: len(raw)}, nil
		})
		serve(b, mux)
	})
}
