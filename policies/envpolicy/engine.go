package envpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"golang.org/x/sync/errgroup"

	"github.com/veritrail/veritrail/policies/envpolicy/expr"
	"github.com/veritrail/veritrail/policies/rego"
)

// Statuses of a policy evaluation.
const (
	StatusCompliant    = "COMPLIANT"
	StatusNonCompliant = "NON-COMPLIANT"
)

// Resolution types. The first six are the ones the Kosli CLI knows; no_provenance is ours.
const (
	ResolutionMissingAttestation      = "missing_attestation"
	ResolutionNonCompliantAttestation = "non_compliant_attestation"
	ResolutionNonCompliantInTrail     = "non_compliant_in_trail"
	ResolutionRuleSatisfied           = "rule_satisfied"
	ResolutionRuleNotApplicable       = "rule_not_applicable"
	ResolutionNoProvenance            = "no_provenance"
)

// PolicyEvaluation is the verdict of one policy on one artifact: an element of policy_evaluations.
type PolicyEvaluation struct {
	PolicyName      string           `json:"policy_name"`
	PolicyVersion   int              `json:"policy_version"`
	Status          string           `json:"status"`    // COMPLIANT or NON-COMPLIANT
	Compliant       bool             `json:"compliant"` // every rule satisfied (an ignored rule is satisfied)
	RuleEvaluations []RuleEvaluation `json:"rule_evaluations"`
}

// RuleEvaluation is the verdict of one rule.
type RuleEvaluation struct {
	Rule        Rule         `json:"rule"`
	Satisfied   bool         `json:"satisfied"`
	Ignored     bool         `json:"ignored"` // the rule applied nowhere (exceptions, if): satisfied too
	Resolutions []Resolution `json:"resolutions"`
}

// Rule names a rule: its type (provenance, trail-compliance, attestation, or what a raw Rego policy says), its id
// in the policy (provenance, trail-compliance, attestations[2]) and its definition as the policy states it.
type Rule struct {
	Type       string          `json:"type"`
	ID         string          `json:"id,omitempty"`
	Definition json.RawMessage `json:"definition"`
}

// Resolution says why a rule holds, or what to do about it when it does not.
type Resolution struct {
	Type    string            `json:"type"`
	Message string            `json:"message"`
	Context ResolutionContext `json:"context"`
}

// ResolutionContext is where a resolution applies.
type ResolutionContext struct {
	FlowName        string `json:"flow_name,omitempty"`
	TrailName       string `json:"trail_name,omitempty"`
	ForControl      string `json:"for_control,omitempty"` // the control of a failing for_control rule
	AttestationName string `json:"attestation_name,omitempty"`
	AttestationType string `json:"attestation_type,omitempty"`
}

// ArtifactResult is the verdict on one artifact in an environment.
type ArtifactResult struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	InputHash   string `json:"input_hash"` // ArtifactInput.Hash of the input this verdict was reached on
	// Compliant is true when the artifact is allowlisted, or every policy evaluation is compliant (so an artifact
	// in an environment without policies is compliant).
	Compliant bool `json:"compliant"`
	// Allowlisted says that Compliant is true because the artifact is allowlisted in the environment, whatever
	// the policy evaluations (still reported) say.
	Allowlisted bool               `json:"allowlisted"`
	Policies    []PolicyEvaluation `json:"policy_evaluations"` // in the order the policies were given
}

// Verdict combines the evaluations of every policy of an environment on one artifact.
func Verdict(a ArtifactInput, evals []PolicyEvaluation) ArtifactResult {
	r := ArtifactResult{Name: a.Name, Fingerprint: a.Fingerprint, InputHash: a.Hash, Allowlisted: a.Allowlisted,
		Compliant: true, Policies: evals}
	for _, e := range evals {
		r.Compliant = r.Compliant && e.Compliant
	}
	r.Compliant = r.Compliant || a.Allowlisted
	return r
}

