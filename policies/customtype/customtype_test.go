package customtype

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Copies of /work/shared/reference/examples/custom-types/person-schema.json and
// of the code-coverage schema in custom_attestation_get_response.json (there
// rendered as a Python dict string; here as the real JSON we accept).
const (
	personSchema = `{
    "type": "object",
    "additionalProperties": true,
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"}
    }
}`
	personData = `{"name": "Jane", "age": 34}`

	coverageSchema = `{"type": "object", "properties": {"line_coverage": {"type": "number", "minimum": 0, "maximum": 100},
 "branch_coverage": {"type": "number", "minimum": 0, "maximum": 100}, "total_lines": {"type": "integer"},
 "covered_lines": {"type": "integer"}}, "required": ["line_coverage", "total_lines", "covered_lines"]}`
)

// decodings covers both ways the API layer may decode attestation_data.
var decodings = []struct {
	name      string
	useNumber bool
}{{"float64", false}, {"UseNumber", true}}

func decode(t testing.TB, s string, useNumber bool) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	if useNumber {
		dec.UseNumber()
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func mustCompile(t testing.TB, schema string, rules ...string) *Type {
	t.Helper()
	typ, err := Compile([]byte(schema), rules)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return typ
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestCompile(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		rules  []string
		// want maps each expected error field to a substring of its message;
		// nil means Compile must succeed.
		want map[string]string
	}{
		{name: "person example", schema: personSchema, rules: []string{`.age >= 18`, `.name | length > 0`}},
		{name: "coverage example", schema: coverageSchema, rules: []string{".line_coverage >= 80", ".branch_coverage >= 70"}},
		{name: "no rules", schema: `{"type": "object"}`},
		{name: "boolean schema", schema: `true`},
		{name: "internal ref", schema: `{"$defs": {"pct": {"type": "number", "maximum": 100}}, "properties": {"x": {"$ref": "#/$defs/pct"}}}`},
		{name: "embedded $id ref", schema: `{"$id": "https://example.com/t", "$defs": {"p": {"$id": "p", "type": "integer"}}, "properties": {"x": {"$ref": "p"}}}`},
		{name: "draft-04 honoured", schema: `{"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 1, "exclusiveMinimum": true}`},
		{name: "empty schema", schema: "  ", want: map[string]string{"type_schema": "is required"}},
		{name: "bad JSON", schema: `{"type": "object"`, want: map[string]string{"type_schema": "not valid JSON"}},
		{name: "trailing data", schema: `{} {}`, want: map[string]string{"type_schema": "not valid JSON"}},
		{name: "python dict string", schema: `{'type': 'object'}`, want: map[string]string{"type_schema": "not valid JSON"}},
		{name: "schema as JSON string", schema: `"{'type': 'object'}"`, want: map[string]string{"type_schema": "want boolean or object"}},
		{name: "type is a number", schema: `{"type": 5}`, want: map[string]string{"type_schema": `at "/type"`}},
		{name: "unknown type name", schema: `{"type": "float"}`, want: map[string]string{"type_schema": "value must be one of"}},
		{name: "minimum is a string", schema: `{"properties": {"a": {"minimum": "0"}}}`, want: map[string]string{"type_schema": `at "/properties/a/minimum": got string, want number`}},
		{name: "required not an array", schema: `{"required": "a"}`, want: map[string]string{"type_schema": `at "/required"`}},
		{name: "properties is an array", schema: `{"properties": []}`, want: map[string]string{"type_schema": `at "/properties"`}},
		{name: "draft-07 rejects boolean exclusiveMinimum", schema: `{"$schema": "http://json-schema.org/draft-07/schema#", "minimum": 1, "exclusiveMinimum": true}`, want: map[string]string{"type_schema": "exclusiveMinimum"}},
		{name: "invalid pattern", schema: `{"pattern": "(?=a)"}`, want: map[string]string{"type_schema": "not valid regex"}},
		{name: "remote ref", schema: `{"$ref": "https://example.com/schema.json"}`, want: map[string]string{"type_schema": `cannot resolve "https://example.com/schema.json"`}},
		{name: "file ref", schema: `{"$ref": "other.json"}`, want: map[string]string{"type_schema": `cannot resolve "other.json"`}},
		{name: "unknown $schema", schema: `{"$schema": "https://example.com/meta"}`, want: map[string]string{"type_schema": "only references within type_schema"}},
		{name: "bad jq syntax", schema: `{}`, rules: []string{".a >= 1", ".a >="}, want: map[string]string{"evaluator.rules[1]": "invalid jq syntax"}},
		{name: "unbalanced paren", schema: `{}`, rules: []string{"(.a"}, want: map[string]string{"evaluator.rules[0]": "invalid jq syntax"}},
		{name: "empty rule", schema: `{}`, rules: []string{" "}, want: map[string]string{"evaluator.rules[0]": "must not be empty"}},
		{name: "undefined function", schema: `{}`, rules: []string{"nosuchfn(1)"}, want: map[string]string{"evaluator.rules[0]": "invalid jq rule"}},
		{name: "undefined variable", schema: `{}`, rules: []string{"$threshold < .a"}, want: map[string]string{"evaluator.rules[0]": "variable not defined"}},
		{name: "module import", schema: `{}`, rules: []string{`import "x" as x; true`}, want: map[string]string{"evaluator.rules[0]": "module"}},
		{name: "input not allowed", schema: `{}`, rules: []string{"input"}, want: map[string]string{"evaluator.rules[0]": "not allowed"}},
		{
			name: "all problems at once", schema: `{"type": 5}`, rules: []string{"true", "(", ")"},
			want: map[string]string{"type_schema": "/type", "evaluator.rules[1]": "invalid jq syntax", "evaluator.rules[2]": "invalid jq syntax"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			typ, err := Compile([]byte(tt.schema), tt.rules)
			if tt.want == nil {
				if err != nil || typ == nil {
					t.Fatalf("Compile() = %v, %v; want success", typ, err)
				}
				return
			}
			var de *DefinitionError
			if !errors.As(err, &de) {
				t.Fatalf("Compile() error = %v (%T); want *DefinitionError", err, err)
			}
			if typ != nil {
				t.Errorf("Compile() returned a Type alongside an error")
			}
			if got, want := sortedKeys(de.Fields), sortedKeys(tt.want); !reflect.DeepEqual(got, want) {
				t.Fatalf("fields = %q; want %q (%v)", got, want, de)
			}
			for k, sub := range tt.want {
				if !strings.Contains(de.Fields[k], sub) {
					t.Errorf("Fields[%q] = %q; want it to contain %q", k, de.Fields[k], sub)
				}
			}
			if strings.Contains(err.Error(), schemaBase) {
				t.Errorf("error leaks internal URL: %v", err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	nested := `{"type": "object", "additionalProperties": false, "required": ["name", "scans"],
	 "properties": {"name": {"type": "string"}, "a.b": {"type": "string"},
	  "scans": {"type": "array", "items": {"type": "object", "required": ["tool"], "properties": {"tool": {"type": "string"}, "high": {"type": "integer", "minimum": 0}}}},
	  "kind": {"anyOf": [{"type": "string"}, {"type": "number"}]}}}`
	tests := []struct {
		name   string
		schema string
		data   string
		want   map[string]string // field -> message substring; nil means valid
	}{
		{name: "person example", schema: personSchema, data: personData},
		{name: "person empty object", schema: personSchema, data: `{}`},
		{name: "person extra property allowed", schema: personSchema, data: `{"name": "Jane", "email": "j@example.com"}`},
		{name: "person integral float is integer", schema: personSchema, data: `{"age": 34.0}`},
		{name: "person age string", schema: personSchema, data: `{"name": "Jane", "age": "34"}`, want: map[string]string{"attestation_data.age": "want integer"}},
		{name: "person age fractional", schema: personSchema, data: `{"age": 34.5}`, want: map[string]string{"attestation_data.age": "want integer"}},
		{name: "person two violations", schema: personSchema, data: `{"name": 1, "age": true}`, want: map[string]string{"attestation_data.name": "want string", "attestation_data.age": "want integer"}},
		{name: "person not an object", schema: personSchema, data: `["Jane"]`, want: map[string]string{"attestation_data": "want object"}},
		{name: "coverage valid", schema: coverageSchema, data: `{"line_coverage": 91.5, "total_lines": 200, "covered_lines": 183}`},
		{name: "coverage out of range and missing", schema: coverageSchema, data: `{"line_coverage": 101}`, want: map[string]string{
			"attestation_data.line_coverage": "maximum", "attestation_data.total_lines": "is required", "attestation_data.covered_lines": "is required",
		}},
		{name: "huge integer", schema: `{"properties": {"n": {"type": "integer", "minimum": 1}}}`, data: `{"n": 123456789012345678901234567890}`},
		{name: "nested valid", schema: nested, data: `{"name": "x", "a.b": "y", "scans": [{"tool": "trivy", "high": 0}], "kind": 3}`},
		{name: "nested paths", schema: nested, data: `{"name": "x", "a.b": 1, "scans": [{"tool": "trivy"}, {"high": -1}], "kind": true, "extra": 1}`, want: map[string]string{
			`attestation_data["a.b"]`:        "want string",
			"attestation_data.scans[1].tool": "is required",
			"attestation_data.scans[1].high": "minimum",
			"attestation_data.kind":          "anyOf",
			"attestation_data.extra":         "not allowed",
		}},
		{name: "false schema", schema: `{"properties": {"secret": false}}`, data: `{"secret": 1}`, want: map[string]string{"attestation_data.secret": "not allowed"}},
		{name: "draft-04 exclusiveMinimum", schema: `{"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 1, "exclusiveMinimum": true}`, data: `1`, want: map[string]string{"attestation_data": "exclusiveMinimum"}},
	}
	for _, tt := range tests {
		for _, d := range decodings {
			t.Run(tt.name+"/"+d.name, func(t *testing.T) {
				typ := mustCompile(t, tt.schema)
				err := typ.Check(decode(t, tt.data, d.useNumber))
				assertDataError(t, err, tt.want)
			})
		}
	}
}

func assertDataError(t *testing.T, err error, want map[string]string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("Check() = %v; want nil", err)
		}
		return
	}
	var de *DataError
	if !errors.As(err, &de) {
		t.Fatalf("Check() = %v (%T); want *DataError", err, err)
	}
	if got, wantKeys := sortedKeys(de.Fields), sortedKeys(want); !reflect.DeepEqual(got, wantKeys) {
		t.Fatalf("fields = %q; want %q (%v)", got, wantKeys, de)
	}
	for k, sub := range want {
		if !strings.Contains(de.Fields[k], sub) {
			t.Errorf("Fields[%q] = %q; want it to contain %q", k, de.Fields[k], sub)
		}
	}
}

// Callers may hand over values not produced by encoding/json; they are
// accepted through their JSON encoding rather than panicking inside gojq.
func TestCheckAndEvaluateGoValues(t *testing.T) {
	typ := mustCompile(t, personSchema, ".age >= 18", ".name == \"Jane\"")
	type person struct {
		Name string `json:"name"`
		Age  int64  `json:"age"`
	}
	for _, data := range []any{
		person{"Jane", 34},
		&person{"Jane", 34},
		map[string]any{"name": "Jane", "age": int64(34)},
		map[string]any{"name": "Jane", "age": uint8(34)},
		map[string]any{"name": "Jane", "age": 34},
		map[string]any{"name": "Jane", "age": json.Number("34")},
	} {
		if err := typ.Check(data); err != nil {
			t.Errorf("Check(%#v) = %v", data, err)
		}
		if ok, res := typ.Evaluate(context.Background(), data); !ok {
			t.Errorf("Evaluate(%#v) = %+v", data, res)
		}
	}

	for _, tc := range []struct {
		data any
		path string
	}{
		{map[string]any{"age": math.NaN()}, "attestation_data.age"},
		{map[string]any{"age": json.Number("thirty")}, "attestation_data.age"},
		{[]any{map[string]any{"f": func() {}}}, `attestation_data[0].f`},
	} {
		assertDataError(t, typ.Check(tc.data), map[string]string{tc.path: ""})
		ok, res := typ.Evaluate(context.Background(), tc.data)
		if ok || res[0].Passed || res[0].Error == "" {
			t.Errorf("Evaluate(%#v) = %v, %+v; want failed rules with an error", tc.data, ok, res)
		}
	}
}

func TestEvaluate(t *testing.T) {
	const data = `{"line_coverage": 91.5, "branch_coverage": 65, "total_lines": 200, "covered_lines": 183,
	 "big": 12345678901234567890, "xs": [3, -1], "name": "svc"}`
	tests := []struct {
		rule    string
		passed  bool
		errText string // substring; "" means no error expected
	}{
		{rule: ".line_coverage >= 80", passed: true},
		{rule: ".branch_coverage >= 70", passed: false},
		{rule: ".covered_lines / .total_lines > 0.9", passed: true},
		{rule: ".total_lines == 200 and .covered_lines == 183", passed: true},
		{rule: ".big == 12345678901234567890", passed: true},
		{rule: ".missing >= 1", passed: false}, // null >= 1 is false, not an error
		{rule: ".xs[] > 0", passed: true},      // only the first output counts
		{rule: "[.xs[] > 0] | all", passed: false},
		{rule: `.name | test("^s")`, passed: true},
		{rule: "$ENV | length == 0", passed: true}, // the server environment is not exposed
		{rule: ".line_coverage", errText: "got number: 91.5"},
		{rule: ".name", errText: `got string: "svc"`},
		{rule: "null", errText: "got null"},
		{rule: "empty", errText: "no output"},
		{rule: `error("coverage gate broken")`, errText: "coverage gate broken"},
		{rule: `.name | test(1)`, errText: "test"},
		{rule: ".name + 1 > 0", errText: "cannot add"},
		{rule: ".xs | .foo", errText: "expected an object"},
	}
	for _, d := range decodings {
		t.Run(d.name, func(t *testing.T) {
			rules := make([]string, len(tests))
			for i, tt := range tests {
				rules[i] = tt.rule
			}
			typ := mustCompile(t, coverageSchema, rules...)
			v := decode(t, data, d.useNumber)
			if err := typ.Check(v); err != nil {
				t.Fatalf("Check: %v", err)
			}
			compliant, results := typ.Evaluate(context.Background(), v)
			if compliant {
				t.Errorf("compliant = true with failing rules")
			}
			if len(results) != len(tests) {
				t.Fatalf("got %d results; want %d", len(results), len(tests))
			}
			for i, tt := range tests {
				r := results[i]
				if r.Rule != tt.rule || r.Passed != tt.passed {
					t.Errorf("results[%d] = %+v; want rule %q passed=%v", i, r, tt.rule, tt.passed)
				}
				if tt.errText == "" && r.Error != "" || !strings.Contains(r.Error, tt.errText) {
					t.Errorf("results[%d] (%s) error = %q; want %q", i, tt.rule, r.Error, tt.errText)
				}
			}
		})
	}
}

func TestEvaluateCompliance(t *testing.T) {
	typ := mustCompile(t, coverageSchema, ".line_coverage >= 80", ".branch_coverage >= 70")
	tests := []struct {
		data string
		want bool
	}{
		{`{"line_coverage": 85, "branch_coverage": 75, "total_lines": 10, "covered_lines": 8}`, true},
		{`{"line_coverage": 85, "branch_coverage": 60, "total_lines": 10, "covered_lines": 8}`, false},
		{`{"line_coverage": 79.9, "branch_coverage": 75, "total_lines": 10, "covered_lines": 8}`, false},
	}
	for _, tt := range tests {
		for _, d := range decodings {
			got, results := typ.Evaluate(context.Background(), decode(t, tt.data, d.useNumber))
			if got != tt.want {
				t.Errorf("%s/%s: compliant = %v; want %v (%+v)", tt.data, d.name, got, tt.want, results)
			}
		}
	}

	empty := mustCompile(t, `{"type": "object"}`)
	ok, results := empty.Evaluate(context.Background(), map[string]any{})
	if !ok || results == nil || len(results) != 0 {
		t.Errorf("no rules: Evaluate = %v, %#v; want true and an empty, non-nil slice", ok, results)
	}
}

func TestEvaluateContext(t *testing.T) {
	// A tight loop with no output: only the context can stop it.
	const spin = "last(range(1e15)) > 0"
	typ := mustCompile(t, `{}`, spin, "true")

	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		ok, results := typ.Evaluate(ctx, map[string]any{})
		if elapsed := time.Since(start); elapsed > time.Second {
			t.Errorf("Evaluate took %v; the context should have stopped it", elapsed)
		}
		if ok || results[0].Passed || !strings.Contains(results[0].Error, "timed out") {
			t.Errorf("Evaluate = %v, %+v; want the spinning rule to fail as timed out", ok, results)
		}
		// The deadline is shared, so later rules fail too instead of running on.
		if results[1].Passed {
			t.Errorf("rule after the deadline passed: %+v", results[1])
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ok, results := typ.Evaluate(ctx, map[string]any{})
		if ok || !strings.Contains(results[0].Error, "cancelled") {
			t.Errorf("Evaluate = %v, %+v; want cancelled", ok, results)
		}
	})
}

func TestErrorStrings(t *testing.T) {
	_, err := Compile([]byte(`{"type": 5}`), []string{"("})
	want := "invalid custom attestation type: evaluator.rules[0]: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "; type_schema: ") {
		t.Errorf("DefinitionError.Error() = %q; want sorted fields", err)
	}
	err = mustCompile(t, personSchema).Check(map[string]any{"name": 1, "age": "x"})
	want = "attestation_data does not match the type schema: attestation_data.age: got string, want integer; attestation_data.name: got number, want string"
	if err == nil || err.Error() != want {
		t.Errorf("DataError.Error() = %q; want %q", err, want)
	}
}

// Run with -race: a compiled Type is shared by concurrent requests.
func TestConcurrentUse(t *testing.T) {
	typ := mustCompile(t, coverageSchema, ".line_coverage >= 80", ".covered_lines <= .total_lines")
	good := decode(t, `{"line_coverage": 90, "total_lines": 10, "covered_lines": 9}`, true)
	bad := decode(t, `{"line_coverage": "90"}`, false)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for range 50 {
				if i%2 == 0 {
					if err := typ.Check(good); err != nil {
						t.Error(err)
					}
					if ok, res := typ.Evaluate(context.Background(), good); !ok {
						t.Error(res)
					}
				} else if err := typ.Check(bad); err == nil {
					t.Error("bad data passed Check")
				}
			}
		})
	}
	wg.Wait()
}
