package template

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TrailInput is everything reported to one trail.
type TrailInput struct {
	Attestations []Attestation // every attestation reported to the trail, trail-level and artifact-level, in report order
	Artifacts    []Artifact    // every artifact reported to the trail
}

// Attestation is one reported attestation.
type Attestation struct {
	ID                  string
	Name                string
	Type                string  // generic, junit, snyk, sonar, jira, pull_request, custom:<name>, decision
	IsCompliant         bool    // effective value (overrides already folded in by the caller)
	OverriddenID        string  // id of the attestation an override replaced, "" if none
	CreatedAt           float64 // unix seconds
	ArtifactFingerprint string  // set when the attestation targets an artifact by fingerprint
	TargetArtifact      string  // template artifact name it targets (may arrive before that artifact); "" if trail-level
}

// Artifact is one reported artifact.
type Artifact struct {
	ID, Fingerprint string
	TemplateName    string // the template_reference_name it was reported with ("" if none)
	CreatedAt       float64
}

// Compliance states of a trail and of an artifact, and statuses of an expected attestation.
const (
	StateCompliant    = "COMPLIANT"
	StateNonCompliant = "NON-COMPLIANT"
	StateIncomplete   = "INCOMPLETE"
	StatusMissing     = "MISSING" // an expected artifact or attestation that was not reported
	StatusComplete    = "COMPLETE"
)

// TrailCompliance is the verdict on a trail.
type TrailCompliance struct {
	State        string // COMPLIANT, NON-COMPLIANT or INCOMPLETE
	IsCompliant  bool
	Attestations []AttestationStatus // trail-level: expected in template order, then unexpected by name
	// Artifacts is keyed by template artifact name; unexpected artifacts by their TemplateName, or by fingerprint
	// when they have none.
	Artifacts map[string]ArtifactStatus
}

// AttestationStatus is one entry of an attestations_statuses list.
type AttestationStatus struct {
	Name, Type, ID, OverriddenID string // Type is the reported type when COMPLETE, the template's when MISSING
	Status                       string // COMPLETE or MISSING
	IsCompliant                  *bool  // nil while MISSING
	Unexpected                   bool
}

// ArtifactStatus is one entry of artifacts_statuses.
type ArtifactStatus struct {
	ID, Fingerprint string
	Status          string // COMPLIANT, NON-COMPLIANT, INCOMPLETE, or MISSING when the template names an artifact that was not reported
	IsCompliant     bool
	Attestations    []AttestationStatus
	Unexpected      bool
}

// EngineOptions configures an Engine. The zero value is usable.
type EngineOptions struct {
	CacheSize int           // prepared queries kept, least recently used dropped first (default 1024)
	Timeout   time.Duration // limit of one evaluation (not of a first preparation) on top of the caller's context (default 5s)
}

// Engine evaluates trails against flow templates. Each template version (Template.ID) is compiled and prepared
// once, then shared. Safe for concurrent use.
type Engine struct {
	queries *QueryCache
	timeout time.Duration
}

// NewEngine returns an Engine.
func NewEngine(opts EngineOptions) *Engine {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	return &Engine{queries: NewQueryCache(opts.CacheSize), timeout: opts.Timeout}
}

// Stats reports the prepared-query cache counters.
func (e *Engine) Stats() CacheStats { return e.queries.Stats() }

// Evaluate judges in against t (nil means a trail without a template: nothing is expected). t must not change
// after Parse: its ID names its compiled query.
func (e *Engine) Evaluate(ctx context.Context, t *Template, in TrailInput) (TrailCompliance, error) {
	if t == nil {
		t = emptyTemplate
	}
	pq, err := e.queries.Prepared(ctx, t.key(), func() (QuerySpec, error) {
		mod, err := Compile(t)
		if err != nil {
			return QuerySpec{}, err
		}
		return QuerySpec{Query: RegoQuery, Modules: map[string]string{"flowtemplate/" + t.key() + ".rego": mod}}, nil
	})
	if err != nil {
		return TrailCompliance{}, fmt.Errorf("flow template %s: %w", t.key(), err)
	}
	// The time limit covers the evaluation, not the wait for a preparation shared with other callers (which only
	// the caller's context bounds).
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	if err := ctx.Err(); err != nil { // OPA finishes small evaluations before it notices a cancelled context
		return TrailCompliance{}, fmt.Errorf("flow template %s: %w", t.key(), err)
	}
	v, err := Eval(ctx, pq, inputValue(in))
	if err != nil {
		return TrailCompliance{}, fmt.Errorf("flow template %s: evaluate: %w", t.key(), err)
	}
	out, err := decodeCompliance(v)
	if err != nil {
		return TrailCompliance{}, fmt.Errorf("flow template %s: result: %w", t.key(), err)
	}
	return out, nil
}

// Keys of the input and result documents.
var (
	kID                  = ast.InternedTerm("id")
	kName                = ast.InternedTerm("name")
	kType                = ast.InternedTerm("type")
	kIsCompliant         = ast.InternedTerm("is_compliant")
	kOverriddenID        = ast.InternedTerm("overridden_id")
	kCreatedAt           = ast.InternedTerm("created_at")
	kArtifactFingerprint = ast.InternedTerm("artifact_fingerprint")
	kTargetArtifact      = ast.InternedTerm("target_artifact")
	kFingerprint         = ast.InternedTerm("fingerprint")
	kTemplateName        = ast.InternedTerm("template_name")
	kAttestations        = ast.InternedTerm("attestations")
	kArtifacts           = ast.InternedTerm("artifacts")
	kState               = ast.InternedTerm("state")
	kStatus              = ast.InternedTerm("status")
	kUnexpected          = ast.InternedTerm("unexpected")
)

