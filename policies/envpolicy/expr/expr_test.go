package expr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/veritrail/veritrail/policies/rego"
)

// contexts the evaluation tests run each expression against.
var (
	highRisk = `{"name": "backend-ci", "tags": {"risk-level": "high", "app.kubernetes.io/name": "api", "priority": "2", "odd key": "x", "team": "payments"}}`
	lowRisk  = `{"name": "docs", "tags": {"risk-level": "low", "priority": "10"}}`
	noFlow   = `{"name": null, "tags": {}}`
	artifact = `{"name": "prod:backend:1.2", "fingerprint": "3f2a1b7c"}`
)

// evaluate runs the compiled Rego of each expression in one query against flow and artifact.
func evaluate(t *testing.T, exprs []*Expression, flow, artifact string) []bool {
	t.Helper()
	var mod strings.Builder
	mod.WriteString("package t\n\n" + RegoHelpers + "\n")
	for i, e := range exprs {
		fmt.Fprintf(&mod, "cond_%d(%s) := %s\n\n", i, e.RegoParams(), e.Rego())
	}
	mod.WriteString("result := [\n")
	for i := range exprs {
		fmt.Fprintf(&mod, "\tcond_%d(input.flow, input.artifact),\n", i)
	}
	mod.WriteString("]\n")
	pq, err := rego.Prepare(context.Background(), rego.QuerySpec{Query: "data.t.result", Modules: map[string]string{"t.rego": mod.String()}})
	if err != nil {
		t.Fatalf("prepare: %v\n%s", err, mod.String())
	}
	in := ast.MustParseTerm(`{"flow": ` + flow + `, "artifact": ` + artifact + `}`).Value
	v, err := rego.Eval(context.Background(), pq, in)
	if err != nil {
		t.Fatal(err)
	}
	arr, ok := v.(*ast.Array)
	if !ok || arr.Len() != len(exprs) {
		t.Fatalf("result %v", v)
	}
	out := make([]bool, len(exprs))
	for i := range exprs {
		b, ok := arr.Elem(i).Value.(ast.Boolean)
		if !ok {
			t.Fatalf("%s gave %v, not a boolean", exprs[i].Text, arr.Elem(i))
		}
		out[i] = bool(b)
	}
	return out
}

