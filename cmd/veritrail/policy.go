package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/rego"
	"github.com/veritrail/veritrail/policies/yamlschema"
)

const policyUsage = `Usage: veritrail policy <subcommand> [flags] FILE...

Tools for authors of environment policies; all but what-if work offline. A FILE ending in .rego is a raw Rego
policy (or its Rego unit tests); any other is a YAML policy.

Subcommands:
  lint [--controls ID,...] FILE...
        check policies against the schema and their expressions; every problem as FILE:LINE:COL: field: message.
        With --controls, for_control must name one of these controls.
  compile FILE
        print the Rego module the policy runs as
  test [--run REGEXP] [-v] FILE...
        run fixture files (.yml, .yaml or .json: a policy, an environment, and artifacts with the decisions they
        must get) and the Rego unit tests (test_ rules) of the .rego files given, which are compiled together.
  what-if --environment ENV [--host URL] [--api-token KEY] [--org ORG] [--name NAME] [--json] FILE
        ask the server how the draft policy FILE would judge the latest snapshot of ENV, without attaching or
        storing it: every artifact that would fail, and why. Fails when one would. --host, --api-token and --org
        default to VERITRAIL_HOST, VERITRAIL_API_TOKEN and VERITRAIL_ORG, then to KOSLI_HOST, KOSLI_API_TOKEN and
        KOSLI_ORG; --host to http://127.0.0.1:8080.

A fixture file:

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
`

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, policyUsage)
		return errors.New("no policy subcommand given")
	}
	sub := args[0]
	fs := flag.NewFlagSet("policy "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, policyUsage) }
	controls := fs.String("controls", "", "lint: comma-separated control ids that for_control may name")
	run := fs.String("run", "", "test: run only the cases and Rego tests whose names match this regular expression")
	verbose := fs.Bool("v", false, "test: list passing cases and tests too")
	whatIf := whatIfFlags(fs)
	files, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	switch sub {
	case "lint":
		if len(files) == 0 {
			return errors.New("usage: veritrail policy lint [--controls ID,...] FILE...")
		}
		return lintPolicies(files, knownControls(*controls), stdout)
	case "compile":
		if len(files) != 1 {
			return errors.New("usage: veritrail policy compile FILE")
		}
		return compilePolicy(files[0], stdout)
	case "test":
		if len(files) == 0 {
			return errors.New("usage: veritrail policy test [--run REGEXP] [-v] FILE...")
		}
		filter, err := regexp.Compile(*run)
		if err != nil {
			return fmt.Errorf("--run: %w", err)
		}
		return testPolicies(ctx, files, filter, *verbose, stdout)
	case "what-if":
		if len(files) != 1 {
			return errors.New("usage: veritrail policy what-if --environment ENV [--host URL] [--api-token KEY] [--org ORG] FILE")
		}
		return runWhatIf(ctx, whatIf, files[0], stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, policyUsage)
		return nil
	}
	fmt.Fprint(stderr, policyUsage)
	return fmt.Errorf("unknown policy subcommand %q", sub)
}

// knownControls is the ParseOptions check of --controls; nil (no check) when the flag is empty.
func knownControls(list string) func(string) bool {
	if list == "" {
		return nil
	}
	ids := strings.Split(list, ",")
	return func(id string) bool { return slices.Contains(ids, id) }
}

func isRego(file string) bool { return strings.HasSuffix(file, ".rego") }

func isRegoTest(file string) bool { return strings.HasSuffix(file, "_test.rego") }

// loadPolicy parses a policy file. A *envpolicy.ValidationError comes back as it is, for its problems.
func loadPolicy(file string, controls func(string) bool) (*envpolicy.Policy, error) {
	content, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if isRego(file) {
		return envpolicy.ParseRego(content)
	}
	return envpolicy.Parse(content, envpolicy.ParseOptions{ControlExists: controls})
}

// problemLines writes the problems of err as FILE:LINE:COL: field: message and reports whether it had any.
func problemLines(w io.Writer, file string, err error) bool {
	var ve *envpolicy.ValidationError
	if !errors.As(err, &ve) {
		return false
	}
	for _, p := range ve.Problems {
		fmt.Fprintln(w, problemLine(file, p))
	}
	return true
}

func problemLine(file string, p yamlschema.Problem) string {
	pos := file
	if p.Line > 0 {
		pos += fmt.Sprintf(":%d", p.Line)
		if p.Column > 0 {
			pos += fmt.Sprintf(":%d", p.Column)
		}
	}
	if p.Field == envpolicy.FieldPolicyFile {
		return pos + ": " + p.Message
	}
	return pos + ": " + p.Field + ": " + p.Message
}

func lintPolicies(files []string, controls func(string) bool, stdout io.Writer) error {
	bad, problems := 0, 0
	for _, f := range files {
		if isRegoTest(f) {
			continue // tests are checked by "policy test"
		}
		_, err := loadPolicy(f, controls)
		if err == nil {
			continue
		}
		bad++
		var ve *envpolicy.ValidationError
		if !errors.As(err, &ve) {
			fmt.Fprintf(stdout, "%s: %v\n", f, err)
			problems++
			continue
		}
		problemLines(stdout, f, err)
		problems += len(ve.Problems)
	}
	if bad > 0 {
		return fmt.Errorf("%d problem(s) in %d of %d file(s)", problems, bad, len(files))
	}
	return nil
}

