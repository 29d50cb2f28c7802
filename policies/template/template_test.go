package template

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// examplesDir holds copies of the shared reference examples (/work/shared/reference/examples): the flow templates
// and real trail responses of the hosted service.
const examplesDir = "testdata"

func readExample(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examplesDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t testing.TB, content string) *Template {
	t.Helper()
	tpl, err := Parse([]byte(content))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return tpl
}

func validationFields(t *testing.T, err error) map[string]string {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	if len(ve.Fields) == 0 {
		t.Fatal("ValidationError without fields")
	}
	return ve.Fields
}

func TestParseExamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(examplesDir, "templates", "*.yml"))
	if len(files) != 4 {
		t.Fatalf("found %d example templates, want 4", len(files))
	}
	tests := map[string]struct {
		wantErrFields []string // nil: valid
		attestations  int
		artifacts     int
	}{
		"invalid_template.yml":      {wantErrFields: []string{"trail.attestations[0].type"}},
		"valid_template.yml":        {attestations: 1, artifacts: 1},
		"main-flow-template.yml":    {attestations: 7, artifacts: 1},
		"release-flow-template.yml": {attestations: 3, artifacts: 14},
	}
	for _, f := range files {
		name := filepath.Base(f)
		tc, ok := tests[name]
		if !ok {
			t.Errorf("no expectation for example %s", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			content, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			tpl, err := Parse(content)
			if tc.wantErrFields != nil {
				fields := validationFields(t, err)
				for _, f := range tc.wantErrFields {
					if _, ok := fields[f]; !ok {
						t.Errorf("fields %v do not name %s", fields, f)
					}
				}
				if len(fields) != len(tc.wantErrFields) {
					t.Errorf("fields = %v, want exactly %v", fields, tc.wantErrFields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tpl.Version != 1 || tpl.Content != string(content) {
				t.Errorf("Version %d, content kept %v", tpl.Version, tpl.Content == string(content))
			}
			if len(tpl.Trail.Attestations) != tc.attestations || len(tpl.Trail.Artifacts) != tc.artifacts {
				t.Errorf("got %d attestations, %d artifacts; want %d, %d",
					len(tpl.Trail.Attestations), len(tpl.Trail.Artifacts), tc.attestations, tc.artifacts)
			}
			if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(tpl.ID) {
				t.Errorf("ID %q is not 32 hex characters", tpl.ID)
			}
		})
	}
}

func TestParseInvalidTemplateMessage(t *testing.T) {
	_, err := Parse(readExample(t, "templates/invalid_template.yml"))
	fields := validationFields(t, err)
	want := `"not-supported" is not a supported attestation type; use one of generic, junit, snyk, pull_request, jira, ` +
		`sonar, decision, * or custom:<type-name> (line 5, column 11)`
	if got := fields["trail.attestations[0].type"]; got != want {
		t.Errorf("message\n got %s\nwant %s", got, want)
	}
	if got, want := err.Error(), "template_file is invalid: 1 error: trail.attestations[0].type: "+want; got != want {
		t.Errorf("Error()\n got %s\nwant %s", got, want)
	}
}

func TestParseValid(t *testing.T) {
	empty := TrailSpec{Attestations: []Expected{}, Artifacts: []ExpectedArtifact{}}
	tests := []struct {
		name    string
		content string
		want    TrailSpec
	}{
		{"empty content", "", empty},
		{"whitespace", "  \n\n", empty},
		{"comments only", "# nothing yet\n", empty},
		{"null document", "~\n", empty},
		{"version alone", "version: 1\n", empty},
		{"trail null", "version: 1\ntrail: null\n", empty},
		{"trail empty", "trail:\n", empty},
		{"empty lists", "trail:\n  attestations: []\n  artifacts: []\n", empty},
		{"no version", "trail:\n  attestations:\n  - {name: a, type: generic}\n",
			TrailSpec{Attestations: []Expected{{"a", "generic"}}, Artifacts: []ExpectedArtifact{}}},
		{"every type", `
trail:
  attestations:
  - {name: a, type: generic}
  - {name: b, type: junit}
  - {name: c, type: snyk}
  - {name: d, type: pull_request}
  - {name: e, type: jira}
  - {name: f, type: sonar}
  - {name: g, type: "custom:four-eyes"}
  - {name: h, type: decision}
  - {name: i, type: "*"}
  artifacts:
  - name: x
  - name: y
    attestations:
    - {name: a, type: generic}
`, TrailSpec{
			Attestations: []Expected{{"a", "generic"}, {"b", "junit"}, {"c", "snyk"}, {"d", "pull_request"},
				{"e", "jira"}, {"f", "sonar"}, {"g", "custom:four-eyes"}, {"h", "decision"}, {"i", "*"}},
			Artifacts: []ExpectedArtifact{{Name: "x", Attestations: []Expected{}},
				{Name: "y", Attestations: []Expected{{"a", "generic"}}}},
		}},
		{"same name at different levels", `
trail:
  attestations: [{name: sbom, type: generic}]
  artifacts:
  - {name: a, attestations: [{name: sbom, type: generic}]}
  - {name: b, attestations: [{name: sbom, type: generic}]}
`, TrailSpec{Attestations: []Expected{{"sbom", "generic"}}, Artifacts: []ExpectedArtifact{
			{Name: "a", Attestations: []Expected{{"sbom", "generic"}}},
			{Name: "b", Attestations: []Expected{{"sbom", "generic"}}}}}},
		{"aliases", `
trail:
  artifacts:
  - {name: a, attestations: &sbom [{name: sbom, type: generic}]}
  - {name: b, attestations: *sbom}
`, TrailSpec{Attestations: []Expected{}, Artifacts: []ExpectedArtifact{
			{Name: "a", Attestations: []Expected{{"sbom", "generic"}}},
			{Name: "b", Attestations: []Expected{{"sbom", "generic"}}}}}},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tpl := mustParse(t, tc.content)
			if !reflect.DeepEqual(tpl.Trail, tc.want) {
				t.Errorf("Trail = %#v\nwant %#v", tpl.Trail, tc.want)
			}
			if tpl.Version != 1 {
				t.Errorf("Version = %d", tpl.Version)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    map[string]string // field -> substring of its message
	}{
		{"yaml syntax", "version: 1\ntrail:\n  attestations:\n  - name: 'x\n",
			map[string]string{"template_file": "is not valid YAML: line 4: found unexpected end of stream"}},
		{"yaml syntax on line 1", "a: b: c\n",
			map[string]string{"template_file": "line 1: mapping values are not allowed"}},
		{"yaml tab", "version: 1\n\ttrail: x\n",
			map[string]string{"template_file": "line 2: found a tab character"}},
		{"unknown alias", "version: 1\ntrail: *nope\n",
			map[string]string{"template_file": "line 2, column 8: unknown anchor 'nope' referenced"}},
		{"duplicate key", "version: 1\nversion: 1\n",
			map[string]string{"template_file": `line 2: mapping key "version" already defined at line 1`}},
		{"two documents", "version: 1\n---\nversion: 1\n",
			map[string]string{"template_file": "single YAML document; another one starts at line 2"}},
		{"not a mapping", "- a\n- b\n", map[string]string{"template_file": "must be an object (got an array) (line 1, column 1)"}},
		{"scalar document", "hello\n", map[string]string{"template_file": "must be an object (got a string)"}},
		{"version 2", "version: 2\n", map[string]string{"version": "must be 1 (got 2) (line 1, column 10)"}},
		{"version string", "version: \"1\"\n", map[string]string{"version": "must be an integer (got a string)"}},
		{"unknown top-level field", "version: 1\nflow: x\n",
			map[string]string{"flow": "is not a known field; a template has version and trail (line 2, column 1)"}},
		{"trail wrong type", "trail: [a]\n", map[string]string{"trail": "must be an object or null (got an array) (line 1, column 8)"}},
		{"unknown trail field", "trail:\n  artefacts: []\n",
			map[string]string{"trail.artefacts": "is not a known field; a trail has attestations and artifacts (line 2, column 3)"}},
		{"attestations not a list", "trail:\n  attestations: {name: a}\n",
			map[string]string{"trail.attestations": "must be an array (got an object)"}},
		{"invalid type", "trail:\n  attestations:\n  - name: a\n    type: SNYK\n",
			map[string]string{"trail.attestations[0].type": `"SNYK" is not a supported attestation type; use one of generic`}},
		{"type not a string", "trail:\n  attestations:\n  - name: a\n    type: 3\n",
			map[string]string{"trail.attestations[0].type": "must be a string naming the attestation type"}},
		{"missing name and type", "trail:\n  attestations:\n  - {}\n",
			map[string]string{"trail.attestations[0].name": "is required (line 3, column 5)", "trail.attestations[0].type": "is required"}},
		{"name not a string", "trail:\n  attestations:\n  - {name: [x], type: generic}\n",
			map[string]string{"trail.attestations[0].name": "must be a string (got an array)"}},
		{"unknown attestation field", "trail:\n  attestations:\n  - {name: a, type: generic, required: true}\n",
			map[string]string{"trail.attestations[0].required": "is not a known field; an attestation has name and type"}},
		{"artifact without name", "trail:\n  artifacts:\n  - attestations: []\n",
			map[string]string{"trail.artifacts[0].name": "is required"}},
		{"artifact attestation type", "trail:\n  artifacts:\n  - name: x\n    attestations:\n    - {name: a, type: bogus}\n",
			map[string]string{"trail.artifacts[0].attestations[0].type": `"bogus" is not a supported attestation type`}},
		{"duplicate trail attestation", "trail:\n  attestations:\n  - {name: lint, type: generic}\n  - {name: lint, type: junit}\n",
			map[string]string{"trail.attestations[1].name": `duplicate attestation name "lint": already used by trail.attestations[0] (line 4, column 12)`}},
		{"duplicate artifact", "trail:\n  artifacts:\n  - name: cli\n  - name: docs\n  - name: cli\n",
			map[string]string{"trail.artifacts[2].name": `duplicate artifact name "cli": already used by trail.artifacts[0] (line 5, column 11)`}},
		{"duplicate artifact attestation", "trail:\n  artifacts:\n  - name: cli\n    attestations:\n    - {name: sbom, type: generic}\n    - {name: sbom, type: generic}\n",
			map[string]string{"trail.artifacts[0].attestations[1].name": `duplicate attestation name "sbom": already used by trail.artifacts[0].attestations[0]`}},
		{"empty names", "trail:\n  attestations:\n  - {name: '', type: generic}\n  artifacts:\n  - name: ' '\n",
			map[string]string{"trail.attestations[0].name": "must not be empty", "trail.artifacts[0].name": "must not be empty"}},
		{"every problem at once", `version: 3
trail:
  attestations:
  - {name: a, type: nope}
  - {name: a, type: generic}
  artifacts:
  - {name: x}
  - {name: x, extra: 1}
`, map[string]string{
			"version":                    "must be 1",
			"trail.attestations[0].type": "is not a supported attestation type",
			"trail.attestations[1].name": "duplicate attestation name",
			"trail.artifacts[1].name":    "duplicate artifact name",
			"trail.artifacts[1].extra":   "is not a known field",
		}},
		{"too large", "#" + strings.Repeat("x", MaxContentSize), map[string]string{"template_file": "at most 10485760 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := Parse([]byte(tc.content))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", tpl)
			}
			fields := validationFields(t, err)
			for f, sub := range tc.want {
				if !strings.Contains(fields[f], sub) {
					t.Errorf("fields[%q] = %q, want it to contain %q", f, fields[f], sub)
				}
			}
			if len(fields) != len(tc.want) {
				t.Errorf("fields = %q, want only %v", fields, keys(tc.want))
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "template_file is invalid: ") {
				t.Errorf("Error() = %q", msg)
			}
			for f := range tc.want {
				if !strings.Contains(msg, f+": ") {
					t.Errorf("Error() = %q does not name %s", msg, f)
				}
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestValidationErrorCount(t *testing.T) {
	err := &ValidationError{Fields: map[string]string{"b": "second", "a": "first"}}
	if got, want := err.Error(), "template_file is invalid: 2 errors: a: first; b: second"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestTemplateID(t *testing.T) {
	a := mustParse(t, "version: 1\ntrail:\n  attestations:\n  - name: a\n    type: generic\n")
	b := mustParse(t, "# same requirements, other layout\ntrail: {attestations: [{type: generic, name: a}]}\n")
	c := mustParse(t, "trail: {attestations: [{name: a, type: junit}]}\n")
	if a.ID != b.ID {
		t.Errorf("same meaning, different IDs: %s %s", a.ID, b.ID)
	}
	if a.ID == c.ID {
		t.Errorf("different meaning, same ID %s", a.ID)
	}
	empties := []string{"", "version: 1\n", "trail: null\n", "trail:\n  attestations: []\n"}
	for _, e := range empties {
		if id := mustParse(t, e).ID; id != emptyTemplate.ID {
			t.Errorf("empty template %q has ID %s, want %s", e, id, emptyTemplate.ID)
		}
	}
	// A hand-built template keys like the parsed one.
	hand := &Template{Trail: TrailSpec{Attestations: []Expected{{"a", "generic"}}}}
	if hand.key() != a.ID {
		t.Errorf("hand-built key %s, want %s", hand.key(), a.ID)
	}
}

func TestTemplateJSON(t *testing.T) {
	tpl := mustParse(t, "version: 1\n")
	b, err := json.Marshal(tpl)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"content":"version: 1\n","version":1,"trail":{"attestations":[],"artifacts":[]}}`; got != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
}

func TestCompile(t *testing.T) {
	tpl := mustParse(t, string(readExample(t, "templates/valid_template.yml")))
	mod, err := Compile(tpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Flow template " + tpl.ID + " (version 1)",
		"package veritrail.flowtemplate",
		"expected_trail_attestations := [\n\t{\"name\": \"bar\", \"type\": \"generic\"},\n]",
		"expected_artifacts := [\n\t{\"name\": \"cli\", \"attestations\": [\n\t\t{\"name\": \"foo\", \"type\": \"generic\"},\n\t]},\n]",
		"result := {",
	} {
		if !strings.Contains(mod, want) {
			t.Errorf("module lacks %q:\n%s", want, mod)
		}
	}
	if _, err := ast.ParseModuleWithOpts("t.rego", mod, ast.ParserOptions{RegoVersion: ast.RegoV1}); err != nil {
		t.Errorf("module does not parse: %v", err)
	}
	empty, err := Compile(nil)
	if err != nil || !strings.Contains(empty, "expected_trail_attestations := []\n") ||
		!strings.Contains(empty, "expected_artifacts := []\n") {
		t.Errorf("Compile(nil) = %v\n%s", err, empty)
	}
}

// Names are data: quotes, backslashes, newlines and Rego syntax in them must not change the module.
func TestCompileQuotesNames(t *testing.T) {
	hostile := []string{`a"b`, `c\d`, "e\nf", `"} ] result := {"state": "COMPLIANT"} #`, "ünï©ødé", "x\u2028y", "<&>"}
	var spec TrailSpec
	for _, n := range hostile {
		spec.Attestations = append(spec.Attestations, Expected{Name: n, Type: "generic"})
		spec.Artifacts = append(spec.Artifacts, ExpectedArtifact{Name: n, Attestations: []Expected{{Name: n, Type: "custom:" + strings.ReplaceAll(n, "\n", " ")}}})
	}
	mod, err := Compile(&Template{Trail: spec})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ast.ParseModuleWithOpts("t.rego", mod, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		t.Fatalf("module does not parse: %v\n%s", err, mod)
	}
	var got []string
	for _, r := range m.Rules {
		if r.Head.Name == "expected_trail_attestations" {
			arr := r.Head.Value.Value.(*ast.Array)
			for i := range arr.Len() {
				got = append(got, string(arr.Elem(i).Value.(ast.Object).Get(ast.StringTerm("name")).Value.(ast.String)))
			}
		}
	}
	if !reflect.DeepEqual(got, hostile) {
		t.Errorf("names round-trip as %q, want %q", got, hostile)
	}
}

func TestCompileRejectsInvalidHandBuiltTemplate(t *testing.T) {
	_, err := Compile(&Template{Trail: TrailSpec{
		Attestations: []Expected{{"a", "generic"}, {"a", "nope"}},
		Artifacts:    []ExpectedArtifact{{Name: "x"}, {Name: "x"}},
	}})
	fields := validationFields(t, err)
	for _, f := range []string{"trail.attestations[1].name", "trail.attestations[1].type", "trail.artifacts[1].name"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("fields %v lack %s", fields, f)
		}
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(examplesDir, "templates", "*.yml"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"", "version: 1\n", "trail: null\n", "trail:\n  attestations:\n  - {name: a, type: 'custom:x'}\n",
		"trail:\n  artifacts:\n  - {name: a, attestations: &x [{name: s, type: '*'}]}\n  - {name: b, attestations: *x}\n",
		"a: b: c", "- [", "version: .nan\n", "version: 2001-12-14\n", "? [a]\n: b\n", "trail: {attestations: [{name: \"\\u2028\", type: decision}]}",
		"version: 1\ntrail:\n  attestations:\n  - {name: a, type: generic}\n  - {name: a, type: generic}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		tpl, err := Parse(content)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) == 0 {
				t.Fatalf("error %v (%T) is not a ValidationError with fields", err, err)
			}
			for k, v := range ve.Fields {
				if k == "" || v == "" {
					t.Fatalf("empty field or message in %q", ve.Fields)
				}
			}
			return
		}
		if len(tpl.ID) != 32 || tpl.Version != 1 || tpl.Content != string(content) {
			t.Fatalf("bad template %+v", tpl)
		}
		again, err := Parse(content)
		if err != nil || again.ID != tpl.ID {
			t.Fatalf("Parse is not deterministic: %v %v", err, again)
		}
		mod, err := Compile(tpl)
		if err != nil {
			t.Fatalf("Compile of a parsed template: %v", err)
		}
		if _, err := ast.ParseModuleWithOpts("t.rego", mod, ast.ParserOptions{RegoVersion: ast.RegoV1}); err != nil {
			t.Fatalf("compiled module does not parse: %v\n%s", err, mod)
		}
	})
}