// Options configure an Engine. The zero value is usable.
type Options struct {
	CacheSize int           // prepared queries kept, least recently used dropped first (default 1024)
	Timeout   time.Duration // limit of one evaluation of a YAML policy, on top of the caller's context (default 5s)
	// RegoTimeout limits one evaluation of a raw Rego policy (default 1s): a policy that computes forever is
	// stopped with an error rather than holding the evaluator.
	RegoTimeout time.Duration
}

// Engine evaluates artifacts against environment policies. Each policy is compiled and prepared once per ID (its
// meaning) and shared across goroutines; a batch of artifacts is judged by one policy in one OPA evaluation. Safe
// for concurrent use.
type Engine struct {
	queries     *rego.QueryCache
	timeout     time.Duration
	regoTimeout time.Duration
	judged      atomic.Int64 // artifacts OPA evaluated, one a policy
}

// NewEngine returns an Engine.
func NewEngine(opts Options) *Engine {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.RegoTimeout <= 0 {
		opts.RegoTimeout = time.Second
	}
	return &Engine{queries: rego.NewQueryCache(opts.CacheSize), timeout: opts.Timeout, regoTimeout: opts.RegoTimeout}
}

// Stats reports the prepared-query cache counters.
func (e *Engine) Stats() rego.CacheStats { return e.queries.Stats() }

// Judged is how many artifacts OPA has evaluated, each policy counting apart: Evaluate's artifacts less those
// that took the evaluation of another of their shape.
func (e *Engine) Judged() int64 { return e.judged.Load() }

// Prepare compiles and prepares p ahead of its first evaluation (Evaluate does it when needed).
func (e *Engine) Prepare(ctx context.Context, p *Policy) error {
	_, err := e.prepared(ctx, p)
	return err
}

func (e *Engine) prepared(ctx context.Context, p *Policy) (rego.PreparedQuery, error) {
	return e.preparedQuery(ctx, p, p.ID, queryResults)
}

// preparedConditions is the prepared query of a YAML policy's artifact_conditions (see evaluate).
func (e *Engine) preparedConditions(ctx context.Context, p *Policy) (rego.PreparedQuery, error) {
	return e.preparedQuery(ctx, p, p.ID+"#artifact_conditions", queryArtifactConditions)
}

// preparedQuery prepares query of p's module (a raw Rego policy's own query whatever query says), kept as key.
func (e *Engine) preparedQuery(ctx context.Context, p *Policy, key, query string) (rego.PreparedQuery, error) {
	if p.ID == "" { // the ID names the prepared query: a policy built by hand would share one with others
		return rego.PreparedQuery{}, fmt.Errorf("policy %s has no ID: make policies with Parse or ParseRego", p.Name)
	}
	pq, err := e.queries.Prepared(ctx, key, func() (rego.QuerySpec, error) {
		if p.Kind == KindRego {
			return rawSpec(p), nil
		}
		mod, err := Compile(p)
		if err != nil {
			return rego.QuerySpec{}, err
		}
		return rego.QuerySpec{Query: query, Modules: map[string]string{"envpolicy/" + p.ID + ".rego": mod}}, nil
	})
	if err != nil {
		return pq, fmt.Errorf("policy %s: %w", p.label(), err)
	}
	return pq, nil
}

func (p *Policy) label() string {
	if p.Name != "" {
		return fmt.Sprintf("'%s' version %d", p.Name, p.Version)
	}
	return p.ID
}

