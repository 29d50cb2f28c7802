// Package openapicheck holds the API's answers to its own OpenAPI description, for tests: an
// answer's status must be listed for the operation the request reached, and its body must match
// the schema of that status and content type (OpenAPI 3.1 schemas are JSON Schema 2020-12). A
// request no operation serves (a path nothing routes, a method the path lacks) may only get one
// of the global answers, 404 and 405, with the Error body.
//
// The end-to-end suite checks every answer it receives with a Checker; tests that drive the
// API through another client (the veritrail CLI's) wrap its transport in a Transport.
package openapicheck

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Prefix is where the described API lives on a server.
const Prefix = "/api/v2"

// MultiSegment is the extension that marks a path parameter whose value may hold unescaped '/'
// (a repository name, sent as several segments); OpenAPI has no word for it.
const MultiSegment = "x-veritrail-multi-segment"

// Operation is one operation of the description, as a test that calls every operation needs it.
type Operation struct {
	ID, Method, Template string
	QueryParams          []string // the names of its query parameters
	HasBody              bool     // it declares a request body
}

// operation is one operation of the description, compiled.
type operation struct {
	Operation
	re        *regexp.Regexp
	static    []bool                     // per path segment: a literal, not a parameter
	responses map[string]map[string]bool // status -> content type -> has a schema
}

// Description is a served OpenAPI description, compiled for checking answers. It is safe for
// concurrent use.
type Description struct {
	ops []operation

	mu       sync.Mutex
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema // by JSON pointer
}

const resourceURL = "veritrail:openapi.json"

