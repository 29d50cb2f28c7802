package envpolicy

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/policies/yamlschema"
)

const schemaLine = "_schema: https://kosli.com/schemas/policy/environment/v1\n"

func mustParse(t testing.TB, content string) *Policy {
	t.Helper()
	p, err := Parse([]byte(content), ParseOptions{})
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, content)
	}
	return p
}

func problems(t *testing.T, err error) []yamlschema.Problem {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	if len(ve.Problems) == 0 {
		t.Fatal("ValidationError without problems")
	}
	return ve.Problems
}

// The shared examples (copies of /work/shared/reference/examples/policies).
func TestParseExamples(t *testing.T) {
	files, _ := filepath.Glob("testdata/policies/*.yml")
	if len(files) != 2 {
		t.Fatalf("found %d example policies, want 2", len(files))
	}
	for _, f := range files {
		content, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		known := func(id string) bool { return id == "assert-artifact-ctl" }
		p, err := Parse(content, ParseOptions{ControlExists: known})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(p.ID) || p.Kind != KindYAML || p.Content != string(content) {
			t.Errorf("%s: %+v", f, p)
		}
		if !p.Rules.Provenance.Required {
			t.Errorf("%s: provenance not required", f)
		}
		switch filepath.Base(f) {
		case "test-policy.yml":
			if !p.Rules.TrailCompliance.Required || len(p.Rules.Attestations) != 0 {
				t.Errorf("rules = %+v", p.Rules)
			}
		case "test-policy-for-control.yml":
			want := AttestationRule{Name: "decision", Type: "decision", MustBeCompliant: true, ForControl: "assert-artifact-ctl"}
			if len(p.Rules.Attestations) != 1 || p.Rules.Attestations[0] != want {
				t.Errorf("rules = %+v", p.Rules)
			}
			_, err := Parse(content, ParseOptions{ControlExists: func(string) bool { return false }})
			ps := problems(t, err)
			if ps[0].Field != "artifacts.attestations[0].for_control" || ps[0].Message != "control 'assert-artifact-ctl' does not exist" ||
				ps[0].Line != 9 || ps[0].Column != 20 {
				t.Errorf("unknown control: %+v", ps)
			}
		}
	}
}

func TestParseDefaults(t *testing.T) {
	p := mustParse(t, schemaLine+`artifacts:
  attestations:
    - type: junit
    - name: snyk
      type: snyk
      must_be_compliant: false
      if: ${{ flow.tags.risk-level == "high" }}
    - name: pr
      type: pull_request
      if:
        text: flow.name in ["a", "b"]
`)
	if p.Rules.Provenance.Required || p.Rules.TrailCompliance.Required {
		t.Errorf("provenance and trail-compliance default to not required: %+v", p.Rules)
	}
	atts := p.Rules.Attestations
	if len(atts) != 3 {
		t.Fatalf("attestations = %+v", atts)
	}
	if atts[0].Name != "*" || !atts[0].MustBeCompliant || atts[0].If != nil || atts[0].ForControl != "" {
		t.Errorf("defaults = %+v", atts[0])
	}
	if atts[1].MustBeCompliant || atts[1].If == nil || atts[1].If.String() != `${{ flow.tags.risk-level == "high" }}` {
		t.Errorf("snyk = %+v", atts[1])
	}
	if atts[2].If == nil || atts[2].If.String() != `${{ flow.name in ["a", "b"] }}` {
		t.Errorf("{text: ...} form = %+v", atts[2])
	}
	if empty := mustParse(t, schemaLine); len(empty.Rules.Attestations) != 0 || empty.Rules.Provenance.Required {
		t.Errorf("empty policy = %+v", empty.Rules)
	}
}