// Evaluate judges every artifact of in against p and returns one evaluation per artifact, in order: in one OPA
// evaluation, or up to three for a YAML policy, which judges the artifacts of one shape alike (see evaluate).
func (e *Engine) Evaluate(ctx context.Context, p *Policy, in *Input) ([]PolicyEvaluation, error) {
	if len(in.Artifacts) == 0 {
		return []PolicyEvaluation{}, nil
	}
	pq, err := e.prepared(ctx, p)
	if err != nil {
		return nil, err
	}
	limit := e.timeout
	if p.Kind == KindRego {
		limit = e.regoTimeout
	}
	var conds *rego.PreparedQuery
	if len(in.Artifacts) > 1 && p.Kind == KindYAML && p.readsArtifact() {
		q, err := e.preparedConditions(ctx, p)
		if err != nil {
			return nil, err
		}
		conds = &q
	}
	out, judged, err := evaluate(ctx, p, pq, conds, limit, in)
	e.judged.Add(int64(judged))
	return out, err
}

// evaluate runs a prepared policy on in and decodes what it says of each artifact. A YAML policy is evaluated
// once per shape of artifact (ArtifactInput.shape) first: where it finds that one compliant, every rule holds with
// the policy's constant evaluations, so the other artifacts of the shape get the same; the artifacts of the shapes
// it does not find compliant are evaluated each, since the messages of failing rules name the artifact and its
// trails. The shape leaves the artifact's name and fingerprint out, so for a policy whose conditions read them,
// conds (its query of artifact_conditions) first says what those conditions give each artifact in each context,
// and only artifacts of one shape where they agree share. A snapshot of builds from a few pipelines is judged in a
// few evaluations per policy instead of one per artifact. judged counts the artifacts OPA evaluated.
func evaluate(ctx context.Context, p *Policy, pq rego.PreparedQuery, conds *rego.PreparedQuery, limit time.Duration, in *Input) (
	out []PolicyEvaluation, judged int, err error) {
	// The limit covers the evaluation, not the wait for a preparation shared with other callers.
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if len(in.Artifacts) < 2 || p.Kind != KindYAML || (conds == nil && p.readsArtifact()) {
		out, err = evaluateBatch(ctx, p, pq, limit, in)
		return out, len(in.Artifacts), err
	}
	keys := make([]string, len(in.Artifacts))
	for i, a := range in.Artifacts {
		keys[i] = a.shape
	}
	if conds != nil {
		v, err := rego.Eval(ctx, *conds, in.conditionsBatch())
		if err != nil {
			return nil, 0, fmt.Errorf("policy %s: evaluate its conditions: %w", p.label(), err)
		}
		arr, ok := v.(*ast.Array)
		if !ok || arr.Len() != len(in.Artifacts) {
			return nil, 0, fmt.Errorf("policy %s: want the conditions of each artifact (%d), got %v", p.label(), len(in.Artifacts), ast.ValueName(v))
		}
		for i := range keys {
			keys[i] += "\x00" + arr.Elem(i).String()
		}
	}
	first := make(map[string]int, len(in.Artifacts)) // the first artifact of each key
	var reps, rest []int
	for i, k := range keys {
		if _, ok := first[k]; ok {
			rest = append(rest, i)
			continue
		}
		first[k] = i
		reps = append(reps, i)
	}
	if len(rest) == 0 {
		out, err = evaluateBatch(ctx, p, pq, limit, in)
		return out, len(in.Artifacts), err
	}
	out = make([]PolicyEvaluation, len(in.Artifacts))
	evals, err := evaluateBatch(ctx, p, pq, limit, in.pick(reps))
	if err != nil {
		return nil, 0, err
	}
	for k, i := range reps {
		out[i] = evals[k]
	}
	var again []int
	for _, i := range rest {
		if r := out[first[keys[i]]]; r.Compliant {
			out[i] = r
		} else {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		if evals, err = evaluateBatch(ctx, p, pq, limit, in.pick(again)); err != nil {
			return nil, 0, err
		}
		for k, i := range again {
			out[i] = evals[k]
		}
	}
	return out, len(reps) + len(again), nil
}

// readsArtifact reports whether a condition of the YAML policy reads the artifact itself (its name or fingerprint).
func (p *Policy) readsArtifact() bool {
	var conds []*expr.Expression
	conds = append(conds, p.Rules.Provenance.Exceptions...)
	conds = append(conds, p.Rules.TrailCompliance.Exceptions...)
	for _, a := range p.Rules.Attestations {
		if a.If != nil {
			conds = append(conds, a.If)
		}
	}
	return slices.ContainsFunc(conds, func(c *expr.Expression) bool { return c.Reads("artifact") })
}

// evaluateBatch evaluates every artifact of in in one OPA evaluation.
func evaluateBatch(ctx context.Context, p *Policy, pq rego.PreparedQuery, limit time.Duration, in *Input) ([]PolicyEvaluation, error) {
	batch := in.batch()
	if err := ctx.Err(); err != nil { // OPA finishes small evaluations before it notices a cancelled context
		return nil, fmt.Errorf("policy %s: %w", p.label(), err)
	}
	v, err := rego.Eval(ctx, pq, batch)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("policy %s: evaluation exceeded its time limit of %v: %w", p.label(), limit, err)
		}
		return nil, fmt.Errorf("policy %s: evaluate: %w", p.label(), err)
	}
	arr, ok := v.(*ast.Array)
	if !ok || arr.Len() != len(in.Artifacts) {
		return nil, fmt.Errorf("policy %s: want one result per artifact (%d), got %v", p.label(), len(in.Artifacts), ast.ValueName(v))
	}
	d := newDecoder()
	out := make([]PolicyEvaluation, len(in.Artifacts))
	for i := range out {
		rules, err := d.ruleEvaluations(arr.Elem(i))
		if err != nil {
			return nil, fmt.Errorf("policy %s: artifact %s: rule_evaluations%s", p.label(), in.Artifacts[i].Name, err)
		}
		out[i] = PolicyEvaluation{PolicyName: p.Name, PolicyVersion: p.Version, Status: StatusCompliant, Compliant: true, RuleEvaluations: rules}
		for _, r := range rules {
			if !r.Satisfied {
				out[i].Status, out[i].Compliant = StatusNonCompliant, false
			}
		}
	}
	return out, nil
}

