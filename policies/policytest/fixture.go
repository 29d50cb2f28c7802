package policytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/veritrail/veritrail/policies/envpolicy"
)

// fixture is a fixture file (documented in FixtureFormat).
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

// decodeFixture decodes a fixture file (YAML or JSON) into a T, refusing keys T does not have.
func decodeFixture[T any](file string, content []byte) (*T, error) {
	dec := yaml.NewDecoder(bytes.NewReader(content)) // JSON is YAML
	dec.KnownFields(true)
	var fx T
	if err := dec.Decode(&fx); err != nil {
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return &fx, nil
}

func readFixture(file string, content []byte) (*fixture, error) {
	fx, err := decodeFixture[fixture](file, content)
	if err != nil {
		return nil, err
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
	return fx, nil
}

func runFixture(ctx context.Context, e *envpolicy.Engine, file string, content []byte, filter *regexp.Regexp, t *tally) error {
	fx, err := readFixture(file, content)
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
	p, err := LoadPolicy(policyFile, controls)
	if err != nil {
		var buf bytes.Buffer
		if WriteProblems(&buf, policyFile, err) {
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