func TestExpressions(t *testing.T) {
	tests := []struct {
		text      string
		canonical string // "" when the text is already canonical (without the wrapper)
		high      bool   // value for the high-risk flow
		low       bool
		none      bool // value for an artifact of no flow
	}{
		{`flow.name == "backend-ci"`, "", true, false, false},
		{`${{ flow.name == 'backend-ci' }}`, `flow.name == "backend-ci"`, true, false, false},
		{`  ${{flow.tags.risk-level=="high"}}  `, `flow.tags.risk-level == "high"`, true, false, false},
		{`flow.tags.risk-level != "high"`, "", false, true, true},
		{`flow.tags.app.kubernetes.io/name == "api"`, "", true, false, false},
		{`flow.tags["odd key"] == "x"`, "", true, false, false},
		{`flow.tags["risk-level"] == "high"`, `flow.tags.risk-level == "high"`, true, false, false},
		{`flow.tags.priority < 3`, "", true, false, false},
		{`flow.tags.priority >= 3`, "", false, true, false},
		{`flow.tags.priority <= 2.5`, "", true, false, false},
		{`flow.tags.priority > 1`, "", true, true, false},
		{`flow.tags.priority == 2`, "", true, false, false},
		{`flow.tags.priority != 2`, "", false, true, true},
		{`flow.tags.priority == 002`, `flow.tags.priority == 2`, true, false, false},
		{`flow.tags.risk-level > 1`, "", false, false, false}, // not a number: no order
		{`flow.tags.priority < "3"`, "", true, true, false},   // two strings: lexicographic ("10" < "3")
		{`flow.name in ["backend-ci", "docs"]`, "", true, true, false},
		{`flow.name in ["a", "b",]`, `flow.name in ["a", "b"]`, false, false, false},
		{`flow.tags.priority in [2, 3]`, "", true, false, false},
		{`2 in [flow.tags.priority]`, "", true, false, false},
		{`flow.name in []`, "", false, false, false},
		{`exists(flow)`, "", true, true, false},
		{`exists(flow.tags.team)`, "", true, false, false},
		{`not exists(flow.tags.team)`, "", false, true, true},
		{`exists(flow.tags)`, "", true, true, false},
		{`matches(artifact.name, "^prod:.*")`, "", true, true, true},
		{`matches(artifact.name, "^v\d+")`, `matches(artifact.name, "^v\\d+")`, false, false, false},
		{`matches(flow.name, "ci$")`, "", true, false, false},
		{`matches(artifact.fingerprint, "^3f2a")`, "", true, true, true},
		{`not flow.tags.risk-level == "high"`, "", false, true, true},
		{`not not exists(flow)`, "", true, true, false},
		{`flow.name == "docs" or flow.name == "backend-ci"`, "", true, true, false},
		{`flow.name == "docs" and flow.tags.priority == 10`, "", false, true, false},
		{`flow.name == "x" or flow.name == "y" or exists(flow.tags.team)`, "", true, false, false},
		{`flow.name == 'prod' and (flow.tags.team == "a" or artifact.name == 'prod:backend:1.2')`,
			`flow.name == "prod" and (flow.tags.team == "a" or artifact.name == "prod:backend:1.2")`, false, false, false},
		{`(exists(flow) or true) and not (flow.name == "docs")`, `(exists(flow) or true) and not flow.name == "docs"`, true, false, true},
		{`not (exists(flow) and true)`, "", false, false, true},
		{`a or (b or c)`, "", false, false, false},
		{`true`, "", true, true, true},
		{`false == false`, "", true, true, true},
		{`"a" < "b"`, "", true, true, true},
		{`-1 < 0`, "", true, true, true},
		{`artifact.name == "prod:backend:1.2"`, "", true, true, true},
		{`flow.name == "it's \"quoted\" \\ here"`, "", false, false, false},
		{`flow.name == '\'single\''`, `flow.name == "'single'"`, false, false, false},
		{`flow.name == "café"`, "", false, false, false},
		{`(flow.name == "docs") == true`, "", false, true, false},
		{`exists(flow) != (flow.name == "x" or true)`, "", false, false, true},
		{`not exists(flow) == false`, "", true, true, false},
		{`matches(flow.name, "^b") or matches(flow.tags.team, "pay")`, "", true, false, false},
	}
	// "a or (b or c)" needs flows a, b, c: give them meaning through names.
	for i := range tests {
		tests[i].text = strings.NewReplacer("a or (b or c)", `flow.name == "a" or (flow.name == "b" or flow.name == "c")`).Replace(tests[i].text)
		if tests[i].text != tests[i].canonical && strings.HasPrefix(tests[i].text, `flow.name == "a" or (`) {
			tests[i].canonical = tests[i].text
		}
	}
	var exprs []*Expression
	for _, tc := range tests {
		e, err := Parse(tc.text)
		if err != nil {
			t.Fatalf("Parse(%s): %v", tc.text, err)
		}
		want := tc.canonical
		if want == "" {
			want = tc.text
		}
		if got := Format(e.Root); got != want {
			t.Errorf("Format(%s) = %s, want %s", tc.text, got, want)
		}
		if got := e.String(); got != "${{ "+want+" }}" {
			t.Errorf("String(%s) = %s", tc.text, got)
		}
		again, err := Parse(e.String())
		if err != nil || Format(again.Root) != want {
			t.Errorf("round trip of %s: %v %v", e.String(), again, err)
		}
		exprs = append(exprs, e)
	}
	for _, ctx := range []struct {
		name, flow string
		want       func(int) bool
	}{
		{"high", highRisk, func(i int) bool { return tests[i].high }},
		{"low", lowRisk, func(i int) bool { return tests[i].low }},
		{"no flow", noFlow, func(i int) bool { return tests[i].none }},
	} {
		got := evaluate(t, exprs, ctx.flow, artifact)
		for i, g := range got {
			if g != ctx.want(i) {
				t.Errorf("%s: %s = %v, want %v\nRego: %s", ctx.name, tests[i].text, g, ctx.want(i), exprs[i].Rego())
			}
		}
	}
}

