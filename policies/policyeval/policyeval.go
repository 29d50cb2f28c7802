// Package policyeval connects stored evidence with environment policies: it loads what the store knows about a
// set of fingerprints and turns it into envpolicy input, parses stored policy versions (cached by meaning), and
// expands stored verdicts into the policy evaluations the API shows. The evaluator uses it to decide; ingest uses
// it, read-only, to assert and to answer what-if questions, so both judge the same evidence the same way.
package policyeval

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/envpolicy"
)

// Report is one trail that reported a fingerprint: the newest report of it in that trail, with the trail (without
// its compliance document) and its flow.
type Report = store.FingerprintReport

// Evidence is what the store knows about a set of fingerprints. LoadReports reads where they were reported;
// LoadAttestations adds the attestations of those trails, which only policies need.
type Evidence struct {
	reports map[string][]Report    // by fingerprint, by flow name
	trails  map[string]*trailFacts // by trail ID
}

// trailFacts are a trail's attestations as policies see them (overrides folded in), split by what they are about.
type trailFacts struct {
	onTrail       []envpolicy.Attestation
	byFingerprint map[string][]envpolicy.Attestation
	byTarget      map[string][]envpolicy.Attestation // bound to a template slot before the artifact existed
}

// LoadReports finds the trails of live flows that reported each fingerprint, in one query (per 30,000
// fingerprints). The trails come without their compliance documents.
func LoadReports(ctx context.Context, r store.Reader, orgID string, fps []string) (*Evidence, error) {
	ev := &Evidence{reports: map[string][]Report{}}
	if len(fps) == 0 {
		return ev, nil
	}
	reports, err := r.FingerprintReports(ctx, orgID, fps)
	if err != nil {
		return nil, err
	}
	seen := map[[2]string]bool{}
	for i := len(reports) - 1; i >= 0; i-- { // newest report of each trail first
		x := reports[i]
		key := [2]string{x.Artifact.Fingerprint, x.Artifact.TrailID}
		if seen[key] {
			continue // an older report in the same trail
		}
		seen[key] = true
		ev.reports[x.Artifact.Fingerprint] = append(ev.reports[x.Artifact.Fingerprint], x)
	}
	for fp := range ev.reports {
		slices.SortStableFunc(ev.reports[fp], func(x, y Report) int { return cmp.Compare(x.Flow.Name, y.Flow.Name) })
	}
	return ev, nil
}

// Reports lists the trails that reported fp, by flow name (newest report first within a flow).
func (ev *Evidence) Reports(fp string) []Report { return ev.reports[fp] }

// AttestationReader reads what LoadAttestations needs. A store.Reader is one; the evaluator reads through a
// cache of the trails it evaluated recently.
type AttestationReader interface {
	TrailAttestationFactsByIDs(ctx context.Context, trailIDs []string) (map[string][]store.AttestationFact, error)
	DecisionControls(ctx context.Context, ids []string) (map[string]string, error)
}

// LoadAttestations reads the attestations of the trails that reported fps (every fingerprint of LoadReports when
// fps is nil): one query, and one more when some of them are decisions (to learn their controls).
func (ev *Evidence) LoadAttestations(ctx context.Context, r AttestationReader, fps []string) error {
	var trailIDs []string
	add := func(reps []Report) {
		for _, rep := range reps {
			trailIDs = append(trailIDs, rep.Trail.ID)
		}
	}
	if fps == nil {
		for _, reps := range ev.reports {
			add(reps)
		}
	}
	for _, fp := range fps {
		add(ev.reports[fp])
	}
	ev.trails = map[string]*trailFacts{}
	if len(trailIDs) == 0 {
		return nil
	}
	trailIDs = slices.Compact(slices.Sorted(slices.Values(trailIDs))) // a trail reports many of a snapshot's artifacts
	facts, err := r.TrailAttestationFactsByIDs(ctx, trailIDs)
	if err != nil {
		return err
	}
	var decisions []string
	for _, fs := range facts {
		for _, f := range fs {
			if f.Type == "decision" {
				decisions = append(decisions, f.ID)
			}
		}
	}
	controls := map[string]string{}
	if len(decisions) > 0 {
		if controls, err = r.DecisionControls(ctx, decisions); err != nil {
			return err
		}
	}
	for id, fs := range facts {
		ev.trails[id] = splitFacts(fs, controls)
	}
	return nil
}

// splitFacts sorts a trail's attestations by what they are about. An override takes the place (and the report
// time) of the attestation it overrides, as in trail compliance.
func splitFacts(facts []store.AttestationFact, controls map[string]string) *trailFacts {
	overrides := map[string]store.AttestationFact{}
	for _, f := range facts {
		if f.OverridesID != "" {
			overrides[f.OverridesID] = f
		}
	}
	t := &trailFacts{byFingerprint: map[string][]envpolicy.Attestation{}, byTarget: map[string][]envpolicy.Attestation{}}
	for _, f := range facts {
		if f.OverridesID != "" {
			continue
		}
		a := envpolicy.Attestation{ID: f.ID, Name: f.Name, Type: f.Type, Compliant: f.IsCompliant, CreatedAt: f.CreatedAt,
			OnArtifact: true, Control: controls[f.ID]}
		if o, ok := overrides[f.ID]; ok {
			a.ID, a.Compliant = o.ID, o.IsCompliant
		}
		switch {
		case f.ArtifactFingerprint != "":
			t.byFingerprint[f.ArtifactFingerprint] = append(t.byFingerprint[f.ArtifactFingerprint], a)
		case f.TargetArtifact != "":
			t.byTarget[f.TargetArtifact] = append(t.byTarget[f.TargetArtifact], a)
		default:
			a.OnArtifact = false
			t.onTrail = append(t.onTrail, a)
		}
	}
	return t
}

