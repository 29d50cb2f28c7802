package policytest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/policies/policytest"
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

// runTests runs the files with opts and returns what the runner wrote.
func runTests(t *testing.T, opts policytest.Options, files ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := policytest.Run(context.Background(), files, opts, &out)
	return out.String(), err
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
	out, err := runTests(t, policytest.Options{}, filepath.Join(dir, "cases.yml"))
	if err != nil || out != "ok: 4 passed\n" {
		t.Errorf("passing fixture: %v\n%s", err, out)
	}
	out, err = runTests(t, policytest.Options{Verbose: true, Filter: regexp.MustCompile("decision")}, filepath.Join(dir, "cases.yml"))
	if err != nil || !strings.Contains(out, "--- PASS: "+filepath.Join(dir, "cases.yml")+": failed decision\n") || !strings.Contains(out, "ok: 1 passed") {
		t.Errorf("-v --run: %v\n%s", err, out)
	}

	wrong := strings.Replace(fixtureFile, "attestations[1]: {satisfied: false, resolutions: [non_compliant_attestation]}",
		"attestations[1]: {satisfied: true}\n        attestations[7]: {satisfied: true}", 1)
	wrong = strings.Replace(wrong, "compliant: false\n", "compliant: true\n", 1)
	dir = writeFiles(t, map[string]string{"prod.yml": testPolicy, "cases.yml": wrong})
	out, err = runTests(t, policytest.Options{}, filepath.Join(dir, "cases.yml"))
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
		if _, err := runTests(t, policytest.Options{}, filepath.Join(dir, file)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", file, err, want)
		}
	}
	out, err := runTests(t, policytest.Options{}, filepath.Join(dir, "badpolicy.yml"))
	if err == nil || !strings.Contains(out, filepath.Join(dir, "bad.yml")+`:2:35: artifacts.attestations[0].type: "nope" is not a supported attestation type`) {
		t.Errorf("invalid policy: %v\n%s", err, out)
	}
}

func TestPolicyTestRego(t *testing.T) {
	policy, err := os.ReadFile("../envpolicy/testdata/policies/registry-and-pci.rego")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("../envpolicy/testdata/policies/registry-and-pci_test.rego")
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
	out, err := runTests(t, policytest.Options{Verbose: true}, in("pci.rego"), in("pci_test.rego"), in("cases.yml"))
	if err != nil || !strings.Contains(out, "ok: 5 passed") || !strings.Contains(out, "--- PASS: "+in("pci_test.rego")+":9: test_registry_image_passes") {
		t.Errorf("passing: %v\n%s", err, out)
	}
	out, err = runTests(t, policytest.Options{}, in("pci.rego"), in("failing_test.rego"))
	if err == nil || !strings.Contains(out, "--- FAIL: "+in("failing_test.rego")+":5: test_wrong\n    checking") {
		t.Errorf("failing: %v\n%s", err, out)
	}
	dir = writeFiles(t, map[string]string{"net.rego": "package n\n\nrule_evaluations := [http.send({})]\n", "n_test.rego": "package n_test\n\ntest_a if true\n"})
	out, err = runTests(t, policytest.Options{}, filepath.Join(dir, "net.rego"), filepath.Join(dir, "n_test.rego"))
	if err == nil || !strings.Contains(out, "undefined function http.send") {
		t.Errorf("restricted: %v\n%s", err, out)
	}
}