// The ID names what a policy means: layout, comments, defaults written out and expression spelling do not change
// it; a rule does.
func TestPolicyID(t *testing.T) {
	a := mustParse(t, schemaLine+`artifacts:
  provenance: {required: true}
  attestations:
    - {type: junit, if: "${{ flow.name=='x' }}"}
`)
	b := mustParse(t, "# the same policy\n"+schemaLine+`artifacts:
  provenance:
    required: true
    exceptions: []
  trail-compliance:
    required: false
  attestations:
    - name: "*"
      type: junit
      must_be_compliant: true
      if: {text: 'flow.name == "x"'}
`)
	c := mustParse(t, schemaLine+`artifacts:
  provenance: {required: true}
  attestations:
    - {type: junit, if: "${{ flow.name=='y' }}"}
`)
	if a.ID != b.ID {
		t.Errorf("same meaning, different IDs: %s %s", a.ID, b.ID)
	}
	if a.ID == c.ID {
		t.Error("different conditions share an ID")
	}
	again := mustParse(t, string(a.Canonical()))
	if again.ID != a.ID {
		t.Errorf("canonical form changes the ID:\n%s", a.Canonical())
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, content string
		field, msg    string // the first problem: its field and a part of its message
		line, column  int
		count         int // problems expected (0: 1)
	}{
		{"syntax", schemaLine + "artifacts:\n  provenance: {required: true\n", FieldPolicyFile, "is not valid YAML: did not find expected ',' or '}'", 2, 0, 0},
		{"two documents", schemaLine + "---\n" + schemaLine, FieldPolicyFile, "must hold a single YAML document; another one starts at line 2", 2, 0, 0},
		{"no schema", "artifacts: {}\n", "_schema", "is required", 1, 1, 0},
		{"empty", "", "_schema", "is required", 0, 0, 0},
		{"not a map", "- a\n", FieldPolicyFile, "must be an object (got an array)", 1, 1, 0},
		{"schema v2", "_schema: https://kosli.com/schemas/policy/environment/v2\n", "_schema", "version v2 is not supported; the only version is v1", 1, 10, 0},
		{"schema no version", "_schema: https://kosli.com/schemas/policy\n", "_schema", "must end with /v{n}", 1, 10, 0},
		{"schema not a URL", "_schema: policy-v1\n", "_schema", "must be the URL of the policy schema", 1, 10, 0},
		{"unknown field", schemaLine + "rules: []\n", "rules", "is not a known field; a policy has _schema and artifacts", 2, 1, 0},
		{"unknown rule", schemaLine + "artifacts:\n  approvals: {}\n", "artifacts.approvals", "artifacts has provenance, trail-compliance and attestations", 3, 3, 0},
		{"required not bool", schemaLine + "artifacts:\n  provenance:\n    required: yes please\n", "artifacts.provenance.required", "must be a boolean (got a string)", 4, 15, 0},
		{"bad type", schemaLine + "artifacts:\n  attestations:\n    - {name: x, type: sbom}\n", "artifacts.attestations[0].type",
			`"sbom" is not a supported attestation type; use one of generic, junit, snyk, pull_request, jira, sonar, decision, * or custom:<type-name>`, 4, 23, 0},
		{"no type", schemaLine + "artifacts:\n  attestations:\n    - name: x\n", "artifacts.attestations[0].type", "is required", 4, 7, 0},
		{"unknown attestation field", schemaLine + "artifacts:\n  attestations:\n    - {type: junit, compliant: true}\n", "artifacts.attestations[0].compliant",
			"an attestation rule has name, type, if, must_be_compliant and for_control", 4, 21, 0},
		{"empty name", schemaLine + "artifacts:\n  attestations:\n    - {name: '', type: junit}\n", "artifacts.attestations[0].name", "must not be empty", 4, 14, 0},
		{"bad expression", schemaLine + "artifacts:\n  attestations:\n    - type: junit\n      if: ${{ flow.nam == \"a\" }}\n",
			"artifacts.attestations[0].if", "column 5: unknown field 'flow.nam'", 5, 15, 0},
		{"bad expression quoted", schemaLine + "artifacts:\n  attestations:\n    - type: junit\n      if: \"${{ flow.name == 'a' and }}\"\n",
			"artifacts.attestations[0].if", "column 26: the expression ends where a value was expected", 5, 37, 0},
		{"bad expression object", schemaLine + "artifacts:\n  attestations:\n    - type: junit\n      if: {text: 'flow.name'}\n",
			"artifacts.attestations[0].if", "column 1: flow.name is a string, not a condition", 5, 19, 0},
		{"bad expression folded", schemaLine + "artifacts:\n  attestations:\n    - type: junit\n      if: >-\n        flow.name ==\n        3 3\n",
			"artifacts.attestations[0].if", "column 16: expected an operator", 5, 11, 0},
		{"if a number", schemaLine + "artifacts:\n  attestations:\n    - {type: junit, if: 5}\n", "artifacts.attestations[0].if",
			`must be an expression such as ${{ flow.name == "backend" }}, not number`, 4, 25, 0},
		{"exception expression", schemaLine + "artifacts:\n  trail-compliance:\n    required: true\n    exceptions:\n      - if: ${{ matches(artifact.name, \"(\") }}\n",
			"artifacts.trail-compliance.exceptions[0].if", "column 28: invalid regular expression: missing closing )", 6, 40, 0},
		{"exception without if", schemaLine + "artifacts:\n  provenance:\n    required: true\n    exceptions:\n      - {}\n",
			"artifacts.provenance.exceptions[0]", "an exception needs an if", 6, 9, 0},
		{"exception null if", schemaLine + "artifacts:\n  provenance:\n    exceptions:\n      - if: null\n",
			"artifacts.provenance.exceptions[0]", "an exception needs an if", 5, 9, 0},
		{"for_control not decision", schemaLine + "artifacts:\n  attestations:\n    - {type: snyk, for_control: ctl}\n",
			"artifacts.attestations[0].for_control", `is only valid with type: decision (this rule has type "snyk")`, 4, 33, 0},
		{"for_control empty", schemaLine + "artifacts:\n  attestations:\n    - {type: decision, for_control: ' '}\n",
			"artifacts.attestations[0].for_control", "must name a control", 4, 37, 0},
		{"many", "artifacts:\n  attestations:\n    - {type: sbom, if: flow}\n    - {}\n", "_schema", "is required", 1, 1, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.content), ParseOptions{})
			ps := problems(t, err)
			want := max(tc.count, 1)
			if len(ps) != want {
				t.Errorf("%d problems, want %d: %+v", len(ps), want, ps)
			}
			var p *yamlschema.Problem
			for i := range ps {
				if ps[i].Field == tc.field {
					p = &ps[i]
					break
				}
			}
			if p == nil {
				t.Fatalf("no problem at %s: %+v", tc.field, ps)
			}
			if !strings.Contains(p.Message, tc.msg) || p.Line != tc.line || p.Column != tc.column {
				t.Errorf("got %q at %d:%d, want %q at %d:%d", p.Message, p.Line, p.Column, tc.msg, tc.line, tc.column)
			}
			if !strings.HasPrefix(err.Error(), FieldPolicyFile+" is invalid: ") || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Error() = %s", err)
			}
		})
	}
}

