// Package policytest runs the tests authors write for environment policies and flow templates:
// fixture files (a policy, an environment, and artifacts with the decisions they must get; or a
// flow template and trails of evidence with the compliance they must get) and the Rego unit tests
// (test_ rules) of raw Rego policies. It also reads authors' files for the lint and compile
// commands: which kind a file is, and its problems sorted by position. `veritrail policy test` is its command line;
// the output reads like go test's.
package policytest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/rego"
	"github.com/veritrail/veritrail/policies/template"
	"github.com/veritrail/veritrail/policies/yamlschema"
)

// FixtureFormat documents a fixture file, for the command's help.
const FixtureFormat = `A fixture file: either of an environment policy,

  policy: prod-policy.yml            # relative to the fixture file; YAML or .rego
  environment: {name: prod, type: K8S, tags: {pci: "true"}}
  controls: [change-approval]        # optional: the controls for_control may name
  cases:
    - name: a reviewed backend passes
      artifact:
        name: registry.example.com/api:1.4
        fingerprint: 3f2a...         # optional: derived from the name
        allowlisted: false           # optional
        trails:                      # none: an artifact of no flow
          - flow: {name: api-ci, tags: {risk-level: high}}
            name: 9c1e...
            compliance_state: COMPLIANT      # COMPLIANT, NON-COMPLIANT or INCOMPLETE (default COMPLIANT)
            attestations:
              # target: artifact (default) or trail; compliant defaults to true;
              # created_at defaults to the position in the list (later is newer)
              - {name: snyk, type: snyk}
              - {name: pr, type: pull_request, target: trail, compliant: false}
              - {name: release, type: decision, control: change-approval}
      expect:
        compliant: true              # the verdict in the environment (allowlisting included)
        rules:                       # optional, by rule id: provenance, trail-compliance, attestations[N]
          attestations[1]: {satisfied: false, resolutions: [non_compliant_attestation]}

or of a flow template:

  template: flow-template.yml        # relative to the fixture file
  cases:
    - name: a failed unit test fails the backend
      trail:                         # what was reported to the trail, in report order
        artifacts:                   # name: the template name it was reported with
          - {name: backend, fingerprint: 3f2a...}    # fingerprint optional: derived from the name
        attestations:
          # compliant defaults to true; artifact (a template name) or fingerprint says which artifact the
          # attestation is about, none: the trail; created_at defaults to the position in the list (later is newer)
          - {name: pr, type: pull_request}
          - {name: unit-test, type: junit, artifact: backend, compliant: false}
      expect:
        compliance: NON-COMPLIANT    # the trail's state: COMPLIANT, NON-COMPLIANT or INCOMPLETE
        attestations:                # trail-level, by name: COMPLETE or MISSING, or {status, compliant, unexpected}
          pr: COMPLETE
        artifacts:                   # by template name (unexpected artifacts by fingerprint)
          backend:
            status: NON-COMPLIANT    # COMPLIANT, NON-COMPLIANT, INCOMPLETE, or MISSING when not reported
            attestations:
              unit-test: {status: COMPLETE, compliant: false}
`

// Options select and report the tests.
type Options struct {
	// Filter runs only the cases and Rego tests whose names match; nil runs all.
	Filter *regexp.Regexp
	// Verbose lists passing (and skipped) tests too, not only failures.
	Verbose bool
}

// Run runs the fixture files and the Rego tests among files (a .rego file is a raw policy or
// its tests, compiled together; any other is a fixture file) and writes one line per failure
// (per test with Verbose) and a summary to w. It fails when a test fails, when none ran, or
// when a file cannot be read.
func Run(ctx context.Context, files []string, opts Options, w io.Writer) error {
	filter := opts.Filter
	if filter == nil {
		filter = regexp.MustCompile("")
	}
	t := &tally{w: w, verbose: opts.Verbose}
	e := envpolicy.NewEngine(envpolicy.Options{})
	var te *template.Engine // made for the first template fixture
	regoFiles := map[string]string{}
	for _, f := range files {
		if IsRego(f) {
			content, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			regoFiles[f] = string(content)
			continue
		}
		content, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if isTemplateFixture(content) {
			if te == nil {
				te = template.NewEngine(template.EngineOptions{ResultCacheSize: -1})
			}
			err = runTemplateFixture(ctx, te, f, content, filter, t)
		} else {
			err = runFixture(ctx, e, f, content, filter, t)
		}
		if err != nil {
			return err
		}
	}
	if len(regoFiles) > 0 {
		if err := runRegoTests(ctx, regoFiles, filter, t); err != nil {
			return err
		}
	}
	if t.passed+t.failed == 0 {
		return errors.New("no test cases or Rego tests ran")
	}
	if t.failed > 0 {
		fmt.Fprintf(w, "FAIL: %d passed, %d failed\n", t.passed, t.failed)
		return fmt.Errorf("%d of %d test(s) failed", t.failed, t.passed+t.failed)
	}
	fmt.Fprintf(w, "ok: %d passed\n", t.passed)
	return nil
}

