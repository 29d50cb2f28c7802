package yamlschema

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    any
		err     *SyntaxError
	}{
		{"empty", "", nil, nil},
		{"comments only", "# nothing\n", nil, nil},
		{"null", "~\n", nil, nil},
		{"map", "a: 1\nb: [x, {c: true}]\n", map[string]any{"a": 1, "b": []any{"x", map[string]any{"c": true}}}, nil},
		{"non-string keys", "1: a\n", map[string]any{"1": "a"}, nil},
		{"timestamp", "t: 2024-01-02T03:04:05Z\n", map[string]any{"t": "2024-01-02T03:04:05Z"}, nil},
		{"syntax on line 2", "a: 1\nb: : c\n", nil, &SyntaxError{Line: 2, Message: "mapping values are not allowed in this context"}},
		{"syntax on line 1", "a: [\n", nil, &SyntaxError{Line: 1, Message: "did not find expected node content"}},
		{"unknown anchor", "a: 1\nb: *nope\n", nil, &SyntaxError{Line: 2, Column: 4, Message: "unknown anchor 'nope' referenced"}},
		{"two documents", "a: 1\n---\nb: 2\n", nil, &SyntaxError{Line: 2, Documents: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := Decode([]byte(tc.content))
			if tc.err != nil {
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("err = %v, want a *SyntaxError", err)
				}
				if *se != *tc.err {
					t.Errorf("err = %#v, want %#v", se, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(doc.Value, tc.want) {
				t.Errorf("value = %#v, want %#v", doc.Value, tc.want)
			}
			if (doc.Root == nil) != (tc.want == nil && !strings.Contains(tc.content, "~")) {
				t.Errorf("root = %v for %q", doc.Root, tc.content)
			}
		})
	}
}

func TestSyntaxErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  SyntaxError
		want string
	}{
		{SyntaxError{Line: 3, Message: "bad"}, "line 3: bad"},
		{SyntaxError{Line: 3, Column: 7, Message: "bad"}, "line 3, column 7: bad"},
		{SyntaxError{Message: "exceeded max depth"}, "exceeded max depth"},
		{SyntaxError{Line: 4, Documents: true}, "must hold a single YAML document; another one starts at line 4"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.err, got, tc.want)
		}
	}
}

const testSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["name"],
  "properties": {
    "name": {"type": "string"},
    "size": {"anyOf": [{"type": "integer"}, {"const": "auto"}]},
    "items": {"type": "array", "items": {"type": "object", "additionalProperties": false,
      "properties": {"kind": {"enum": ["a", "b"]}}}}
  }
}`

func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidatorPositions(t *testing.T) {
	content := `size: big
items:
  - kind: c
  - kindx: a
"odd key": 1
`
	doc, err := Decode([]byte(content))
	if err != nil {
		t.Fatal(err)
	}
	v := NewValidator(doc, Hints{
		Root:        "file",
		KnownFields: func(loc []string) string { return "; known: " + strings.Join(loc, "/") },
	})
	v.Schema(compile(t), nil)
	got := map[string]Problem{}
	for _, p := range v.Problems() {
		got[p.Field] = p
	}
	want := map[string]Problem{
		"name":           {Message: "is required", Line: 1, Column: 1},
		"size":           {Message: `must be an integer or "auto" (got a string)`, Line: 1, Column: 7},
		"items[0].kind":  {Message: "value must be one of 'a', 'b'", Line: 3, Column: 11},
		"items[1].kindx": {Message: "is not a known field; known: items/1", Line: 4, Column: 5},
		`["odd key"]`:    {Message: "is not a known field; known: ", Line: 5, Column: 1},
	}
	if len(got) != len(want) {
		t.Errorf("problems = %+v", v.Problems())
	}
	for f, w := range want {
		g, ok := got[f]
		if !ok || g.Message != w.Message || g.Line != w.Line || g.Column != w.Column {
			t.Errorf("%s = %+v, want %+v", f, g, w)
		}
	}
	fields := Fields(v.Problems())
	if fields["size"] != `must be an integer or "auto" (got a string) (line 1, column 7)` {
		t.Errorf("Fields[size] = %q", fields["size"])
	}
	if s := Summary(v.Problems()); !strings.HasPrefix(s, "5 errors: ") || !strings.Contains(s, "name: is required (line 1, column 1)") {
		t.Errorf("Summary = %q", s)
	}
	// The same problem found twice is recorded once; two at one field are joined.
	v.Add([]string{"name"}, "is required")
	v.AddAt([]string{"name"}, "needs a value", 0, 0)
	if f := Fields(v.Problems())["name"]; f != "is required (line 1, column 1); needs a value" {
		t.Errorf("joined = %q", f)
	}
	if v.FieldName(nil) != "file" {
		t.Errorf("root field = %q", v.FieldName(nil))
	}
}

func TestOrList(t *testing.T) {
	for n, want := range []string{"something else", "a", "a or b", "a, b or c"} {
		if got := OrList([]string{"a", "b", "c"}[:n]); got != want {
			t.Errorf("OrList(%d) = %q, want %q", n, got, want)
		}
	}
}
