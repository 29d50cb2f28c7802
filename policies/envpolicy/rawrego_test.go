package envpolicy

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/policies/rego"
)

func mustParseRego(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := ParseRego([]byte(src))
	if err != nil {
		t.Fatalf("ParseRego: %v", err)
	}
	return p
}

func TestRawRegoPolicy(t *testing.T) {
	src, err := os.ReadFile("testdata/policies/registry-and-pci.rego")
	if err != nil {
		t.Fatal(err)
	}
	p := mustParseRego(t, string(src))
	if p.Kind != KindRego || p.Package != "data.veritrail.custom" || p.Module != string(src) || len(p.ID) != 32 {
		t.Errorf("policy = %+v", p)
	}
	if mod, err := Compile(p); err != nil || mod != string(src) {
		t.Errorf("Compile of a raw policy is its module: %v", err)
	}
	p.Name, p.Version = "registry", 2
	e := NewEngine(Options{})
	arts := []Artifact{
		artifact("registry.example.com/api:1", trail("api-ci", "t1", "COMPLIANT", nil, onTrail("pr", "pull_request", true, 1))),
		artifact("docker.io/library/redis:7", trail("api-ci", "t2", "COMPLIANT", nil)),
	}
	pci := Environment{Name: "payments", Type: "K8S", Tags: map[string]string{"pci": "true"}}
	res, err := e.EvaluateSnapshot(context.Background(), []*Policy{p}, NewInput(pci, arts))
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Compliant || res[1].Compliant {
		t.Fatalf("results = %s", dump(res))
	}
	got := res[1].Policies[0]
	if got.PolicyName != "registry" || got.PolicyVersion != 2 || got.Status != StatusNonCompliant {
		t.Errorf("evaluation = %+v", got)
	}
	checkRules(t, got.RuleEvaluations, []want{
		{"registry", false, false, []string{"untrusted_registry"}},
		{"pci-review", false, false, []string{ResolutionMissingAttestation}},
	})
	r := got.RuleEvaluations[1]
	if r.Rule.Type != "pci-review" || string(r.Rule.Definition) != `{"environment_tag":"pci"}` ||
		r.Resolutions[0].Context != (ResolutionContext{FlowName: "api-ci", TrailName: "t2", AttestationType: "pull_request"}) ||
		r.Resolutions[0].Message != "trail t2 of flow api-ci has no compliant pull request" {
		t.Errorf("rule = %s", dump(r))
	}
	res, err = e.EvaluateSnapshot(context.Background(), []*Policy{p}, NewInput(prod, arts))
	if err != nil || !res[1].Policies[0].RuleEvaluations[1].Ignored {
		t.Errorf("outside PCI: %v %s", err, dump(res))
	}
}

// The policy's own Rego unit tests run under the same capabilities.
func TestRawRegoUnitTests(t *testing.T) {
	sources := map[string]string{}
	for _, f := range []string{"registry-and-pci.rego", "registry-and-pci_test.rego"} {
		b, err := os.ReadFile("testdata/policies/" + f)
		if err != nil {
			t.Fatal(err)
		}
		sources[f] = string(b)
	}
	res, err := rego.RunTests(context.Background(), sources, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("results = %+v", res)
	}
	for _, r := range res {
		if !r.Pass {
			t.Errorf("%s failed: %+v", r.Name, r)
		}
	}
}

func TestParseRegoErrors(t *testing.T) {
	tests := []struct {
		name, src    string
		msg          string
		line, column int
	}{
		{"syntax", "package p\n\nrule_evaluations := [\n", "unexpected eof token", 4, 0},
		{"network", "package p\n\nrule_evaluations := [r]\n\nr := http.send({\"method\": \"get\", \"url\": \"https://example.com\"})\n",
			"undefined function http.send", 5, 6},
		{"runtime", "package p\n\nrule_evaluations := [opa.runtime()]\n", "undefined function opa.runtime", 3, 22},
		{"clock", "package p\n\nrule_evaluations := [] if time.now_ns() > 0\n", "undefined function time.now_ns", 3, 27},
		{"no entry point", "package p\n\nallow := true\n", "defines rule_evaluations", 0, 0},
		{"reserved package", "package veritrail_batch\n\nrule_evaluations := []\n", "is reserved", 1, 1},
		{"unsafe", "package p\n\nrule_evaluations := [x]\n", "var x is unsafe", 3, 22},
		{"not UTF-8", "package p\n\n# \xff\nrule_evaluations := []\n", "not valid UTF-8", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRego([]byte(tc.src))
			ps := problems(t, err)
			p := ps[0]
			if p.Field != FieldPolicyFile || !strings.Contains(p.Message, tc.msg) || p.Line != tc.line || (tc.column > 0 && p.Column != tc.column) {
				t.Errorf("got %+v, want %q at %d:%d", ps, tc.msg, tc.line, tc.column)
			}
		})
	}
}

