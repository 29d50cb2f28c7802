package template

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/veritrail/veritrail/policies/yamlschema"
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
	doc, err := yamlschema.Decode(content)
	if err != nil {
		var se *yamlschema.SyntaxError
		if errors.As(err, &se) && !se.Documents {
			// The message keeps the position (the API shows Fields alone); Problems holds it apart too.
			e := fieldErrorAt(fieldTemplateFile, "is not valid YAML: "+se.Error(), se.Line, se.Column)
			e.Problems[0].Message = "is not valid YAML: " + se.Message
			return nil, e
		}
		line := 0
		if se != nil {
			line = se.Line
		}
		return nil, fieldErrorAt(fieldTemplateFile, err.Error(), line, 0)
	}
	if doc.Value == nil { // empty content, comments only, or a null document
		doc.Value = map[string]any{}
	}

	v := newValidator(doc)
	v.checkSchema()
	v.checkNames()
	if err := v.err(); err != nil {
		return nil, err
	}

	t := &Template{Content: string(content), Version: 1, Trail: specFrom(doc.Value.(map[string]any))}
	t.ID = t.Trail.id(t.Version)
	return t, nil
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