// parallelFrom is the snapshot size from which EvaluateSnapshot evaluates policies side by side. Below it the
// evaluations run on the caller's goroutine: OPA's evaluation recurses deeply, and growing the stack of a fresh
// goroutine costs more than evaluating a few artifacts.
const parallelFrom = 64

// EvaluateSnapshot judges every artifact of in against each policy (one evaluation per policy; for large
// snapshots, policies evaluated side by side on up to GOMAXPROCS cores) and combines the verdicts per artifact,
// in order.
func (e *Engine) EvaluateSnapshot(ctx context.Context, policies []*Policy, in *Input) ([]ArtifactResult, error) {
	perPolicy := make([][]PolicyEvaluation, len(policies))
	if len(in.Artifacts) < parallelFrom || len(policies) < 2 {
		for i, p := range policies {
			evals, err := e.Evaluate(ctx, p, in)
			if err != nil {
				return nil, err
			}
			perPolicy[i] = evals
		}
	} else {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(runtime.GOMAXPROCS(0))
		for i, p := range policies {
			g.Go(func() error {
				evals, err := e.Evaluate(gctx, p, in)
				perPolicy[i] = evals
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}
	out := make([]ArtifactResult, len(in.Artifacts))
	for j, a := range in.Artifacts {
		evals := make([]PolicyEvaluation, len(policies))
		for i := range policies {
			evals[i] = perPolicy[i][j]
		}
		out[j] = Verdict(a, evals)
	}
	return out, nil
}

// Assert judges one artifact in env against policies: the verdict of an assert.
func (e *Engine) Assert(ctx context.Context, policies []*Policy, env Environment, a Artifact) (ArtifactResult, error) {
	res, err := e.EvaluateSnapshot(ctx, policies, NewInput(env, []Artifact{a}))
	if err != nil {
		return ArtifactResult{}, err
	}
	return res[0], nil
}
