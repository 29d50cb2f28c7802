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

	"github.com/veritrail/veritrail/policies/template"
)

// templateFixture is a fixture file of a flow template (documented in FixtureFormat): trails of evidence and the
// compliance each must get.
type templateFixture struct {
	Template string                `yaml:"template"`
	Cases    []templateFixtureCase `yaml:"cases"`
}

type templateFixtureCase struct {
	Name   string          `yaml:"name"`
	Trail  fixtureEvidence `yaml:"trail"`
	Expect templateExpect  `yaml:"expect"`
}

// fixtureEvidence is what was reported to a trail.
type fixtureEvidence struct {
	Artifacts    []evidenceArtifact    `yaml:"artifacts"`
	Attestations []evidenceAttestation `yaml:"attestations"`
}

type evidenceArtifact struct {
	Name        string   `yaml:"name"` // the template name it was reported with
	Fingerprint string   `yaml:"fingerprint"`
	CreatedAt   *float64 `yaml:"created_at"`
}

type evidenceAttestation struct {
	ID          string   `yaml:"id"`
	Name        string   `yaml:"name"`
	Type        string   `yaml:"type"`
	Compliant   *bool    `yaml:"compliant"`
	Artifact    string   `yaml:"artifact"`    // the template name of the artifact it is about; none: trail-level
	Fingerprint string   `yaml:"fingerprint"` // or the fingerprint of the artifact it is about
	CreatedAt   *float64 `yaml:"created_at"`
}

type templateExpect struct {
	Compliance   string                            `yaml:"compliance"`
	Attestations map[string]expectedStatus         `yaml:"attestations"`
	Artifacts    map[string]expectedArtifactStatus `yaml:"artifacts"`
}

type expectedArtifactStatus struct {
	Status       string                    `yaml:"status"`
	Attestations map[string]expectedStatus `yaml:"attestations"`
}

// expectedStatus is the expected entry of one attestation: a status alone (COMPLETE or MISSING), or a mapping
// that may also say its compliance and whether it is unexpected.
type expectedStatus struct {
	Status     string `yaml:"status"`
	Compliant  *bool  `yaml:"compliant"`
	Unexpected *bool  `yaml:"unexpected"`
}

func (s *expectedStatus) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&s.Status)
	}
	type plain expectedStatus
	return n.Decode((*plain)(s))
}

func (s expectedStatus) String() string {
	parts := []string{}
	if s.Status != "" {
		parts = append(parts, "status="+s.Status)
	}
	if s.Compliant != nil {
		parts = append(parts, fmt.Sprintf("compliant=%v", *s.Compliant))
	}
	if s.Unexpected != nil {
		parts = append(parts, fmt.Sprintf("unexpected=%v", *s.Unexpected))
	}
	return strings.Join(parts, " ")
}

// isTemplateFixture reports whether a fixture file's content names a template rather than a policy.
func isTemplateFixture(content []byte) bool {
	var top map[string]any
	if yaml.Unmarshal(content, &top) != nil {
		return false
	}
	_, ok := top["template"]
	return ok
}

func readTemplateFixture(file string, content []byte) (*templateFixture, error) {
	fx, err := decodeFixture[templateFixture](file, content)
	if err != nil {
		return nil, err
	}
	if fx.Template == "" {
		return nil, fmt.Errorf("%s: template: name the flow template file the cases run against", file)
	}
	if len(fx.Cases) == 0 {
		return nil, fmt.Errorf("%s: cases: there are none", file)
	}
	for i, c := range fx.Cases {
		if c.Name == "" {
			return nil, fmt.Errorf("%s: cases[%d]: a case needs a name", file, i)
		}
		for j, a := range c.Trail.Artifacts {
			if a.Name == "" && a.Fingerprint == "" {
				return nil, fmt.Errorf("%s: cases[%d].trail.artifacts[%d]: needs a name or a fingerprint", file, i, j)
			}
		}
		for j, a := range c.Trail.Attestations {
			if a.Name == "" || a.Type == "" {
				return nil, fmt.Errorf("%s: cases[%d].trail.attestations[%d]: needs a name and a type", file, i, j)
			}
		}
		for _, st := range c.Expect.all() {
			if st.Status != "" && st.Status != template.StatusComplete && st.Status != template.StatusMissing {
				return nil, fmt.Errorf("%s: cases[%d].expect: attestation status %q: want %s or %s", file, i, st.Status,
					template.StatusComplete, template.StatusMissing)
			}
		}
	}
	return fx, nil
}

// all lists every attestation status the case expects.
func (x templateExpect) all() []expectedStatus {
	out := slices.Collect(maps.Values(x.Attestations))
	for _, a := range x.Artifacts {
		out = append(out, slices.Collect(maps.Values(a.Attestations))...)
	}
	return out
}

