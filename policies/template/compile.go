package template

import (
	"bytes"
	_ "embed"
	"strings"
	texttemplate "text/template"

	"github.com/veritrail/veritrail/policies/rego"
	"github.com/veritrail/veritrail/policies/yamlschema"
)

// Package and query of every compiled flow template.
const (
	RegoPackage = "veritrail.flowtemplate"
	RegoQuery   = "data." + RegoPackage + ".result"
)

//go:embed template.rego.tmpl
var moduleSource string

var moduleTemplate = texttemplate.Must(texttemplate.New("template.rego").Parse(moduleSource))

// Compile returns the Rego module t becomes: its expectations as two constants, followed by the compliance rules
// shared by every template. The module is meant to be read; RegoQuery evaluates it. A template built by hand (not
// by Parse) is validated first.
func Compile(t *Template) (module string, err error) {
	if t == nil {
		t = emptyTemplate
	}
	if err := validateSpec(t.Trail); err != nil {
		return "", err
	}
	version := t.Version
	if version == 0 {
		version = 1
	}
	var b bytes.Buffer
	err = moduleTemplate.Execute(&b, map[string]any{
		"ID":                t.key(),
		"Version":           version,
		"TrailAttestations": expectedLiteral(t.Trail.Attestations, "\t"),
		"Artifacts":         artifactsLiteral(t.Trail.Artifacts),
	})
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// validateSpec checks a spec that may not come from Parse against the same rules.
func validateSpec(s TrailSpec) error {
	doc := map[string]any{"version": 1, "trail": map[string]any{
		"attestations": expectedJSON(s.Attestations),
		"artifacts": func() []any {
			out := make([]any, len(s.Artifacts))
			for i, a := range s.Artifacts {
				out[i] = map[string]any{"name": a.Name, "attestations": expectedJSON(a.Attestations)}
			}
			return out
		}(),
	}}
	v := newValidator(&yamlschema.Document{Value: doc})
	v.checkSchema()
	v.checkNames()
	return v.err()
}

func expectedJSON(es []Expected) []any {
	out := make([]any, len(es))
	for i, e := range es {
		out[i] = map[string]any{"name": e.Name, "type": e.Type}
	}
	return out
}

// expectedLiteral renders expectations as a Rego array, one per line.
func expectedLiteral(es []Expected, indent string) string {
	if len(es) == 0 {
		return "[]"
	}
	var b strings.Builder
	b.WriteString("[\n")
	for _, e := range es {
		b.WriteString(indent + `{"name": ` + rego.Quote(e.Name) + `, "type": ` + rego.Quote(e.Type) + "},\n")
	}
	b.WriteString(indent[:len(indent)-1] + "]")
	return b.String()
}

func artifactsLiteral(as []ExpectedArtifact) string {
	if len(as) == 0 {
		return "[]"
	}
	var b strings.Builder
	b.WriteString("[\n")
	for _, a := range as {
		b.WriteString("\t{\"name\": " + rego.Quote(a.Name) + ", \"attestations\": " +
			expectedLiteral(a.Attestations, "\t\t") + "},\n")
	}
	b.WriteString("]")
	return b.String()
}
