package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Every answer the end-to-end suite receives under /api/v2 is held to the served OpenAPI
// description: its status must be listed for the operation the request reached, and its body
// must match the schema of that status and content type. A request no operation serves (a path
// nothing routes, a method the path does not have) may only get one of the global answers, 404
// and 405, with the Error body.

const apiPrefix = "/api/v2"

// globalStatuses are what a request no operation serves is answered.
var globalStatuses = []int{http.StatusNotFound, http.StatusMethodNotAllowed}

// describedOp is one operation of the description.
type describedOp struct {
	id, method, template string
	re                   *regexp.Regexp
	static               []bool                     // per path segment: a literal, not a parameter
	responses            map[string]map[string]bool // status -> content type -> has a schema
}

// description is a served OpenAPI description, compiled for checking answers.
type description struct {
	ops []describedOp

	mu       sync.Mutex
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema // by JSON pointer
}

const descriptionURL = "veritrail:openapi.json"

var (
	descriptionsMu sync.Mutex
	descriptions   = map[string]*description{} // by scheme://host
)

// describedBy fetches, once per server, the description served at origin.
func describedBy(origin string) (*description, error) {
	descriptionsMu.Lock()
	defer descriptionsMu.Unlock()
	if d, ok := descriptions[origin]; ok {
		return d, nil
	}
	resp, err := http.Get(origin + apiPrefix + "/openapi.json")
	if err != nil {
		return nil, fmt.Errorf("fetch the OpenAPI description: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the OpenAPI description: status %d, %v", resp.StatusCode, err)
	}
	d, err := parseDescription(b)
	if err != nil {
		return nil, err
	}
	descriptions[origin] = d
	return d, nil
}

