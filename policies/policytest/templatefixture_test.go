package policytest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/policies/policytest"
)

const flowTemplate = `version: 1
trail:
  attestations:
    - {name: pr, type: pull_request}
  artifacts:
    - name: backend
      attestations:
        - {name: unit-test, type: junit}
        - {name: scan, type: snyk}
`

const templateFixture = `template: flow.yml
cases:
  - name: everything reported
    trail:
      artifacts: [{name: backend}]
      attestations:
        - {name: pr, type: pull_request}
        - {name: unit-test, type: junit, artifact: backend}
        - {name: scan, type: snyk, artifact: backend}
    expect:
      compliance: COMPLIANT
      attestations: {pr: COMPLETE}
      artifacts:
        backend: {status: COMPLIANT, attestations: {unit-test: {status: COMPLETE, compliant: true}}}
  - name: a failed unit test
    trail:
      artifacts: [{name: backend, fingerprint: "` + "c0ffee" + `"}]
      attestations:
        - {name: pr, type: pull_request}
        - {name: unit-test, type: junit, fingerprint: c0ffee, compliant: false}
        - {name: scan, type: snyk, artifact: backend}
        - {name: lint, type: generic}
    expect:
      compliance: NON-COMPLIANT
      attestations:
        lint: {status: COMPLETE, unexpected: true}
      artifacts:
        backend:
          status: NON-COMPLIANT
          attestations: {unit-test: {compliant: false}}
  - name: nothing yet
    trail: {}
    expect:
      compliance: INCOMPLETE
      attestations: {pr: MISSING}
      artifacts: {backend: {status: MISSING, attestations: {scan: MISSING}}}
  - name: a later pass replaces a failure
    trail:
      attestations:
        - {name: pr, type: pull_request, compliant: false, created_at: 10}
        - {name: pr, type: pull_request, created_at: 20}
    expect:
      attestations: {pr: {status: COMPLETE, compliant: true}}
`

func TestTemplateFixtures(t *testing.T) {
	dir := writeFiles(t, map[string]string{"flow.yml": flowTemplate, "cases.yml": templateFixture, "prod.yml": testPolicy,
		"policy-cases.yml": fixtureFile})
	in := func(name string) string { return filepath.Join(dir, name) }
	out, err := runTests(t, policytest.Options{}, in("cases.yml"), in("policy-cases.yml"))
	if err != nil || out != "ok: 8 passed\n" {
		t.Errorf("passing fixtures: %v\n%s", err, out)
	}

	wrong := strings.Replace(templateFixture, "compliance: NON-COMPLIANT", "compliance: COMPLIANT", 1)
	wrong = strings.Replace(wrong, "attestations: {pr: MISSING}", "attestations: {pr: COMPLETE, nope: MISSING}", 1)
	wrong = strings.Replace(wrong, "artifacts: {backend: {status: MISSING,", "artifacts: {frontend: {}, backend: {status: INCOMPLETE,", 1)
	dir = writeFiles(t, map[string]string{"flow.yml": flowTemplate, "cases.yml": wrong})
	out, err = runTests(t, policytest.Options{}, filepath.Join(dir, "cases.yml"))
	if err == nil || err.Error() != "2 of 4 test(s) failed" {
		t.Errorf("err = %v", err)
	}
	for _, want := range []string{
		"--- FAIL: " + filepath.Join(dir, "cases.yml") + ": a failed unit test\n    compliance = NON-COMPLIANT, want COMPLIANT\n",
		"        trail: pr (pull_request) status=COMPLETE compliant=true unexpected=false, lint (generic) status=COMPLETE compliant=true unexpected=true\n",
		"        artifact backend: NON-COMPLIANT; unit-test (junit) status=COMPLETE compliant=false unexpected=false, scan (snyk) status=COMPLETE compliant=true unexpected=false\n",
		"--- FAIL: " + filepath.Join(dir, "cases.yml") + ": nothing yet\n",
		"    trail: nope: no such attestation (there are: pr)\n",
		"    trail: pr: got status=MISSING unexpected=false, want status=COMPLETE\n",
		"    artifact backend: status = MISSING, want INCOMPLETE; unit-test (junit) status=MISSING unexpected=false, scan (snyk) status=MISSING unexpected=false\n",
		"    artifact frontend: the trail has no such entry (it has backend)\n",
		"FAIL: 2 passed, 2 failed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestTemplateFixtureErrors(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"flow.yml":      flowTemplate,
		"bad-flow.yml":  "version: 1\ntrail: {attestations: [{name: pr, type: nope}]}\n",
		"unknown.yml":   "template: flow.yml\ncases: [{name: x, trail: {}, expect: {state: COMPLIANT}}]\n",
		"nocases.yml":   "template: flow.yml\n",
		"noname.yml":    "template: flow.yml\ncases: [{name: x, trail: {attestations: [{name: pr}]}}]\n",
		"badstatus.yml": "template: flow.yml\ncases: [{name: x, trail: {}, expect: {attestations: {pr: DONE}}}]\n",
		"badflow.yml":   "template: bad-flow.yml\ncases: [{name: x, trail: {}}]\n",
	})
	for file, want := range map[string]string{
		"unknown.yml":   "field state not found",
		"nocases.yml":   "cases: there are none",
		"noname.yml":    "cases[0].trail.attestations[0]: needs a name and a type",
		"badstatus.yml": `attestation status "DONE": want COMPLETE or MISSING`,
	} {
		if _, err := runTests(t, policytest.Options{}, filepath.Join(dir, file)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", file, err, want)
		}
	}
	out, err := runTests(t, policytest.Options{}, filepath.Join(dir, "badflow.yml"))
	if err == nil || !strings.Contains(out, filepath.Join(dir, "bad-flow.yml")+`:2:41: trail.attestations[0].type: "nope" is not a supported attestation type`) {
		t.Errorf("invalid template: %v\n%s", err, out)
	}
}