func TestRegoReadsLikeTheExpression(t *testing.T) {
	e, err := Parse(`${{ flow.tags.risk-level == "high" and matches(artifact.name, "^prod:") or not exists(flow) }}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `(true in [(false in [object.get(flow.tags, "risk-level", null) == "high", ` +
		`regex.match("^prod:", artifact.name)]) == false, (flow.name != null) == false])`
	if got := e.Rego(); got != want {
		t.Errorf("Rego\n got %s\nwant %s", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		text   string
		column int
		msg    string // a part of the message
	}{
		{``, 1, "the expression is empty"},
		{`${{ }}`, 5, "the expression is empty"},
		{`${{ flow.name == "a"`, 21, "expected }} to close ${{"},
		{`{{ flow.name }}`, 1, "wrapped in ${{ and }}"},
		{`flow.nam == "a"`, 1, "unknown field 'flow.nam'"},
		{`${{ flw.name == "a" }}`, 5, "unknown name 'flw.name'"},
		{`flow.name = "a"`, 11, "compare with '=='"},
		{`flow.name == "a" && true`, 18, "use 'and'"},
		{`!exists(flow)`, 1, "negate with 'not'"},
		{`flow.name == "a`, 14, "not closed"},
		{`flow.name == `, 14, "ends where a value was expected"},
		{`flow.name`, 1, "flow.name is a string, not a condition"},
		{`flow.name == "a" and flow.tags.x`, 22, "flow.tags.x is a string"},
		{`flow.tags.critical == true`, 23, `compare it with "true"`},
		{`"a" == 3`, 5, "compares a string with a number"},
		{`flow.name < true`, 13, `flow.name is a string: compare it with "true"`},
		{`"a" < true`, 5, "'<' compares a string with a boolean"},
		{`true < false`, 6, "booleans have no order"},
		{`flow.name == ["a"]`, 14, "test membership with 'in'"},
		{`flow.tags == "a"`, 1, "flow.tags is an object"},
		{`flow.name in "a"`, 14, "must be a list"},
		{`flow.name in ["a", 1]`, 20, "a list holds values of one type"},
		{`true in ["a"]`, 10, "never equal"},
		{`flow.name in [["a"]]`, 15, "element 1 of the list is a list"},
		{`[1] in [1]`, 1, "must be a single value"},
		{`flow.name == "a" == "b"`, 18, "comparisons do not chain"},
		{`exists(flow.name, flow)`, 23, "exists takes one argument"},
		{`exists("a")`, 8, "exists takes a value of the context"},
		{`matches(artifact.name)`, 22, "matches takes a value and a regular expression"},
		{`matches(artifact.name, flow.name)`, 24, "must be a string in quotes"},
		{`matches(artifact.name, "(")`, 24, "invalid regular expression: missing closing )"},
		{`matches(1, "a")`, 9, "matches works on strings"},
		{`startswith(artifact.name, "a")`, 1, "unknown function 'startswith'"},
		{`exists == true`, 1, "exists is a function"},
		{`flow.tags..x == "a"`, 1, "empty part in its tag key"},
		{`flow.tags.x. == "a"`, 1, "empty part in its tag key"},
		{`flow.name["a"] == "b"`, 10, "only flow.tags can be indexed"},
		{`flow.tags[1] == "b"`, 11, "expected a tag key in quotes"},
		{`(flow.name == "a"`, 18, "expected ')' to close the '(' at column 1"},
		{`flow.name == "a")`, 17, "expected an operator"},
		{`and flow.name == "a"`, 1, "expected a value before 'and'"},
		{`flow.name == "a" or`, 20, "ends where a value was expected"},
		{`1.x == 1`, 3, "expected a digit after the decimal point"},
		{`1a == 1`, 1, "cannot start with a digit"},
		{`flow.name == "a" # comment`, 18, "unexpected character '#'"},
		{`flow.name == "é" and €`, 22, "unexpected character '€'"},
		{"flow.name == \"\xff\"", 15, "not valid UTF-8"},
		{`[1, 2`, 6, "expected ',' or ']' in the list, found the end"},
		{`[1 2]`, 4, "expected ',' or ']'"},
		{`exists(flow flow)`, 13, "expected ',' or ')'"},
		{strings.Repeat("(", 70) + "true" + strings.Repeat(")", 70), 65, "nests deeper than 64"},
		{strings.Repeat("not ", 70) + "true", 257, "nests deeper than 64"},
		{strings.Repeat(" ", MaxLength+1), MaxLength + 1, "at most 4096 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.text[:min(len(tc.text), 40)], func(t *testing.T) {
			_, err := Parse(tc.text)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if pe.Column != tc.column || !strings.Contains(pe.Message, tc.msg) {
				t.Errorf("got column %d %q, want column %d %q", pe.Column, pe.Message, tc.column, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("column %d: ", pe.Column)) {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

// FuzzParseExpression: Parse never panics; what it accepts formats to canonical text that parses to the same
// canonical text, and compiles to Rego that OPA accepts.
func FuzzParseExpression(f *testing.F) {
	for _, s := range []string{
		`${{ flow.tags.risk-level == "high" and matches(artifact.name, "^prod:.*") }}`,
		`flow.name in ["a", "b"] or not exists(flow.tags.team)`,
		`flow.tags["odd key"] >= 2`,
		`(true)`, `"a\"b\\c" == flow.name`, `-01.50 < flow.tags.x`, `${{`, `}}`, `[`, `not`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		e, err := Parse(text)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Column < 1 || pe.Offset > len(text) {
				t.Fatalf("Parse(%q): %v is not an *Error within the text", text, err)
			}
			return
		}
		canonical := e.String()
		again, err := Parse(canonical)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", canonical, text, err)
		}
		if again.String() != canonical {
			t.Fatalf("canonical form is not stable: %q then %q", canonical, again.String())
		}
		src := "package f\n\n" + RegoHelpers + "\nc(" + e.RegoParams() + ") := " + e.Rego() + "\n"
		if _, err := ast.ParseModuleWithOpts("f.rego", src, ast.ParserOptions{RegoVersion: ast.RegoV1}); err != nil {
			t.Fatalf("Rego of %q does not parse: %v\n%s", text, err, src)
		}
	})
}