// A raw policy that computes forever is stopped at its time limit; one that returns something else than rule
// evaluations is an error, never a pass.
func TestRawRegoFailures(t *testing.T) {
	in := NewInput(prod, []Artifact{artifact("a"), artifact("b")})
	tests := []struct{ name, src, err string }{
		{"forever", `package p

rule_evaluations := [{"rule": {"type": "x"}, "satisfied": n > 0}] if {
	n := count([i | some i in numbers.range(1, 100000000000)])
}
`, "exceeded its time limit of 50ms"},
		{"nested loops", `package p

rule_evaluations := [{"rule": {"type": "x"}, "satisfied": true}] if {
	every i in numbers.range(1, 100000) {
		every j in numbers.range(1, 100000) { i + j > 0 }
	}
}
`, "exceeded its time limit of 50ms"},
		{"not a boolean", "package p\n\nrule_evaluations := [{\"rule\": {\"type\": \"x\"}, \"satisfied\": \"yes\"}]\n",
			"artifact a: rule_evaluations[0].satisfied: want a boolean, got string"},
		{"no rule type", "package p\n\nrule_evaluations := [{\"rule\": {}, \"satisfied\": true}]\n",
			"artifact a: rule_evaluations[0].rule.type: is required"},
		{"not a list", "package p\n\nrule_evaluations := {\"satisfied\": true}\n",
			"artifact a: rule_evaluations: want an array of rule evaluations, got object"},
		{"undefined for one artifact", "package p\n\nrule_evaluations := [] if input.artifact.name == \"a\"\n",
			"artifact b: rule_evaluations is undefined"},
		{"bad resolution", "package p\n\nrule_evaluations := [{\"rule\": {\"type\": \"x\"}, \"satisfied\": false, \"resolutions\": [{\"type\": 1}]}]\n",
			"rule_evaluations[0].resolutions[0].type: want a string, got number"},
	}
	e := NewEngine(Options{RegoTimeout: 50 * time.Millisecond})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustParseRego(t, tc.src)
			start := time.Now()
			_, err := e.Evaluate(context.Background(), p, in)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v to stop", d)
			}
		})
	}
}

// rule_evaluations may be a set (in the order of its values); resolutions and ignored may be left out.
func TestRawRegoShapes(t *testing.T) {
	p := mustParseRego(t, `package p

rule_evaluations contains {"rule": {"type": "named", "definition": {"name": input.artifact.name}}, "satisfied": true}

rule_evaluations contains {"rule": {"type": "other"}, "satisfied": false, "resolutions": [{"type": "x", "context": {"flow_name": "f", "extra": 1}}]}
`)
	evals, err := NewEngine(Options{}).Evaluate(context.Background(), p, NewInput(prod, []Artifact{artifact("a")}))
	if err != nil {
		t.Fatal(err)
	}
	got := evals[0]
	if got.Compliant || len(got.RuleEvaluations) != 2 {
		t.Fatalf("%s", dump(got))
	}
	other, named := got.RuleEvaluations[0], got.RuleEvaluations[1]
	if named.Rule.Type != "named" || string(named.Rule.Definition) != `{"name":"a"}` || named.Resolutions == nil || len(named.Resolutions) != 0 {
		t.Errorf("named = %s", dump(named))
	}
	if other.Rule.Type != "other" || string(other.Rule.Definition) != "{}" || other.Resolutions[0].Context.FlowName != "f" {
		t.Errorf("other = %s", dump(other))
	}
}