// inputValue builds the input document as an AST value, so OPA does not convert or parse it.
func inputValue(in TrailInput) ast.Value {
	atts := make([]*ast.Term, len(in.Attestations))
	for i, a := range in.Attestations {
		atts[i] = ast.ObjectTerm(
			ast.Item(kID, ast.StringTerm(a.ID)),
			ast.Item(kName, ast.StringTerm(a.Name)),
			ast.Item(kType, ast.StringTerm(a.Type)),
			ast.Item(kIsCompliant, ast.InternedTerm(a.IsCompliant)),
			ast.Item(kOverriddenID, ast.StringTerm(a.OverriddenID)),
			ast.Item(kCreatedAt, timeTerm(a.CreatedAt)),
			ast.Item(kArtifactFingerprint, ast.StringTerm(a.ArtifactFingerprint)),
			ast.Item(kTargetArtifact, ast.StringTerm(a.TargetArtifact)),
		)
	}
	arts := make([]*ast.Term, len(in.Artifacts))
	for i, a := range in.Artifacts {
		arts[i] = ast.ObjectTerm(
			ast.Item(kID, ast.StringTerm(a.ID)),
			ast.Item(kFingerprint, ast.StringTerm(a.Fingerprint)),
			ast.Item(kTemplateName, ast.StringTerm(a.TemplateName)),
			ast.Item(kCreatedAt, timeTerm(a.CreatedAt)),
		)
	}
	return ast.NewObject(
		ast.Item(kAttestations, ast.ArrayTerm(atts...)),
		ast.Item(kArtifacts, ast.ArrayTerm(arts...)),
	)
}

// timeTerm is a timestamp as a number; NaN and infinities (which JSON cannot hold) count as 0.
func timeTerm(f float64) *ast.Term {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		f = 0
	}
	return ast.FloatNumberTerm(f)
}

// decodeCompliance reads the result object of the compiled module.
func decodeCompliance(v ast.Value) (TrailCompliance, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return TrailCompliance{}, fmt.Errorf("want an object, got %v", ast.ValueName(v))
	}
	var out TrailCompliance
	var err error
	if out.State, err = getString(obj, kState); err != nil {
		return out, err
	}
	if out.IsCompliant, err = getBool(obj, kIsCompliant); err != nil {
		return out, err
	}
	if out.Attestations, err = decodeStatuses(obj.Get(kAttestations)); err != nil {
		return out, err
	}
	arts, ok := termValue(obj.Get(kArtifacts)).(ast.Object)
	if !ok {
		return out, fmt.Errorf("artifacts: want an object")
	}
	out.Artifacts = make(map[string]ArtifactStatus, arts.Len())
	err = arts.Iter(func(k, v *ast.Term) error {
		name, ok := k.Value.(ast.String)
		if !ok {
			return fmt.Errorf("artifacts: key %v is not a string", k)
		}
		a, ok := v.Value.(ast.Object)
		if !ok {
			return fmt.Errorf("artifacts[%s]: want an object", name)
		}
		var s ArtifactStatus
		var err error
		if s.ID, err = getString(a, kID); err != nil {
			return err
		}
		if s.Fingerprint, err = getString(a, kFingerprint); err != nil {
			return err
		}
		if s.Status, err = getString(a, kStatus); err != nil {
			return err
		}
		if s.IsCompliant, err = getBool(a, kIsCompliant); err != nil {
			return err
		}
		if s.Unexpected, err = getBool(a, kUnexpected); err != nil {
			return err
		}
		if s.Attestations, err = decodeStatuses(a.Get(kAttestations)); err != nil {
			return fmt.Errorf("artifacts[%s]: %w", name, err)
		}
		out.Artifacts[string(name)] = s
		return nil
	})
	return out, err
}

func decodeStatuses(t *ast.Term) ([]AttestationStatus, error) {
	arr, ok := termValue(t).(*ast.Array)
	if !ok {
		return nil, fmt.Errorf("attestations: want an array")
	}
	out := make([]AttestationStatus, arr.Len())
	for i := range arr.Len() {
		o, ok := arr.Elem(i).Value.(ast.Object)
		if !ok {
			return nil, fmt.Errorf("attestations[%d]: want an object", i)
		}
		s := &out[i]
		for _, f := range []struct {
			key *ast.Term
			dst *string
		}{{kName, &s.Name}, {kType, &s.Type}, {kID, &s.ID}, {kOverriddenID, &s.OverriddenID}, {kStatus, &s.Status}} {
			v, err := getString(o, f.key)
			if err != nil {
				return nil, fmt.Errorf("attestations[%d]: %w", i, err)
			}
			*f.dst = v
		}
		var err error
		if s.Unexpected, err = getBool(o, kUnexpected); err != nil {
			return nil, fmt.Errorf("attestations[%d]: %w", i, err)
		}
		switch c := termValue(o.Get(kIsCompliant)).(type) {
		case ast.Null:
		case ast.Boolean:
			b := bool(c)
			s.IsCompliant = &b
		default:
			return nil, fmt.Errorf("attestations[%d]: is_compliant: want a boolean or null", i)
		}
	}
	return out, nil
}

func termValue(t *ast.Term) ast.Value {
	if t == nil {
		return nil
	}
	return t.Value
}

func getString(o ast.Object, k *ast.Term) (string, error) {
	s, ok := termValue(o.Get(k)).(ast.String)
	if !ok {
		return "", fmt.Errorf("%v: want a string", k)
	}
	return string(s), nil
}

func getBool(o ast.Object, k *ast.Term) (bool, error) {
	b, ok := termValue(o.Get(k)).(ast.Boolean)
	if !ok {
		return false, fmt.Errorf("%v: want a boolean", k)
	}
	return bool(b), nil
}