// Artifact is the envpolicy artifact for fp running (or asked about) under name: each trail that reported it, with
// that trail's own attestations and the artifact's attestations in it. LoadAttestations must have run.
func (ev *Evidence) Artifact(name, fp string, allowlisted bool) envpolicy.Artifact {
	a := envpolicy.Artifact{Name: name, Fingerprint: fp, Allowlisted: allowlisted}
	for _, rep := range ev.reports[fp] {
		t := envpolicy.Trail{Flow: envpolicy.Flow{Name: rep.Flow.Name, Tags: rep.Flow.Tags}, Name: rep.Trail.Name, State: rep.Trail.State}
		if facts := ev.trails[rep.Trail.ID]; facts != nil {
			mine := facts.byFingerprint[fp]
			if slot := rep.Artifact.TemplateName; slot != "" {
				mine = append(mine[:len(mine):len(mine)], facts.byTarget[slot]...)
			}
			t.Attestations = append(facts.onTrail[:len(facts.onTrail):len(facts.onTrail)], mine...)
		}
		a.Trails = append(a.Trails, t)
	}
	return a
}

// Environment is the envpolicy environment of a stored one.
func Environment(e store.Environment) envpolicy.Environment {
	return envpolicy.Environment{Name: e.Name, Type: e.Type, Tags: e.Tags}
}

// Cache parses stored policy versions once per meaning. Safe for concurrent use.
type Cache struct {
	parsed *lru.Cache[string, *envpolicy.Policy]
}

// NewCache keeps up to size parsed policies (1024 when size <= 0).
func NewCache(size int) *Cache {
	if size <= 0 {
		size = 1024
	}
	c, err := lru.New[string, *envpolicy.Policy](size)
	if err != nil { // only for a size <= 0, excluded above
		panic(err)
	}
	return &Cache{parsed: c}
}

// Policy parses a stored version of the named policy, labelled with its name and version. Stored versions were
// validated when they were created; for_control is not checked again (a control stays known once created).
func (c *Cache) Policy(name string, v store.PolicyVersion) (*envpolicy.Policy, error) {
	key := v.Format + ":" + v.ContentID
	p, ok := c.parsed.Get(key)
	if !ok {
		var err error
		if v.Format == store.PolicyRego {
			p, err = envpolicy.ParseRego([]byte(v.Content))
		} else {
			p, err = envpolicy.Parse([]byte(v.Content), envpolicy.ParseOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("stored policy %s version %d no longer parses: %w", name, v.Version, err)
		}
		c.parsed.Add(key, p)
	}
	labelled := *p
	labelled.Name, labelled.Version = name, v.Version
	return &labelled, nil
}

// Attached parses the policies attached to an environment, in order.
func (c *Cache) Attached(attached []store.AttachedPolicy) ([]*envpolicy.Policy, error) {
	out := make([]*envpolicy.Policy, len(attached))
	for i, a := range attached {
		p, err := c.Policy(a.Name, a.PolicyVersion)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// Evaluation is a policy's evaluation of an artifact as the API shows it: an element of an assert's
// policy_evaluations and of a snapshot artifact's policy_decisions (the shape of envpolicy.PolicyEvaluation).
type Evaluation struct {
	PolicyName      string          `json:"policy_name"`
	PolicyVersion   int             `json:"policy_version"`
	Status          string          `json:"status"`
	Compliant       bool            `json:"compliant"`
	RuleEvaluations json.RawMessage `json:"rule_evaluations"`
}

// EvaluationKey names a stored evaluation.
type EvaluationKey struct{ PolicyID, InputHash string }

// Index keys stored evaluations for Expand.
func Index(evals []store.PolicyEvaluation) map[EvaluationKey]json.RawMessage {
	out := make(map[EvaluationKey]json.RawMessage, len(evals))
	for _, e := range evals {
		out[EvaluationKey{e.PolicyID, e.InputHash}] = e.RuleEvaluations
	}
	return out
}

// ResolutionEvaluationError is the resolution of a policy that could not judge an artifact.
const ResolutionEvaluationError = "evaluation_error"

// Expand turns a verdict's policies into evaluations, in order. An evaluation missing from evals (never the case
// for a verdict the evaluator wrote) shows no rule evaluations.
func Expand(refs []store.VerdictPolicy, inputHash string, evals map[EvaluationKey]json.RawMessage) []Evaluation {
	out := make([]Evaluation, len(refs))
	for i, r := range refs {
		rules, ok := evals[EvaluationKey{r.ID, inputHash}]
		if !ok {
			rules = json.RawMessage(`[]`)
		}
		status := envpolicy.StatusCompliant
		if !r.Compliant {
			status = envpolicy.StatusNonCompliant
		}
		out[i] = Evaluation{PolicyName: r.Name, PolicyVersion: r.Version, Status: status, Compliant: r.Compliant, RuleEvaluations: rules}
	}
	return out
}

// ErrorRules is the rule evaluations of a policy that failed with msg: never a pass.
func ErrorRules(msg string) json.RawMessage {
	b, err := json.Marshal([]envpolicy.RuleEvaluation{{
		Rule:        envpolicy.Rule{Type: "evaluation", ID: "evaluation", Definition: json.RawMessage(`{}`)},
		Resolutions: []envpolicy.Resolution{{Type: ResolutionEvaluationError, Message: msg}},
	}})
	if err != nil { // plain strings and constant JSON always encode
		panic(err)
	}
	return b
}