func runTemplateFixture(ctx context.Context, e *template.Engine, file string, content []byte, filter *regexp.Regexp, t *tally) error {
	fx, err := readTemplateFixture(file, content)
	if err != nil {
		return err
	}
	templateFile := fx.Template
	if !filepath.IsAbs(templateFile) {
		templateFile = filepath.Join(filepath.Dir(file), templateFile)
	}
	tmpl, err := LoadTemplate(templateFile)
	if err != nil {
		var buf bytes.Buffer
		if WriteProblems(&buf, templateFile, err) {
			t.fail(file, strings.Split(strings.TrimSpace(buf.String()), "\n"))
			return nil
		}
		return err
	}
	for _, c := range fx.Cases {
		if !filter.MatchString(c.Name) {
			continue
		}
		name := file + ": " + c.Name
		res, err := e.Evaluate(ctx, tmpl, c.Trail.input())
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

// input is the evidence as the engine reads it: IDs and fingerprints derived from names where not given, and
// reports in list order (created_at defaults to the position: later is newer).
func (ev fixtureEvidence) input() template.TrailInput {
	in := template.TrailInput{}
	for i, a := range ev.Artifacts {
		fp := a.Fingerprint
		if fp == "" {
			sum := sha256.Sum256([]byte(a.Name))
			fp = hex.EncodeToString(sum[:])
		}
		at := float64(i + 1)
		if a.CreatedAt != nil {
			at = *a.CreatedAt
		}
		in.Artifacts = append(in.Artifacts, template.Artifact{ID: fmt.Sprintf("artifact-%d", i+1), Fingerprint: fp,
			TemplateName: a.Name, CreatedAt: at})
	}
	for i, a := range ev.Attestations {
		x := template.Attestation{ID: a.ID, Name: a.Name, Type: a.Type, IsCompliant: true, CreatedAt: float64(i + 1),
			ArtifactFingerprint: a.Fingerprint, TargetArtifact: a.Artifact}
		if x.ID == "" {
			x.ID = fmt.Sprintf("attestation-%d", i+1)
		}
		if a.Compliant != nil {
			x.IsCompliant = *a.Compliant
		}
		if a.CreatedAt != nil {
			x.CreatedAt = *a.CreatedAt
		}
		in.Attestations = append(in.Attestations, x)
	}
	return in
}

// check compares a trail's compliance with what the case expects and says what differs, showing the entry as it
// came out.
func (x templateExpect) check(res template.TrailCompliance) []string {
	var why []string
	if x.Compliance != "" && x.Compliance != res.State {
		why = append(why, fmt.Sprintf("compliance = %s, want %s", res.State, x.Compliance))
		why = append(why, "    trail: "+describeStatuses(res.Attestations))
		for _, k := range slices.Sorted(maps.Keys(res.Artifacts)) {
			a := res.Artifacts[k]
			why = append(why, fmt.Sprintf("    artifact %s: %s; %s", k, a.Status, describeStatuses(a.Attestations)))
		}
	}
	why = append(why, checkStatuses("trail", x.Attestations, res.Attestations)...)
	for _, k := range slices.Sorted(maps.Keys(x.Artifacts)) {
		want := x.Artifacts[k]
		got, ok := res.Artifacts[k]
		if !ok {
			why = append(why, fmt.Sprintf("artifact %s: the trail has no such entry (it has %s)", k,
				strings.Join(slices.Sorted(maps.Keys(res.Artifacts)), ", ")))
			continue
		}
		if want.Status != "" && want.Status != got.Status {
			why = append(why, fmt.Sprintf("artifact %s: status = %s, want %s; %s", k, got.Status, want.Status, describeStatuses(got.Attestations)))
		}
		why = append(why, checkStatuses("artifact "+k, want.Attestations, got.Attestations)...)
	}
	return why
}

func checkStatuses(level string, want map[string]expectedStatus, got []template.AttestationStatus) []string {
	var why []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w := want[name]
		i := slices.IndexFunc(got, func(s template.AttestationStatus) bool { return s.Name == name })
		if i < 0 {
			names := []string{}
			for _, s := range got {
				names = append(names, s.Name)
			}
			why = append(why, fmt.Sprintf("%s: %s: no such attestation (there are: %s)", level, name, strings.Join(names, ", ")))
			continue
		}
		g := got[i]
		if (w.Status != "" && w.Status != g.Status) ||
			(w.Compliant != nil && (g.IsCompliant == nil || *g.IsCompliant != *w.Compliant)) ||
			(w.Unexpected != nil && *w.Unexpected != g.Unexpected) {
			why = append(why, fmt.Sprintf("%s: %s: got %s, want %s", level, name, describeStatus(g), w))
		}
	}
	return why
}

func describeStatus(s template.AttestationStatus) string {
	out := "status=" + s.Status
	if s.IsCompliant != nil {
		out += fmt.Sprintf(" compliant=%v", *s.IsCompliant)
	}
	return out + fmt.Sprintf(" unexpected=%v", s.Unexpected)
}

func describeStatuses(ss []template.AttestationStatus) string {
	if len(ss) == 0 {
		return "no attestations"
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%s (%s) %s", s.Name, s.Type, describeStatus(s))
	}
	return strings.Join(parts, ", ")
}
