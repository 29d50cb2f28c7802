package ingest

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNameProblem: names are refused for invalid UTF-8, length (in characters) and control or
// bidirectional formatting characters; what the Kosli CLI sends passes.
func TestNameProblem(t *testing.T) {
	for _, v := range []string{"unit-tests", "a.b", "tests (é)", "🚀 deploy", strings.Repeat("é", 256), "tab-less name"} {
		if msg := nameProblem(v, 256); msg != "" {
			t.Errorf("%q refused: %s", v, msg)
		}
	}
	for v, want := range map[string]string{
		"nul\x00":                 "control",
		"bell\x07":                "control",
		"del\x7f":                 "control",
		"c1\u0085":                "control",
		"rtl\u202e":               "U+202E",
		"lre\u202a":               "U+202A",
		"isolate\u2066":           "U+2066",
		"pdi\u2069":               "U+2069",
		"x\xff":                   "unicode",
		strings.Repeat("é", 257):  "at most 256 characters",
		strings.Repeat("a", 1e4):  "at most 256 characters",
		"new\nline":               "U+000A",
		"ok until \u2067 the end": "U+2067",
	} {
		if msg := nameProblem(v, 256); !strings.Contains(msg, want) {
			t.Errorf("%q: %q, want a text with %q", v, msg, want)
		}
	}
}

func TestEcho(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                    "plain",
		"é ✓":                      "é ✓",
		"a\x00b":                   `a\x00b`,
		"rtl\u202eexe":             `rtl\u202eexe`,
		"bad\xffbyte":              `bad\xffbyte`,
		strings.Repeat("x", 150):   strings.Repeat("x", 100) + "...",
		`quote" and \ stay as are`: `quote" and \ stay as are`,
	} {
		if got := echo(in); got != want {
			t.Errorf("echo(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBadString: the walk names the first string that breaks the text rules by its path.
func TestBadString(t *testing.T) {
	for doc, want := range map[string]string{
		`{"a": "\u0000"}`:                     "a",
		`{"a": {"b": [1, {"c": "x\u0000"}]}}`: "a.b[1].c",
		`{"a": {"k\u0000": 1}}`:               "a",
		`{"k\u0000": 1}`:                      "",
		`["ok", "\u0000"]`:                    "[1]",
		`{"a\u002eb": {"c": "\u0000"}}`:       "a.b.c",
		"{\"a\": \"\xff\"}":                   "a",
		`"\u0000"`:                            "",
	} {
		path, _, ok := badString([]byte(doc))
		if !ok || path != want {
			t.Errorf("%s: path %q (found %v), want %q", doc, path, ok, want)
		}
	}
	for _, doc := range []string{`{"a": "\\u0000"}`, `{"a": "\\\\u0000"}`, `{"a": ["x", 1, true, null]}`, `{}`} {
		if path, msg, ok := badString([]byte(doc)); ok {
			t.Errorf("%s: %s at %q", doc, msg, path)
		}
		if !jsonTextOK([]byte(doc)) {
			t.Errorf("%s was refused", doc)
		}
	}
}

// FuzzBadString: the walk never panics, on any bytes; on JSON that the text rules refuse it always
// finds the string.
func FuzzBadString(f *testing.F) {
	for _, s := range []string{`{"a": "\u0000"}`, `{"a": [{"b": "\\\u0000"}]}`, "{\"a\": \"\xff\"}", `{"a"`, `[1, 2`, `"\`, `{"a": tru}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		path, msg, ok := badString(b)
		if json.Valid(b) && !jsonTextOK(b) && !ok {
			t.Fatalf("%q breaks the text rules but the walk found nothing", b)
		}
		if ok && msg == "" {
			t.Fatalf("%q: found at %q without a reason", b, path)
		}
		if e := textError("data_json", b); len(e.Errors) != 1 {
			t.Fatalf("%q: %v", b, e)
		}
	})
}

// TestOpenAPINameRules: the Huma-described names carry the patterns and lengths the handlers
// check, so the description and the checks cannot drift apart.
func TestOpenAPINameRules(t *testing.T) {
	schemas := New(Config{}, Deps{}).OpenAPI().Components.Schemas.Map()
	for _, tc := range []struct {
		schema, prop, pattern string
		max                   int
	}{
		{"CreateEnvironmentPutInput", "name", envNamePattern, maxNameLen},
		{"EnvRenameInputBody", "new_name", envNamePattern, maxNameLen},
		{"LegacyInputBody", "name", flowNamePattern, maxNameLen},
		{"FlowRenameInputBody", "new_name", flowNamePattern, maxNameLen},
		{"ControlPostInput", "identifier", controlIDPattern, maxNameLen},
		{"ControlPostInput", "name", "", maxNameLen},
		{"ControlPutInput", "name", "", maxNameLen},
		{"OverrideInputBody", "attestation_name", "", maxNameLen},
		{"ArtifactReport", "trail_name", "", maxNameLen},
		{"ArtifactReport", "template_reference_name", "", maxNameLen},
	} {
		s, ok := schemas[tc.schema]
		if !ok || s.Properties[tc.prop] == nil {
			t.Errorf("no %s.%s in the description", tc.schema, tc.prop)
			continue
		}
		p := s.Properties[tc.prop]
		if p.Pattern != tc.pattern || p.MaxLength == nil || *p.MaxLength != tc.max {
			t.Errorf("%s.%s: pattern %q, maxLength %v; want %q, %d", tc.schema, tc.prop, p.Pattern, p.MaxLength, tc.pattern, tc.max)
		}
	}
}

func TestHasEmptyValue(t *testing.T) {
	for q, want := range map[string]bool{
		"": false, "page=1&per_page=15": false, "interval=&reverse=false": true, "per_page=": true,
		"archived": true, "a=1&&b=2": false, "a=1&b": true, "tag=a%3Db": false,
	} {
		if got := hasEmptyValue(q); got != want {
			t.Errorf("hasEmptyValue(%q) = %v, want %v", q, got, want)
		}
	}
}
