package template

import (
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/veritrail/veritrail/policies/yamlschema"
)

// fieldTemplateFile is the field that YAML syntax errors and whole-document problems are reported on: the name of
// the multipart part a template arrives in.
const fieldTemplateFile = FieldTemplateFile

// FieldTemplateFile is the field of a problem of the whole template (see ValidationError).
const FieldTemplateFile = "template_file"

// ValidationError lists every problem of a template with its location. Fields maps a path such as
// "trail.attestations[0].type" (or "template_file" for YAML syntax errors and problems of the whole document) to a
// human sentence, which ends with the line and column in the YAML where they are known. Problems holds the same
// problems one by one with their positions apart, for tools that show them as FILE:LINE:COL (veritrail policy lint).
type ValidationError struct {
	Fields   map[string]string
	Problems []yamlschema.Problem
}

// Error names every field and the count of errors:
// "template_file is invalid: 2 errors: trail.attestations[0].type: ...; trail.artifacts[1].name: ...".
func (e *ValidationError) Error() string {
	ps := make([]yamlschema.Problem, 0, len(e.Fields))
	for f, msg := range e.Fields {
		ps = append(ps, yamlschema.Problem{Field: f, Message: msg})
	}
	return fieldTemplateFile + " is invalid: " + yamlschema.Summary(ps)
}

func fieldError(field, msg string) *ValidationError {
	return fieldErrorAt(field, msg, 0, 0)
}

// fieldErrorAt is fieldError for a problem at a known line and column (0: unknown). Fields says the position in
// the message; Problems holds it apart.
func fieldErrorAt(field, msg string, line, col int) *ValidationError {
	ps := []yamlschema.Problem{{Field: field, Message: msg, Line: line, Column: col}}
	return &ValidationError{Fields: map[string]string{field: msg}, Problems: ps}
}

//go:embed flow-template.schema.json
var schemaJSON []byte

// flowTemplateSchema is the compiled copy of /work/shared/reference/flow-template.schema.json.
var flowTemplateSchema = sync.OnceValue(func() *jsonschema.Schema {
	s, err := yamlschema.CompileSchema("https://docs.kosli.com/schemas/flow-template/v1", schemaJSON)
	if err != nil {
		panic("policies/template: embedded schema: " + err.Error())
	}
	return s
})

// attestationTypes is how the schema's allowed attestation types read in messages.
const attestationTypes = "generic, junit, snyk, pull_request, jira, sonar, decision, * or custom:<type-name>"

var hints = yamlschema.Hints{Root: fieldTemplateFile, KnownFields: knownFields, AnyOf: anyOfMessage}

// validator collects every problem of one document.
type validator struct {
	*yamlschema.Validator
}

func newValidator(doc *yamlschema.Document) *validator {
	return &validator{yamlschema.NewValidator(doc, hints)}
}

func (v *validator) err() error {
	if len(v.Problems()) == 0 {
		return nil
	}
	return &ValidationError{Fields: yamlschema.Fields(v.Problems()), Problems: v.Problems()}
}

// checkSchema validates the document against the flow-template schema and records each error at its field.
func (v *validator) checkSchema() { v.Schema(flowTemplateSchema(), nil) }

// anyOfMessage words a bad attestation type.
func anyOfMessage(loc []string, got any) string {
	if n := len(loc); n >= 3 && loc[n-1] == "type" && loc[n-3] == "attestations" {
		if s, ok := got.(string); ok {
			return fmt.Sprintf("%q is not a supported attestation type; use one of %s", s, attestationTypes)
		}
		return "must be a string naming the attestation type: one of " + attestationTypes
	}
	return ""
}

func knownFields(loc []string) string {
	switch {
	case len(loc) == 0:
		return "; a template has version and trail"
	case len(loc) == 1 && loc[0] == "trail":
		return "; a trail has attestations and artifacts"
	case len(loc) >= 2 && loc[len(loc)-2] == "artifacts":
		return "; an artifact has name and attestations"
	case len(loc) >= 2 && loc[len(loc)-2] == "attestations":
		return "; an attestation has name and type"
	}
	return ""
}

// checkNames records the rules the schema cannot express: names are not empty, attestation names are unique
// within one level, artifact names are unique. It tolerates documents that failed the schema.
func (v *validator) checkNames() {
	doc, _ := v.ValueAt(nil).(map[string]any)
	trail, _ := doc["trail"].(map[string]any)
	v.uniqueNames(trail["attestations"], []string{"trail", "attestations"}, "attestation")
	v.uniqueNames(trail["artifacts"], []string{"trail", "artifacts"}, "artifact")
	arts, _ := trail["artifacts"].([]any)
	for i, a := range arts {
		m, _ := a.(map[string]any)
		v.uniqueNames(m["attestations"], []string{"trail", "artifacts", strconv.Itoa(i), "attestations"}, "attestation")
	}
}

func (v *validator) uniqueNames(list any, path []string, what string) {
	items, _ := list.([]any)
	first := map[string]int{}
	for i, it := range items {
		m, _ := it.(map[string]any)
		name, ok := m["name"].(string)
		if !ok {
			continue
		}
		at := append(slices.Clone(path), strconv.Itoa(i), "name")
		if strings.TrimSpace(name) == "" {
			v.Add(at, "must not be empty")
			continue
		}
		if j, dup := first[name]; dup {
			v.Add(at, fmt.Sprintf("duplicate %s name %q: already used by %s",
				what, name, v.FieldName(append(slices.Clone(path), strconv.Itoa(j)))))
			continue
		}
		first[name] = i
	}
}