func parseDescription(b []byte) (*description, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("the OpenAPI description is not JSON: %w", err)
	}
	var spec struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Parameters  []struct {
				Name         string `json:"name"`
				In           string `json:"in"`
				MultiSegment bool   `json:"x-veritrail-multi-segment"`
			} `json:"parameters"`
			Responses map[string]struct {
				Content map[string]struct {
					Schema json.RawMessage `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("read the OpenAPI description: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020) // OpenAPI 3.1's schemas are JSON Schema 2020-12
	if err := c.AddResource(descriptionURL, doc); err != nil {
		return nil, err
	}
	d := &description{compiler: c, schemas: map[string]*jsonschema.Schema{}}
	param := regexp.MustCompile(`\\\{([^}]+)\\\}`)
	for path, methods := range spec.Paths {
		var static []bool
		for _, s := range strings.Split(strings.Trim(path, "/"), "/") {
			static = append(static, !strings.HasPrefix(s, "{"))
		}
		for method, o := range methods {
			// A parameter the description marks as spanning segments may hold '/'.
			re := regexp.MustCompile("^" + param.ReplaceAllStringFunc(regexp.QuoteMeta(path), func(s string) string {
				name := param.FindStringSubmatch(s)[1]
				for _, p := range o.Parameters {
					if p.In == "path" && p.Name == name && p.MultiSegment {
						return ".+"
					}
				}
				return "[^/]+"
			}) + "$")
			op := describedOp{id: o.OperationID, method: strings.ToUpper(method), template: path, re: re, static: static,
				responses: map[string]map[string]bool{}}
			for status, r := range o.Responses {
				op.responses[status] = map[string]bool{}
				for ct, m := range r.Content {
					op.responses[status][ct] = len(m.Schema) > 0
				}
			}
			d.ops = append(d.ops, op)
		}
	}
	return d, nil
}

// route finds the operation a request reaches, as the router picks it: among the templates that
// match, a literal segment wins over a parameter at the first place they differ. pathMatched
// tells whether some operation has the path (so the method is what is missing).
func (d *description) route(method, path string) (op *describedOp, pathMatched bool) {
	for i := range d.ops {
		o := &d.ops[i]
		if !o.re.MatchString(path) {
			continue
		}
		pathMatched = true
		if o.method != method {
			continue
		}
		if op == nil || moreStatic(o.static, op.static) {
			op = o
		}
	}
	return op, pathMatched
}

func moreStatic(a, b []bool) bool {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return a[i]
		}
	}
	return false
}

// schema compiles, once, the schema at a JSON pointer of the description.
func (d *description) schema(pointer ...string) (*jsonschema.Schema, error) {
	for i, p := range pointer {
		pointer[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1")
	}
	ptr := "/" + strings.Join(pointer, "/")
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.schemas[ptr]; ok {
		return s, nil
	}
	s, err := d.compiler.Compile(descriptionURL + "#" + (&url.URL{Fragment: ptr}).EscapedFragment())
	if err != nil {
		return nil, fmt.Errorf("compile the schema at %s: %w", ptr, err)
	}
	d.schemas[ptr] = s
	return s, nil
}

// check says what is wrong with an answer, or "" when the description lists it.
func (d *description) check(method, path string, status int, header http.Header, body []byte) string {
	op, pathMatched := d.route(method, path)
	if op == nil {
		want := http.StatusNotFound
		if pathMatched {
			want = http.StatusMethodNotAllowed
		}
		if status != want {
			return fmt.Sprintf("no operation serves %s %s, yet the answer is %d (want the global %d)", method, path, status, want)
		}
		s, err := d.schema("components", "schemas", "Error")
		if err != nil {
			return err.Error()
		}
		return validateBody(s, fmt.Sprintf("%s %s (no operation), status %d", method, path, status), header, body)
	}
	what := fmt.Sprintf("operation %s (%s %s), status %d", op.id, method, op.template, status)
	code := fmt.Sprint(status)
	contents, ok := op.responses[code]
	if !ok {
		listed := make([]string, 0, len(op.responses))
		for s := range op.responses {
			listed = append(listed, s)
		}
		slices.Sort(listed)
		return fmt.Sprintf("%s: the status is not listed (listed: %s): %.300s", what, strings.Join(listed, ", "), body)
	}
	if len(contents) == 0 {
		if len(body) > 0 {
			return fmt.Sprintf("%s: the description declares no body, the answer has one: %.300s", what, body)
		}
		return ""
	}
	ct, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	hasSchema, ok := contents[ct]
	if !ok {
		declared := slices.Sorted(func(yield func(string) bool) {
			for c := range contents {
				if !yield(c) {
					return
				}
			}
		})
		return fmt.Sprintf("%s: content type %q is not declared (declared: %s)", what, ct, strings.Join(declared, ", "))
	}
	if !hasSchema {
		return ""
	}
	s, err := d.schema("paths", op.template, strings.ToLower(method), "responses", code, "content", ct, "schema")
	if err != nil {
		return err.Error()
	}
	return validateBody(s, what, header, body)
}

func validateBody(s *jsonschema.Schema, what string, header http.Header, body []byte) string {
	if ct, _, _ := mime.ParseMediaType(header.Get("Content-Type")); ct != "application/json" && !strings.HasSuffix(ct, "+json") {
		return "" // a schema of a non-JSON body describes its bytes, not a document
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Sprintf("%s: the body is not JSON: %v: %.300s", what, err, body)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Sprintf("%s: the body breaks its schema: %v\nbody: %.500s", what, err, body)
	}
	return ""
}

// checkAnswer holds an answer to the OpenAPI description of the server that gave it. Answers
// from outside /api/v2, and the description itself, are not described by it.
func checkAnswer(t testing.TB, method, rawURL string, status int, header http.Header, body []byte) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("check answer: %v", err)
	}
	if !strings.HasPrefix(u.Path, apiPrefix+"/") || strings.HasPrefix(u.Path, apiPrefix+"/openapi") ||
		strings.HasPrefix(u.Path, apiPrefix+"/schemas/") {
		return
	}
	d, err := describedBy(u.Scheme + "://" + u.Host)
	if err != nil {
		t.Errorf("%s %s: %v", method, u.Path, err)
		return
	}
	if msg := d.check(method, u.EscapedPath(), status, header, body); msg != "" {
		t.Errorf("OpenAPI: %s", msg)
	}
}

// TestOpenAPICheck: the check refuses what the description does not list, so that the suite's
// silence means something.
func TestOpenAPICheck(t *testing.T) {
	base, _ := startEmbedded(t)
	d, err := describedBy(base)
	if err != nil {
		t.Fatal(err)
	}
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	flows := apiPrefix + "/flows/" + testOrg
	for _, c := range []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		want               string // a part of the complaint; "" for none
	}{
		{"a listed error", "GET", flows, 404, jsonHeader, `{"message":"no"}`, ""},
		{"errors null", "GET", flows, 400, jsonHeader, `{"message":"no","errors":null}`, "listFlows"},
		{"errors a list", "GET", flows, 400, jsonHeader, `{"message":"no","errors":[]}`, "breaks its schema"},
		{"no message", "GET", flows, 404, jsonHeader, `{"detail":"no"}`, "breaks its schema"},
		{"status not listed", "GET", flows, 418, jsonHeader, `{"message":"no"}`, "not listed"},
		{"not JSON", "GET", flows, 404, jsonHeader, `no`, "not JSON"},
		{"content type not declared", "GET", flows, 404, http.Header{"Content-Type": {"text/plain"}}, `no`, "not declared"},
		{"unrouted path, 404", "GET", apiPrefix + "/nothing/here", 404, jsonHeader, `{"message":"no"}`, ""},
		{"unrouted path, 200", "GET", apiPrefix + "/nothing/here", 200, jsonHeader, `{}`, "global 404"},
		{"unrouted method, 405", "PATCH", flows, 405, jsonHeader, `{"message":"no"}`, ""},
		{"unrouted method, bad body", "PATCH", flows, 405, jsonHeader, `{"message":"no","errors":null}`, "breaks its schema"},
		{"literal beats parameter", "GET", apiPrefix + "/user/default-org", 200, jsonHeader, `{"default_org_name":"acme"}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := d.check(c.method, c.path, c.status, c.header, []byte(c.body))
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("check = %q, want %q", got, c.want)
			}
		})
	}
}