// Parse compiles a description (the JSON of /api/v2/openapi.json).
func Parse(b []byte) (*Description, error) {
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
			RequestBody json.RawMessage `json:"requestBody"`
			Responses   map[string]struct {
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
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(resourceURL, doc); err != nil {
		return nil, fmt.Errorf("load the OpenAPI description: %w", err)
	}
	d := &Description{compiler: c, schemas: map[string]*jsonschema.Schema{}}
	param := regexp.MustCompile(`\\\{([^}]+)\\\}`)
	for path, methods := range spec.Paths {
		var static []bool
		for _, s := range strings.Split(strings.Trim(path, "/"), "/") {
			static = append(static, !strings.HasPrefix(s, "{"))
		}
		for method, o := range methods {
			re := regexp.MustCompile("^" + param.ReplaceAllStringFunc(regexp.QuoteMeta(path), func(s string) string {
				name := param.FindStringSubmatch(s)[1]
				for _, p := range o.Parameters {
					if p.In == "path" && p.Name == name && p.MultiSegment {
						return ".+"
					}
				}
				return "[^/]+"
			}) + "$")
			op := operation{Operation: Operation{ID: o.OperationID, Method: strings.ToUpper(method), Template: path,
				HasBody: len(o.RequestBody) > 0}, re: re, static: static, responses: map[string]map[string]bool{}}
			for _, p := range o.Parameters {
				if p.In == "query" {
					op.QueryParams = append(op.QueryParams, p.Name)
				}
			}
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

// Operations lists the description's operations by path template, then method.
func (d *Description) Operations() []Operation {
	ops := make([]Operation, len(d.ops))
	for i, o := range d.ops {
		ops[i] = o.Operation
	}
	slices.SortFunc(ops, func(a, b Operation) int {
		return cmp.Or(strings.Compare(a.Template, b.Template), strings.Compare(a.Method, b.Method))
	})
	return ops
}

// route finds the operation a request reaches, as the router picks it: among the templates that
// match, a literal segment wins over a parameter at the first place they differ. pathMatched
// tells whether some operation has the path (so that the method is what is missing).
func (d *Description) route(method, path string) (op *operation, pathMatched bool) {
	for i := range d.ops {
		o := &d.ops[i]
		if !o.re.MatchString(path) {
			continue
		}
		pathMatched = true
		if o.Method != method {
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

// schema compiles, once, the schema at a JSON pointer of the description, given by its tokens.
func (d *Description) schema(tokens ...string) (*jsonschema.Schema, error) {
	escaped := make([]string, len(tokens))
	for i, p := range tokens {
		escaped[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1")
	}
	ptr := "/" + strings.Join(escaped, "/")
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.schemas[ptr]; ok {
		return s, nil
	}
	s, err := d.compiler.Compile(resourceURL + "#" + (&url.URL{Fragment: ptr}).EscapedFragment())
	if err != nil {
		return nil, fmt.Errorf("compile the schema at %s: %w", ptr, err)
	}
	d.schemas[ptr] = s
	return s, nil
}

// Check says what is wrong with an answer to method at path (escaped, with the /api/v2 prefix),
// or "" when the description lists it. The complaint names the operation, the status and the
// validator's message.
func (d *Description) Check(method, path string, status int, header http.Header, body []byte) string {
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
		return validate(s, fmt.Sprintf("%s %s (no operation), status %d", method, path, status), header, body)
	}
	what := fmt.Sprintf("operation %s (%s %s), status %d", op.ID, method, op.Template, status)
	code := fmt.Sprint(status)
	contents, ok := op.responses[code]
	if !ok {
		return fmt.Sprintf("%s: the status is not listed (listed: %s): %.300s", what,
			strings.Join(slices.Sorted(maps.Keys(op.responses)), ", "), body)
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
		return fmt.Sprintf("%s: content type %q is not declared (declared: %s)", what, ct,
			strings.Join(slices.Sorted(maps.Keys(contents)), ", "))
	}
	if !hasSchema {
		return ""
	}
	s, err := d.schema("paths", op.Template, strings.ToLower(method), "responses", code, "content", ct, "schema")
	if err != nil {
		return err.Error()
	}
	return validate(s, what, header, body)
}

func validate(s *jsonschema.Schema, what string, header http.Header, body []byte) string {
	if ct, _, _ := mime.ParseMediaType(header.Get("Content-Type")); ct != "application/json" && !strings.HasSuffix(ct, "+json") {
		return "" // the schema of a body that is not JSON describes its bytes, not a document
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

// Checker checks answers against the description of the server that gave them, fetched once
// per server. It is safe for concurrent use.
type Checker struct {
	// Client fetches descriptions; nil means a client of its own (never one whose transport is
	// a Transport of this Checker).
	Client *http.Client

	mu   sync.Mutex
	byID map[string]*Description // by scheme://host
}

// Described fetches, once per server, the description served at origin (scheme://host).
func (c *Checker) Described(origin string) (*Description, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.byID[origin]; ok {
		return d, nil
	}
	client := c.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{}}
	}
	resp, err := client.Get(origin + Prefix + "/openapi.json")
	if err != nil {
		return nil, fmt.Errorf("fetch the OpenAPI description: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch the OpenAPI description: status %d, %v", resp.StatusCode, err)
	}
	d, err := Parse(b)
	if err != nil {
		return nil, err
	}
	if c.byID == nil {
		c.byID = map[string]*Description{}
	}
	c.byID[origin] = d
	return d, nil
}

// Answer says what is wrong with an answer to method at rawURL, or "" when its server's
// description lists it. Answers from outside /api/v2, and the description itself, are not
// described by it.
func (c *Checker) Answer(method, rawURL string, status int, header http.Header, body []byte) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Sprintf("check the answer to %s: %v", rawURL, err)
	}
	if !strings.HasPrefix(u.Path, Prefix+"/") || strings.HasPrefix(u.Path, Prefix+"/openapi") ||
		strings.HasPrefix(u.Path, Prefix+"/schemas/") {
		return ""
	}
	d, err := c.Described(u.Scheme + "://" + u.Host)
	if err != nil {
		return fmt.Sprintf("%s %s: %v", method, u.Path, err)
	}
	return d.Check(method, u.EscapedPath(), status, header, body)
}

// Transport is an http.RoundTripper that checks every answer it carries and reports each
// complaint; the body is read whole and handed on unchanged.
type Transport struct {
	Base    http.RoundTripper // nil means http.DefaultTransport
	Checker *Checker
	Report  func(complaint string)
}

// RoundTrip sends req and checks the answer.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read the answer to %s %s: %w", req.Method, req.URL, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if msg := t.Checker.Answer(req.Method, req.URL.String(), resp.StatusCode, resp.Header, body); msg != "" {
		t.Report(msg)
	}
	return resp, nil
}
