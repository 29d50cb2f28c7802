package main

import (
	"bytes"
	"context"
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
	err = runPolicy(context.Background(), args, &out, &errOut)
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
	if err != nil || out != "" {
		t.Errorf("valid policies: %v, output %q", err, out)
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

const fixtureFile = `policy: prod.yml
environment: {name: prod, type: K8S}
controls: [change-approval]
cases:
  - name: reviewed high-risk service
    artifact:
      name: registry.example.com/api:1
      trails:
        - flow: {name: api-ci, tags: {risk-level: high}}
          name: c0ffee
          attestations:
            - {name: snyk, type: snyk}
            - {name: release, type: decision, control: change-approval}
    expect:
      compliant: true
      rules:
        attestations[0]: {satisfied: true, ignored: false, resolutions: [rule_satisfied]}
  - name: low risk needs no scan
    artifact:
      name: registry.example.com/web:1
      trails:
        - flow: {name: web-ci, tags: {risk-level: low}}
          name: beef
          attestations:
            - {name: release, type: decision, control: change-approval}
    expect:
      compliant: true
      rules:
        attestations[0]: {ignored: true}
  - name: failed decision
    artifact:
      name: registry.example.com/api:2
      trails:
        - flow: {name: api-ci, tags: {risk-level: high}}
          name: dead
          attestations:
            - {name: snyk, type: snyk}
            - {name: release, type: decision, control: change-approval, compliant: true, created_at: 1}
            - {name: release, type: decision, control: change-approval, compliant: false, created_at: 2}
    expect:
      compliant: false
      rules:
        attestations[1]: {satisfied: false, resolutions: [non_compliant_attestation]}
  - name: allowlisted without provenance
    artifact: {name: "datadog/agent:7", allowlisted: true}
    expect:
      compliant: true
      rules:
        provenance: {satisfied: false, resolutions: [no_provenance]}
`

func TestPolicyTestFixtures(t *testing.T) {
	dir := writeFiles(t, map[string]string{"prod.yml": testPolicy, "cases.yml": fixtureFile})
	out, _, err := runPolicyCmd(t, "test", filepath.Join(dir, "cases.yml"))
	if err != nil || out != "ok: 4 passed\n" {
		t.Errorf("passing fixture: %v\n%s", err, out)
	}
	out, _, err = runPolicyCmd(t, "test", "-v", "--run", "decision", filepath.Join(dir, "cases.yml"))
	if err != nil || !strings.Contains(out, "--- PASS: "+filepath.Join(dir, "cases.yml")+": failed decision\n") || !strings.Contains(out, "ok: 1 passed") {
		t.Errorf("-v --run: %v\n%s", err, out)
	}

	wrong := strings.Replace(fixtureFile, "attestations[1]: {satisfied: false, resolutions: [non_compliant_attestation]}",
		"attestations[1]: {satisfied: true}\n        attestations[7]: {satisfied: true}", 1)
	wrong = strings.Replace(wrong, "compliant: false\n", "compliant: true\n", 1)
	dir = writeFiles(t, map[string]string{"prod.yml": testPolicy, "cases.yml": wrong})
	out, _, err = runPolicyCmd(t, "test", filepath.Join(dir, "cases.yml"))
	if err == nil || err.Error() != "1 of 4 test(s) failed" {
		t.Errorf("err = %v", err)
	}
	for _, want := range []string{
		"--- FAIL: " + filepath.Join(dir, "cases.yml") + ": failed decision",
		"    compliant = false, want true",
		"    attestations[1]: got satisfied=false ignored=false resolutions=[non_compliant_attestation], want satisfied=true",
		"[non_compliant_attestation] the latest decision for control 'change-approval' ('release') on artifact registry.example.com/api:2",
		"    attestations[7]: the policy has no such rule (it has attestations[0], attestations[1], provenance)",
		"FAIL: 3 passed, 1 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPolicyTestBadFixtures(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"prod.yml":       testPolicy,
		"unknown.yml":    "policy: prod.yml\ncases: [{name: x, artifact: {name: a}, expect: {compliant: true, extra: 1}}]\n",
		"nopolicy.yml":   "cases: []\n",
		"badpolicy.yml":  "policy: bad.yml\ncases: [{name: x, artifact: {name: a}}]\n",
		"bad.yml":        "_schema: https://x.com/v1\nartifacts: {attestations: [{type: nope}]}\n",
		"badtarget.json": `{"policy": "prod.yml", "cases": [{"name": "x", "artifact": {"name": "a", "trails": [{"flow": {"name": "f"}, "name": "t", "attestations": [{"name": "a", "type": "junit", "target": "flow"}]}]}}]}`,
	})
	for file, want := range map[string]string{
		"unknown.yml":    "field extra not found",
		"nopolicy.yml":   "policy: name the policy file",
		"badtarget.json": "needs a name, a type, and a target of artifact or trail",
	} {
		if _, _, err := runPolicyCmd(t, "test", filepath.Join(dir, file)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", file, err, want)
		}
	}
	out, _, err := runPolicyCmd(t, "test", filepath.Join(dir, "badpolicy.yml"))
	if err == nil || !strings.Contains(out, filepath.Join(dir, "bad.yml")+`:2:35: artifacts.attestations[0].type: "nope" is not a supported attestation type`) {
		t.Errorf("invalid policy: %v\n%s", err, out)
	}
}

func TestPolicyTestRego(t *testing.T) {
	policy, err := os.ReadFile("../../policies/envpolicy/testdata/policies/registry-and-pci.rego")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("../../policies/envpolicy/testdata/policies/registry-and-pci_test.rego")
	if err != nil {
		t.Fatal(err)
	}
	fixture := `policy: pci.rego
environment: {name: payments, type: K8S, tags: {pci: "true"}}
cases:
  - name: unreviewed trail in PCI
    artifact:
      name: registry.example.com/api:1
      trails: [{flow: {name: api-ci}, name: t1}]
    expect:
      compliant: false
      rules:
        registry: {satisfied: true}
        pci-review: {satisfied: false, resolutions: [missing_attestation]}
`
	dir := writeFiles(t, map[string]string{"pci.rego": string(policy), "pci_test.rego": string(tests), "cases.yml": fixture,
		"failing_test.rego": "package veritrail.custom_test\n\nimport data.veritrail.custom\n\ntest_wrong if {\n\tprint(\"checking\")\n\tcustom.registry == \"docker.io/\"\n}\n"})
	in := func(name string) string { return filepath.Join(dir, name) }
	out, _, err := runPolicyCmd(t, "test", "-v", in("pci.rego"), in("pci_test.rego"), in("cases.yml"))
	if err != nil || !strings.Contains(out, "ok: 5 passed") || !strings.Contains(out, "--- PASS: "+in("pci_test.rego")+":9: test_registry_image_passes") {
		t.Errorf("passing: %v\n%s", err, out)
	}
	out, _, err = runPolicyCmd(t, "test", in("pci.rego"), in("failing_test.rego"))
	if err == nil || !strings.Contains(out, "--- FAIL: "+in("failing_test.rego")+":5: test_wrong\n    checking") {
		t.Errorf("failing: %v\n%s", err, out)
	}
	dir = writeFiles(t, map[string]string{"net.rego": "package n\n\nrule_evaluations := [http.send({})]\n", "n_test.rego": "package n_test\n\ntest_a if true\n"})
	out, _, err = runPolicyCmd(t, "test", filepath.Join(dir, "net.rego"), filepath.Join(dir, "n_test.rego"))
	if err == nil || !strings.Contains(out, "undefined function http.send") {
		t.Errorf("restricted: %v\n%s", err, out)
	}
}

func TestPolicyUsage(t *testing.T) {
	if _, errOut, err := runPolicyCmd(t); err == nil || !strings.Contains(errOut, "Usage: veritrail policy") {
		t.Errorf("no subcommand: %v %q", err, errOut)
	}
	if _, _, err := runPolicyCmd(t, "frobnicate"); err == nil || err.Error() != `unknown policy subcommand "frobnicate"` {
		t.Errorf("unknown: %v", err)
	}
	if _, _, err := runPolicyCmd(t, "what-if"); err == nil || !strings.Contains(err.Error(), "usage: veritrail policy what-if") {
		t.Errorf("what-if without a file: %v", err)
	}
	if out, _, err := runPolicyCmd(t, "help"); err != nil || !strings.Contains(out, "A fixture file:") {
		t.Errorf("help: %v", err)
	}
	if _, _, err := runPolicyCmd(t, "test", "--run", "(", "x.yml"); err == nil || !strings.Contains(err.Error(), "--run") {
		t.Errorf("bad --run: %v", err)
	}
}
