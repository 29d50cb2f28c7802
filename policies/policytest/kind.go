package policytest

import (
	"errors"
	"fmt"
	"os"

	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/template"
	"github.com/veritrail/veritrail/policies/yamlschema"
)

// Kind is what an author's file holds: an environment policy or a flow template.
type Kind string

// The kinds of file the policy tools read.
const (
	KindPolicy   Kind = "policy"
	KindTemplate Kind = "template"
)

// ParseKind reads a --kind value: policy, template, or "" (recognise each file by its shape).
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case "", KindPolicy, KindTemplate:
		return k, nil
	}
	return "", fmt.Errorf("kind %q: want policy or template", s)
}

// KindOf recognises a file by its shape: a .rego file is a policy; a YAML document with version or trail at the
// top and no _schema is a flow template; anything else (including YAML that does not parse) is a policy, whose
// checks then say what is wrong with it.
func KindOf(file string, content []byte) Kind {
	if IsRego(file) {
		return KindPolicy
	}
	doc, err := yamlschema.Decode(content)
	if err != nil {
		return KindPolicy
	}
	top, ok := doc.Value.(map[string]any)
	if !ok {
		return KindPolicy
	}
	if _, ok := top["_schema"]; ok {
		return KindPolicy
	}
	_, version := top["version"]
	_, trail := top["trail"]
	if version || trail {
		return KindTemplate
	}
	return KindPolicy
}

// LoadTemplate parses a flow template file. A *template.ValidationError comes back as it is, for its problems.
func LoadTemplate(file string) (*template.Template, error) {
	content, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return template.Parse(content)
}

// Problems returns the problems of a validation error of a policy or a template, as they were found; nil when err
// is another error.
func Problems(err error) []yamlschema.Problem {
	var pe *envpolicy.ValidationError
	if errors.As(err, &pe) {
		return pe.Problems
	}
	var te *template.ValidationError
	if errors.As(err, &te) {
		return te.Problems
	}
	return nil
}

// FieldWhole reports whether field names the whole file (policy_file, template_file) rather than a field in it.
func FieldWhole(field string) bool {
	return field == envpolicy.FieldPolicyFile || field == template.FieldTemplateFile
}
