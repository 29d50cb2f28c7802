package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testPolicy = `_schema: https://kosli.com/schemas/policy/environment/v1
artifacts:
  provenance:
    required: true
  attestations:
    - name: snyk
      type: snyk
      if: ${{ flow.tags.risk-level == "high" }}
    - name: release
      type: decision
      for_control: change-approval
`

// writeFiles writes name -> content into a temporary directory and returns its path.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runPolicyCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), append([]string{"policy"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestPolicyLint(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"good.yml": testPolicy,
		"bad.yml": `_schema: https://kosli.com/schemas/policy/environment/v2
artifacts:
  attestations:
    - name: snyk
      type: snyc
      if: ${{ flow.tags.risk-level = "high" }}
`,
		"syntax.yaml": "_schema: x\nartifacts: [\n",
		"good.rego":   "package p\n\nrule_evaluations := []\n",
		"bad.rego":    "package p\n\nrule_evaluations := [http.send({})]\n",
		"p_test.rego": "package p_test\n\ntest_x if true\n",
	})
	in := func(name string) string { return filepath.Join(dir, name) }

	out, _, err := runPolicyCmd(t, "lint", in("good.yml"), in("good.rego"), in("p_test.rego"))
	if err != nil || out != "ok "+in("good.yml")+"\nok "+in("good.rego")+"\n" {
		t.Errorf("valid policies: %v, output %q", err, out)
	}
	if out, _, err := runPolicyCmd(t, "lint", "-q", in("good.yml"), in("good.rego")); err != nil || out != "" {
		t.Errorf("valid policies, -q: %v, output %q", err, out)
	}

	out, _, err = runPolicyCmd(t, "lint", in("good.yml"), in("bad.yml"), in("syntax.yaml"), in("bad.rego"))
	if err == nil || err.Error() != "5 problem(s) in 3 of 4 file(s)" {
		t.Errorf("err = %v", err)
	}
	for _, want := range []string{
		in("bad.yml") + `:1:10: _schema: version v2 is not supported; the only version is v1`,
		in("bad.yml") + `:5:13: artifacts.attestations[0].type: "snyc" is not a supported attestation type`,
		in("bad.yml") + `:6:36: artifacts.attestations[0].if: column 26: '=' is not an operator; compare with '=='`,
		in("syntax.yaml") + `:2: is not valid YAML: `,
		in("bad.rego") + `:3:22: undefined function http.send`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, _, err = runPolicyCmd(t, "lint", "--controls", "other", in("good.yml"))
	if err == nil || !strings.Contains(out, in("good.yml")+":11:20: artifacts.attestations[1].for_control: control 'change-approval' does not exist") {
		t.Errorf("--controls: %v\n%s", err, out)
	}
	if _, _, err := runPolicyCmd(t, "lint", in("missing.yml")); err == nil {
		t.Error("a missing file linted clean")
	}
}