func TestParseTooLarge(t *testing.T) {
	_, err := Parse(make([]byte, MaxContentSize+1), ParseOptions{})
	if ps := problems(t, err); !strings.Contains(ps[0].Message, "may be at most") {
		t.Errorf("%+v", ps)
	}
}

// FuzzParsePolicy: Parse never panics; a policy it accepts compiles to Rego that parses, and its canonical form
// parses to a policy with the same ID.
func FuzzParsePolicy(f *testing.F) {
	files, _ := filepath.Glob("testdata/policies/*.yml")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add(schemaLine + "artifacts:\n  attestations:\n    - {name: snyk, type: snyk, if: '${{ flow.tags.a.b-c >= 2 }}'}\n")
	f.Add(schemaLine + "artifacts:\n  provenance: {required: true, exceptions: [{if: {text: 'not exists(flow)'}}]}\n")
	f.Add("a: &x [*x]\n")
	f.Add("_schema: 1\nartifacts: {attestations: [{type: decision, for_control: ''}]}")
	f.Fuzz(func(t *testing.T, content string) {
		p, err := Parse([]byte(content), ParseOptions{})
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("error %v is not a *ValidationError with problems", err)
			}
			return
		}
		if _, err := Compile(p); err != nil {
			t.Fatalf("Compile: %v", err)
		}
		again, err := Parse(p.Canonical(), ParseOptions{})
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, p.Canonical())
		}
		if again.ID != p.ID {
			t.Fatalf("canonical form has another ID:\n%s", p.Canonical())
		}
	})
}