func compilePolicy(file string, stdout io.Writer) error {
	p, err := loadPolicy(file, nil)
	if err != nil {
		if problemLines(stdout, file, err) {
			return fmt.Errorf("%s is not a valid policy", file)
		}
		return err
	}
	mod, err := envpolicy.Compile(p)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	_, err = io.WriteString(stdout, mod)
	return err
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

func testPolicies(ctx context.Context, files []string, filter *regexp.Regexp, verbose bool, stdout io.Writer) error {
	t := &tally{w: stdout, verbose: verbose}
	e := envpolicy.NewEngine(envpolicy.Options{})
	regoFiles := map[string]string{}
	for _, f := range files {
		if isRego(f) {
			content, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			regoFiles[f] = string(content)
			continue
		}
		if err := runFixture(ctx, e, f, filter, t); err != nil {
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
		fmt.Fprintf(stdout, "FAIL: %d passed, %d failed\n", t.passed, t.failed)
		return fmt.Errorf("%d of %d test(s) failed", t.failed, t.passed+t.failed)
	}
	fmt.Fprintf(stdout, "ok: %d passed\n", t.passed)
	return nil
}

// runRegoTests checks each raw policy among sources, then runs every test_ rule of them all with OPA's tester.
func runRegoTests(ctx context.Context, sources map[string]string, filter *regexp.Regexp, t *tally) error {
	var invalid []string
	for _, f := range slices.Sorted(maps.Keys(sources)) {
		if isRegoTest(f) {
			continue
		}
		if _, err := envpolicy.ParseRego([]byte(sources[f])); err != nil {
			var buf bytes.Buffer
			if !problemLines(&buf, f, err) {
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

// fixture is a fixture file (documented in policyUsage).
type fixture struct {
	Policy      string             `yaml:"policy"`
	Environment fixtureEnvironment `yaml:"environment"`
	Controls    []string           `yaml:"controls"`
	Cases       []fixtureCase      `yaml:"cases"`
}

type fixtureEnvironment struct {
	Name string            `yaml:"name"`
	Type string            `yaml:"type"`
	Tags map[string]string `yaml:"tags"`
}

type fixtureCase struct {
	Name     string          `yaml:"name"`
	Artifact fixtureArtifact `yaml:"artifact"`
	Expect   fixtureExpect   `yaml:"expect"`
}

type fixtureArtifact struct {
	Name        string         `yaml:"name"`
	Fingerprint string         `yaml:"fingerprint"`
	Allowlisted bool           `yaml:"allowlisted"`
	Trails      []fixtureTrail `yaml:"trails"`
}

type fixtureTrail struct {
	Flow            fixtureFlow          `yaml:"flow"`
	Name            string               `yaml:"name"`
	ComplianceState string               `yaml:"compliance_state"`
	Attestations    []fixtureAttestation `yaml:"attestations"`
}

type fixtureFlow struct {
	Name string            `yaml:"name"`
	Tags map[string]string `yaml:"tags"`
}

type fixtureAttestation struct {
	ID        string   `yaml:"id"`
	Name      string   `yaml:"name"`
	Type      string   `yaml:"type"`
	Compliant *bool    `yaml:"compliant"`
	CreatedAt *float64 `yaml:"created_at"`
	Target    string   `yaml:"target"`
	Control   string   `yaml:"control"`
}

type fixtureExpect struct {
	Compliant *bool                  `yaml:"compliant"`
	Rules     map[string]fixtureRule `yaml:"rules"`
}

type fixtureRule struct {
	Satisfied   *bool    `yaml:"satisfied"`
	Ignored     *bool    `yaml:"ignored"`
	Resolutions []string `yaml:"resolutions"`
}

func readFixture(file string) (*fixture, error) {
	content, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(content)) // JSON is YAML
	dec.KnownFields(true)
	var fx fixture
	if err := dec.Decode(&fx); err != nil {
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if fx.Policy == "" {
		return nil, fmt.Errorf("%s: policy: name the policy file the cases run against", file)
	}
	if len(fx.Cases) == 0 {
		return nil, fmt.Errorf("%s: cases: there are none", file)
	}
	for i, c := range fx.Cases {
		if c.Name == "" || c.Artifact.Name == "" {
			return nil, fmt.Errorf("%s: cases[%d]: a case needs a name and an artifact with a name", file, i)
		}
		for j, tr := range c.Artifact.Trails {
			for k, a := range tr.Attestations {
				if a.Name == "" || a.Type == "" || (a.Target != "" && a.Target != "artifact" && a.Target != "trail") {
					return nil, fmt.Errorf("%s: cases[%d].artifact.trails[%d].attestations[%d]: needs a name, a type, and a target of artifact or trail", file, i, j, k)
				}
			}
		}
	}
	return &fx, nil
}

func runFixture(ctx context.Context, e *envpolicy.Engine, file string, filter *regexp.Regexp, t *tally) error {
	fx, err := readFixture(file)
	if err != nil {
		return err
	}
	policyFile := fx.Policy
	if !filepath.IsAbs(policyFile) {
		policyFile = filepath.Join(filepath.Dir(file), policyFile)
	}
	var controls func(string) bool
	if fx.Controls != nil {
		controls = func(id string) bool { return slices.Contains(fx.Controls, id) }
	}
	p, err := loadPolicy(policyFile, controls)
	if err != nil {
		var buf bytes.Buffer
		if problemLines(&buf, policyFile, err) {
			t.fail(file, strings.Split(strings.TrimSpace(buf.String()), "\n"))
			return nil
		}
		return err
	}
	p.Name, p.Version = filepath.Base(policyFile), 1
	env := envpolicy.Environment{Name: fx.Environment.Name, Type: fx.Environment.Type, Tags: fx.Environment.Tags}
	for _, c := range fx.Cases {
		if !filter.MatchString(c.Name) {
			continue
		}
		name := file + ": " + c.Name
		res, err := e.Assert(ctx, []*envpolicy.Policy{p}, env, c.Artifact.artifact())
		if err != nil {
			t.fail(name, []string{err.Error()})
			continue
		}
		if why := c.Expect.check(res); len(why) > 0 {
			t.fail(name, why)
			continue
		}
		t.pass(name)
	}
	return nil
}

func (a fixtureArtifact) artifact() envpolicy.Artifact {
	out := envpolicy.Artifact{Name: a.Name, Fingerprint: a.Fingerprint, Allowlisted: a.Allowlisted}
	if out.Fingerprint == "" {
		sum := sha256.Sum256([]byte(a.Name))
		out.Fingerprint = hex.EncodeToString(sum[:])
	}
	for _, tr := range a.Trails {
		state := tr.ComplianceState
		if state == "" {
			state = "COMPLIANT"
		}
		t := envpolicy.Trail{Flow: envpolicy.Flow{Name: tr.Flow.Name, Tags: tr.Flow.Tags}, Name: tr.Name, State: state}
		for i, x := range tr.Attestations {
			at := envpolicy.Attestation{ID: x.ID, Name: x.Name, Type: x.Type, Compliant: true, CreatedAt: float64(i + 1),
				OnArtifact: x.Target != "trail", Control: x.Control}
			if x.Compliant != nil {
				at.Compliant = *x.Compliant
			}
			if x.CreatedAt != nil {
				at.CreatedAt = *x.CreatedAt
			}
			t.Attestations = append(t.Attestations, at)
		}
		out.Trails = append(out.Trails, t)
	}
	return out
}

// check compares a verdict with what the case expects and says what differs, showing the rule as it came out.
func (x fixtureExpect) check(res envpolicy.ArtifactResult) []string {
	var why []string
	if x.Compliant != nil && *x.Compliant != res.Compliant {
		why = append(why, fmt.Sprintf("compliant = %v, want %v", res.Compliant, *x.Compliant))
		for _, r := range res.Policies[0].RuleEvaluations {
			if !r.Satisfied {
				why = append(why, describeRule(r))
			}
		}
	}
	byID := map[string]envpolicy.RuleEvaluation{}
	for _, r := range res.Policies[0].RuleEvaluations {
		byID[r.Rule.ID] = r
	}
	for _, id := range slices.Sorted(maps.Keys(x.Rules)) {
		want := x.Rules[id]
		got, ok := byID[id]
		if !ok {
			why = append(why, fmt.Sprintf("%s: the policy has no such rule (it has %s)", id, strings.Join(slices.Sorted(maps.Keys(byID)), ", ")))
			continue
		}
		var types []string
		for _, r := range got.Resolutions {
			types = append(types, r.Type)
		}
		switch {
		case want.Satisfied != nil && *want.Satisfied != got.Satisfied,
			want.Ignored != nil && *want.Ignored != got.Ignored,
			want.Resolutions != nil && !slices.Equal(want.Resolutions, types):
			why = append(why, fmt.Sprintf("%s: got satisfied=%v ignored=%v resolutions=%v, want %s",
				id, got.Satisfied, got.Ignored, types, want), describeRule(got))
		}
	}
	return why
}

func (r fixtureRule) String() string {
	var parts []string
	if r.Satisfied != nil {
		parts = append(parts, fmt.Sprintf("satisfied=%v", *r.Satisfied))
	}
	if r.Ignored != nil {
		parts = append(parts, fmt.Sprintf("ignored=%v", *r.Ignored))
	}
	if r.Resolutions != nil {
		parts = append(parts, fmt.Sprintf("resolutions=%v", r.Resolutions))
	}
	return strings.Join(parts, " ")
}

func describeRule(r envpolicy.RuleEvaluation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s %s):", r.Rule.ID, r.Rule.Type, r.Rule.Definition)
	for _, res := range r.Resolutions {
		fmt.Fprintf(&b, " [%s] %s", res.Type, res.Message)
	}
	return b.String()
}