// IsRego reports whether file is a raw Rego policy or Rego tests rather than a YAML policy.
func IsRego(file string) bool { return strings.HasSuffix(file, ".rego") }

// IsRegoTest reports whether file holds Rego unit tests.
func IsRegoTest(file string) bool { return strings.HasSuffix(file, "_test.rego") }

// LoadPolicy parses a policy file, raw Rego or YAML by its name, as the runner does; controls
// (nil: no check) says which controls for_control may name. A *envpolicy.ValidationError comes
// back as it is, for its problems.
func LoadPolicy(file string, controls func(string) bool) (*envpolicy.Policy, error) {
	content, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if IsRego(file) {
		return envpolicy.ParseRego(content)
	}
	return envpolicy.Parse(content, envpolicy.ParseOptions{ControlExists: controls})
}

// WriteProblems writes the problems of err (a policy's or a template's) as FILE:LINE:COL: field: message, sorted
// by line and column, and reports whether err had any (whether it is a validation error).
func WriteProblems(w io.Writer, file string, err error) bool {
	ps := Problems(err)
	if ps == nil {
		return false
	}
	for _, p := range SortProblems(ps) {
		fmt.Fprintln(w, ProblemLine(file, p))
	}
	return true
}

// SortProblems returns a copy of ps ordered by line, then column; problems of the whole file (no line) come first,
// and problems at one position keep the order they were found in.
func SortProblems(ps []yamlschema.Problem) []yamlschema.Problem {
	out := slices.Clone(ps)
	slices.SortStableFunc(out, func(a, b yamlschema.Problem) int {
		if c := cmp.Compare(a.Line, b.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Column, b.Column)
	})
	return out
}

// ProblemLine is one problem as FILE:LINE:COL: field: message (the field left out for the whole file, the line
// and column where unknown).
func ProblemLine(file string, p yamlschema.Problem) string {
	pos := file
	if p.Line > 0 {
		pos += fmt.Sprintf(":%d", p.Line)
		if p.Column > 0 {
			pos += fmt.Sprintf(":%d", p.Column)
		}
	}
	if FieldWhole(p.Field) {
		return pos + ": " + p.Message
	}
	return pos + ": " + p.Field + ": " + p.Message
}

// tally counts outcomes and writes them as go test does.
type tally struct {
	w              io.Writer
	verbose        bool
	passed, failed int
}

func (t *tally) pass(name string) {
	t.passed++
	if t.verbose {
		fmt.Fprintf(t.w, "--- PASS: %s\n", name)
	}
}

func (t *tally) fail(name string, why []string) {
	t.failed++
	fmt.Fprintf(t.w, "--- FAIL: %s\n", name)
	for _, line := range why {
		fmt.Fprintf(t.w, "    %s\n", line)
	}
}

// runRegoTests checks each raw policy among sources, then runs every test_ rule of them all with OPA's tester.
func runRegoTests(ctx context.Context, sources map[string]string, filter *regexp.Regexp, t *tally) error {
	var invalid []string
	for _, f := range slices.Sorted(maps.Keys(sources)) {
		if IsRegoTest(f) {
			continue
		}
		if _, err := envpolicy.ParseRego([]byte(sources[f])); err != nil {
			var buf bytes.Buffer
			if !WriteProblems(&buf, f, err) {
				fmt.Fprintf(&buf, "%s: %v\n", f, err)
			}
			invalid = append(invalid, strings.Split(strings.TrimSpace(buf.String()), "\n")...)
		}
	}
	if len(invalid) > 0 {
		t.fail("raw Rego policies", invalid)
		return nil
	}
	res, err := rego.RunTests(ctx, sources, filter.String(), 0)
	if err != nil {
		return fmt.Errorf("rego tests: %w", err)
	}
	for _, r := range res {
		name := fmt.Sprintf("%s:%d: %s", r.File, r.Row, r.Name)
		switch {
		case r.Skipped:
			if t.verbose {
				fmt.Fprintf(t.w, "--- SKIP: %s\n", name)
			}
		case r.Pass:
			t.pass(name)
		default:
			var why []string
			if r.Error != "" {
				why = append(why, r.Error)
			}
			if out := strings.TrimSpace(r.Output); out != "" {
				why = append(why, strings.Split(out, "\n")...)
			}
			t.fail(name, why)
		}
	}
	return nil
}
