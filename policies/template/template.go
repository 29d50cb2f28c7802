package template

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxContentSize is the largest template Parse accepts (the API's limit for a template_file part).
const MaxContentSize = 10 << 20

// Template is a parsed, validated flow template. Its JSON form is the `template` object of a trail response
// ({version, trail: {attestations, artifacts}, content}).
type Template struct {
	// ID identifies this template version: the first 32 hex characters of the SHA-256 of its normalized content
	// (the canonical JSON of Version and Trail), so templates that differ only in comments, layout or key order
	// share an ID, and so share one prepared query.
	ID string `json:"-"`
	// Content is the raw YAML as uploaded.
	Content string `json:"content"`
	// Version is the template's `version:` (always 1 today; 1 when absent).
	Version int       `json:"version"`
	Trail   TrailSpec `json:"trail"`
}

// TrailSpec is what a trail needs. Slices are never nil in a parsed template.
type TrailSpec struct {
	Attestations []Expected         `json:"attestations"`
	Artifacts    []ExpectedArtifact `json:"artifacts"`
}

// Expected is one required attestation. Type is as written in the template: generic, junit, snyk, pull_request,
// jira, sonar, custom:<name>, decision, or * (any type).
type Expected struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// ExpectedArtifact is an artifact the trail must produce, with the attestations it needs.
type ExpectedArtifact struct {
	Name         string     `json:"name"`
	Attestations []Expected `json:"attestations"`
}

// Parse validates content against the flow-template JSON Schema and the rules the schema cannot express (names are
// not empty, and unique among the attestations of one level and among the artifacts), and returns the template.
// Empty content, a document holding only comments or null, `version: 1` alone, and `trail: null` are valid empty
// templates. Every problem is reported at once in a *ValidationError.
func Parse(content []byte) (*Template, error) {
	if len(content) > MaxContentSize {
		return nil, fieldError(fieldTemplateFile,
			fmt.Sprintf("is %d bytes; a template may be at most %d bytes", len(content), MaxContentSize))
	}
	root, err := decodeYAML(content)
	if err != nil {
		return nil, err
	}
	var doc any
	if root != nil {
		if err := root.Decode(&doc); err != nil {
			return nil, fieldError(fieldTemplateFile, "is not valid YAML: "+yamlMessage(err, content))
		}
	}
	if doc == nil { // empty content, comments only, or a null document
		doc = map[string]any{}
	}
	doc = toJSONValue(doc)

	v := newValidator(root, doc)
	v.checkSchema()
	v.checkNames()
	if err := v.err(); err != nil {
		return nil, err
	}

	t := &Template{Content: string(content), Version: 1, Trail: specFrom(doc.(map[string]any))}
	t.ID = t.Trail.id(t.Version)
	return t, nil
}

// decodeYAML returns the root node of the single YAML document in content, or nil when there is none.
func decodeYAML(content []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fieldError(fieldTemplateFile, "is not valid YAML: "+yamlMessage(err, content))
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, fieldError(fieldTemplateFile, "is not valid YAML: "+yamlMessage(err, content))
	default:
		return nil, fieldError(fieldTemplateFile,
			fmt.Sprintf("must hold a single YAML document; another one starts at line %d", extra.Line))
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// yamlMessage is a YAML library error without its "yaml: " prefix, on one line, with a line number wherever one
// can be found. (gopkg.in/yaml.v3 reports lines, not columns, and leaves out "line 1".)
func yamlMessage(err error, content []byte) string {
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) {
		msg = strings.Join(te.Errors, "; ")
	}
	msg = strings.ReplaceAll(strings.TrimPrefix(msg, "yaml: "), "\n", " ")
	if strings.HasPrefix(msg, "line ") {
		return msg
	}
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		if line, col, ok := findAlias(content, m[1]); ok {
			return fmt.Sprintf("line %d, column %d: %s", line, col, msg)
		}
		return msg
	}
	for _, s := range positionless {
		if strings.Contains(msg, s) {
			return msg
		}
	}
	// The scanner and parser only leave the line out when it is the first one.
	return "line 1: " + msg
}

var unknownAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// positionless are the YAML errors that carry no position at all.
var positionless = []string{"exceeded max depth", "excessive aliasing", "contains itself", "already defined"}

// findAlias returns the 1-based line and column of the first "*name" alias in content.
func findAlias(content []byte, name string) (line, col int, ok bool) {
	re := regexp.MustCompile(`\*` + regexp.QuoteMeta(name) + `(?:[\s,\]}]|$)`)
	loc := re.FindIndex(content)
	if loc == nil {
		return 0, 0, false
	}
	before := content[:loc[0]]
	line = bytes.Count(before, []byte("\n")) + 1
	col = loc[0] - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col, true
}

// specFrom builds the trail spec of a schema-valid document.
func specFrom(doc map[string]any) TrailSpec {
	spec := TrailSpec{Attestations: []Expected{}, Artifacts: []ExpectedArtifact{}}
	trail, _ := doc["trail"].(map[string]any)
	spec.Attestations = expectedFrom(trail["attestations"])
	arts, _ := trail["artifacts"].([]any)
	for _, a := range arts {
		m, _ := a.(map[string]any)
		name, _ := m["name"].(string)
		spec.Artifacts = append(spec.Artifacts, ExpectedArtifact{Name: name, Attestations: expectedFrom(m["attestations"])})
	}
	return spec
}

func expectedFrom(v any) []Expected {
	items, _ := v.([]any)
	out := make([]Expected, 0, len(items))
	for _, it := range items {
		m, _ := it.(map[string]any)
		name, _ := m["name"].(string)
		typ, _ := m["type"].(string)
		out = append(out, Expected{Name: name, Type: typ})
	}
	return out
}

// id is the hex SHA-256 (first 32 characters) of the canonical JSON of the template's meaning.
func (s TrailSpec) id(version int) string {
	norm := struct {
		Version int       `json:"version"`
		Trail   TrailSpec `json:"trail"`
	}{version, s.normalized()}
	b, err := json.Marshal(norm)
	if err != nil { // cannot happen: only strings, ints and slices
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:32]
}

// normalized returns s with nil slices made empty, so a hand-built spec hashes like the parsed one.
func (s TrailSpec) normalized() TrailSpec {
	out := TrailSpec{Attestations: nonNil(s.Attestations), Artifacts: make([]ExpectedArtifact, len(s.Artifacts))}
	for i, a := range s.Artifacts {
		out.Artifacts[i] = ExpectedArtifact{Name: a.Name, Attestations: nonNil(a.Attestations)}
	}
	return out
}

func nonNil(e []Expected) []Expected {
	if e == nil {
		return []Expected{}
	}
	return e
}

// emptyTemplate is what Evaluate uses for a nil template: nothing expected.
var emptyTemplate = func() *Template {
	t := &Template{Version: 1, Trail: TrailSpec{Attestations: []Expected{}, Artifacts: []ExpectedArtifact{}}}
	t.ID = t.Trail.id(1)
	return t
}()

// key is the cache key of t: its ID, or the ID its spec would have when t was built by hand without one; a nil
// template is the empty one.
func (t *Template) key() string {
	if t == nil {
		return emptyTemplate.ID
	}
	if t.ID != "" {
		return t.ID
	}
	v := t.Version
	if v == 0 {
		v = 1
	}
	return t.Trail.id(v)
}