func TestPolicyCompile(t *testing.T) {
	dir := writeFiles(t, map[string]string{"p.yml": testPolicy, "bad.yml": "artifacts: {}\n", "p.rego": "package p\n\nrule_evaluations := []\n"})
	out, _, err := runPolicyCmd(t, "compile", filepath.Join(dir, "p.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"package veritrail.envpolicy", "# artifacts.attestations[1]: decision 'release' for control 'change-approval', compliant.",
		`object.get(t.flow.tags, "risk-level", null) == "high"`} {
		if !strings.Contains(out, want) {
			t.Errorf("compiled module lacks %q", want)
		}
	}
	out, _, err = runPolicyCmd(t, "compile", filepath.Join(dir, "p.rego"))
	if err != nil || out != "package p\n\nrule_evaluations := []\n" {
		t.Errorf("raw Rego: %v %q", err, out)
	}
	out, _, err = runPolicyCmd(t, "compile", filepath.Join(dir, "bad.yml"))
	if err == nil || !strings.Contains(out, "bad.yml:1:1: _schema: is required") {
		t.Errorf("invalid: %v %q", err, out)
	}
	if _, _, err := runPolicyCmd(t, "compile"); err == nil {
		t.Error("compile without a file succeeded")
	}
}

func TestPolicyUsage(t *testing.T) {
	if _, errOut, err := runPolicyCmd(t); err == nil || err.Error() != "no policy subcommand given" || !strings.Contains(errOut, "veritrail policy [command]") {
		t.Errorf("no subcommand: %v %q", err, errOut)
	}
	if _, _, err := runPolicyCmd(t, "frobnicate"); err == nil || err.Error() != `unknown policy subcommand "frobnicate"` {
		t.Errorf("unknown: %v", err)
	}
	if _, _, err := runPolicyCmd(t, "what-if"); err == nil || !strings.Contains(err.Error(), "usage: veritrail policy what-if") {
		t.Errorf("what-if without a file: %v", err)
	}
	if out, _, err := runPolicyCmd(t, "help"); err != nil || !strings.Contains(out, "what-if") {
		t.Errorf("help: %v\n%s", err, out)
	}
	if out, _, err := runPolicyCmd(t, "test", "-h"); err != nil || !strings.Contains(out, "A fixture file:") {
		t.Errorf("test -h: %v\n%s", err, out)
	}
	if _, _, err := runPolicyCmd(t, "test", "--run", "(", "x.yml"); err == nil || !strings.Contains(err.Error(), "--run") {
		t.Errorf("bad --run: %v", err)
	}
}

// TestPolicyTestCommand: `policy test` hands its files, -v and --run to the runner (policies/policytest).
func TestPolicyTestCommand(t *testing.T) {
	fixture := "policy: prod.yml\nenvironment: {name: prod, type: K8S}\ncases:\n" +
		"  - name: no provenance\n    artifact: {name: a:1}\n    expect: {compliant: false}\n" +
		"  - name: allowlisted\n    artifact: {name: b:1, allowlisted: true}\n    expect: {compliant: true}\n"
	dir := writeFiles(t, map[string]string{"prod.yml": testPolicy, "cases.yml": fixture})
	out, _, err := runPolicyCmd(t, "test", "-v", "--run", "allow", filepath.Join(dir, "cases.yml"))
	if err != nil || out != "--- PASS: "+filepath.Join(dir, "cases.yml")+": allowlisted\nok: 1 passed\n" {
		t.Errorf("policy test -v --run allow: %v\n%s", err, out)
	}
	if _, _, err := runPolicyCmd(t, "test"); err == nil || !strings.Contains(err.Error(), "usage: veritrail policy test FILE...") {
		t.Errorf("policy test without files: %v", err)
	}
}

const testTemplate = `version: 1
trail:
  attestations:
    - {name: pr, type: pull_request}
  artifacts:
    - name: backend
      attestations:
        - {name: unit-test, type: junit}
`

// badTemplate has problems found out of line order: the schema's (lines 5 and 8) before the duplicate name (line 4).
const badTemplate = `version: 1
trail:
  attestations:
    - {name: pr, type: pull_request}
    - {name: pr, type: snyc}
  artifacts:
    - name: backend
      colour: blue
`

// TestPolicyLintOutput: problems sorted by line and column, -q, --format json, and flow templates by shape or --kind.
func TestPolicyLintOutput(t *testing.T) {
	dir := writeFiles(t, map[string]string{"flow.yml": testTemplate, "bad-flow.yml": badTemplate, "p.yml": testPolicy,
		"empty.yml": "# a template with nothing in it yet\n"})
	in := func(name string) string { return filepath.Join(dir, name) }

	out, _, err := runPolicyCmd(t, "lint", in("flow.yml"), in("bad-flow.yml"))
	if err == nil || err.Error() != "3 problem(s) in 1 of 2 file(s)" {
		t.Errorf("err = %v", err)
	}
	want := "ok " + in("flow.yml") + "\n" +
		in("bad-flow.yml") + `:5:14: trail.attestations[1].name: duplicate attestation name "pr": already used by trail.attestations[0]` + "\n" +
		in("bad-flow.yml") + `:5:24: trail.attestations[1].type: "snyc" is not a supported attestation type; use one of generic, junit, snyk, pull_request, jira, sonar, decision, * or custom:<type-name>` + "\n" +
		in("bad-flow.yml") + `:8:7: trail.artifacts[0].colour: is not a known field; an artifact has name and attestations` + "\n"
	if out != want {
		t.Errorf("lint of templates:\n%s\nwant\n%s", out, want)
	}

	out, _, err = runPolicyCmd(t, "lint", "-q", "--format", "json", in("flow.yml"), in("bad-flow.yml"))
	if err == nil {
		t.Error("json lint of a bad template passed")
	}
	var got []lintProblem
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--format json: %v\n%s", err, out)
	}
	if len(got) != 3 || got[0] != (lintProblem{File: in("bad-flow.yml"), Line: 5, Column: 14, Severity: "error",
		Message: `duplicate attestation name "pr": already used by trail.attestations[0]`, Rule: "trail.attestations[1].name"}) ||
		got[2].Line != 8 || got[2].Rule != "trail.artifacts[0].colour" {
		t.Errorf("--format json: %+v", got)
	}
	if out, _, err := runPolicyCmd(t, "lint", "--format", "json", in("flow.yml")); err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("json lint of a good template: %v %q", err, out)
	}
	if _, _, err := runPolicyCmd(t, "lint", "--format", "xml", in("flow.yml")); err == nil || !strings.Contains(err.Error(), "--format") {
		t.Errorf("--format xml: %v", err)
	}

	// An empty file is a policy by its shape, and a valid template when said to be one.
	if _, _, err := runPolicyCmd(t, "lint", in("empty.yml")); err == nil {
		t.Error("an empty file linted clean as a policy")
	}
	if out, _, err := runPolicyCmd(t, "lint", "--kind", "template", in("empty.yml")); err != nil || out != "ok "+in("empty.yml")+"\n" {
		t.Errorf("--kind template: %v %q", err, out)
	}
	if out, _, err := runPolicyCmd(t, "lint", "--kind", "policy", in("flow.yml")); err == nil || !strings.Contains(out, in("flow.yml")+":1:1: version: is not a known field") {
		t.Errorf("--kind policy of a template: %v %q", err, out)
	}
	if _, _, err := runPolicyCmd(t, "lint", "--kind", "flow", in("flow.yml")); err == nil || !strings.Contains(err.Error(), "--kind") {
		t.Errorf("--kind flow: %v", err)
	}
}

func TestPolicyCompileTemplate(t *testing.T) {
	dir := writeFiles(t, map[string]string{"flow.yml": testTemplate, "bad-flow.yml": badTemplate})
	out, _, err := runPolicyCmd(t, "compile", filepath.Join(dir, "flow.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"package veritrail.flowtemplate", `{"name": "pr", "type": "pull_request"}`, `"name": "backend"`} {
		if !strings.Contains(out, want) {
			t.Errorf("compiled template lacks %q:\n%s", want, out)
		}
	}
	out, _, err = runPolicyCmd(t, "compile", filepath.Join(dir, "bad-flow.yml"))
	if err == nil || err.Error() != filepath.Join(dir, "bad-flow.yml")+" is not a valid flow template" ||
		!strings.HasPrefix(out, filepath.Join(dir, "bad-flow.yml")+":5:14: ") {
		t.Errorf("invalid template: %v %q", err, out)
	}
}
