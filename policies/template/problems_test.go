package template

import (
	"errors"
	"testing"

	"github.com/veritrail/veritrail/policies/yamlschema"
)

// TestValidationErrorProblems: beside Fields (the API's wording, positions in the message), a ValidationError holds
// each problem with its position apart, for FILE:LINE:COL.
func TestValidationErrorProblems(t *testing.T) {
	for _, tc := range []struct {
		content string
		want    []yamlschema.Problem
	}{
		{"version: 1\ntrail:\n  attestations:\n    - {name: a, type: nope}\n", []yamlschema.Problem{
			{Field: "trail.attestations[0].type", Line: 4, Column: 23}}},
		{"version: 1\ntrail: [\n", []yamlschema.Problem{
			{Field: FieldTemplateFile, Message: "is not valid YAML: did not find expected node content", Line: 2}}},
		{"version: 1\n---\nversion: 1\n", []yamlschema.Problem{
			{Field: FieldTemplateFile, Message: "must hold a single YAML document; another one starts at line 2", Line: 2}}},
	} {
		_, err := Parse([]byte(tc.content))
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != len(tc.want) {
			t.Errorf("%q: %v", tc.content, err)
			continue
		}
		for i, w := range tc.want {
			g := ve.Problems[i]
			if g.Field != w.Field || g.Line != w.Line || g.Column != w.Column || (w.Message != "" && g.Message != w.Message) {
				t.Errorf("%q: problem %+v, want %+v", tc.content, g, w)
			}
		}
		if _, ok := ve.Fields[tc.want[0].Field]; !ok {
			t.Errorf("%q: Fields %v lack %s", tc.content, ve.Fields, tc.want[0].Field)
		}
	}
}
