package template

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/veritrail/veritrail/policies/rego"
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
	// ResultCacheSize bounds the policy results kept per (template, input) (default 4096; negative: none). The
	// input the policy sees is only the names, types and compliance of the attestations at each level, so the
	// trails of one flow mostly give it the same few inputs, and the policy is a pure function of them.
	ResultCacheSize int
}

// Engine evaluates trails against flow templates. Each template version (Template.ID) is compiled and prepared
// once, then shared. Safe for concurrent use.
type Engine struct {
	queries *rego.QueryCache
	timeout time.Duration
	results *lru.Cache[string, ast.Value] // nil when disabled
}

// maxResultKey bounds the input signatures cached: a trail with very many levels is rare and its key costly.
const maxResultKey = 4096

// NewEngine returns an Engine.
func NewEngine(opts EngineOptions) *Engine {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	e := &Engine{queries: rego.NewQueryCache(opts.CacheSize), timeout: opts.Timeout}
	if opts.ResultCacheSize == 0 {
		opts.ResultCacheSize = 4096
	}
	if opts.ResultCacheSize > 0 {
		e.results, _ = lru.New[string, ast.Value](opts.ResultCacheSize) // errs only on a size <= 0
	}
	return e
}

// Stats reports the prepared-query cache counters.
func (e *Engine) Stats() rego.CacheStats { return e.queries.Stats() }

// Evaluate judges in against t (nil means a trail without a template: nothing is expected). t must not change
// after Parse: its ID names its compiled query.
func (e *Engine) Evaluate(ctx context.Context, t *Template, in TrailInput) (TrailCompliance, error) {
	if t == nil {
		t = emptyTemplate
	}
	pq, err := e.queries.Prepared(ctx, t.key(), func() (rego.QuerySpec, error) {
		mod, err := Compile(t)
		if err != nil {
			return rego.QuerySpec{}, err
		}
		return rego.QuerySpec{Query: RegoQuery, Modules: map[string]string{"flowtemplate/" + t.key() + ".rego": mod}}, nil
	})
	if err != nil {
		return TrailCompliance{}, fmt.Errorf("flow template %s: %w", t.key(), err)
	}
	// The time limit covers the evaluation, not the wait for a preparation shared with other callers (which only
	// the caller's context bounds).
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	b := bind(in)
	input, sig := b.input(in)
	key := ""
	if e.results != nil && len(sig) <= maxResultKey {
		key = t.key() + "\x00" + string(sig)
	}
	// Checked before the result cache too: a caller that gave up gets an error, whether or not the result is known
	// (and OPA finishes small evaluations before it notices a cancelled context).
	if err := ctx.Err(); err != nil {
		return TrailCompliance{}, fmt.Errorf("flow template %s: %w", t.key(), err)
	}
	v, ok := ast.Value(nil), false
	if key != "" {
		v, ok = e.results.Get(key)
	}
	if !ok {
		if v, err = rego.Eval(ctx, pq, input); err != nil {
			return TrailCompliance{}, fmt.Errorf("flow template %s: evaluate: %w", t.key(), err)
		}
		if key != "" {
			e.results.Add(key, v)
		}
	}
	out, err := b.decode(v, t.Trail, in)
	if err != nil {
		return TrailCompliance{}, fmt.Errorf("flow template %s: result: %w", t.key(), err)
	}
	return out, nil
}

// Keys of the input and result documents.
var (
	kTrail                  = ast.InternedTerm("trail")
	kArtifacts              = ast.InternedTerm("artifacts")
	kUnclaimed              = ast.InternedTerm("unclaimed")
	kTypes                  = ast.InternedTerm("types")
	kCompliance             = ast.InternedTerm("compliance")
	kState                  = ast.InternedTerm("state")
	kStatus                 = ast.InternedTerm("status")
	kIsCompliant            = ast.InternedTerm("is_compliant")
	kUnexpected             = ast.InternedTerm("unexpected")
	kExpectedAttestations   = ast.InternedTerm("expected_attestations")
	kUnexpectedAttestations = ast.InternedTerm("unexpected_attestations")
)

// input builds the input document (described in template.rego.tmpl) as an AST value, so OPA does not convert or
// parse it. Levels holding the same evidence share one term. sig identifies the document: two inputs with the same
// sig are equal.
func (b *binding) input(in TrailInput) (doc ast.Value, sig []byte) {
	var (
		trail     *ast.Term
		arts      = make([][2]*ast.Term, 0, len(b.levels)-1)
		unclaimed [][2]*ast.Term
		shared    = make(map[string]*ast.Term, len(b.levels))
		levelSig  []byte
	)
	for n := range b.levels {
		l := &b.levels[n]
		// The document's signature: each level's place (trail, artifact slot or unclaimed entry, with its key),
		// then its evidence, every variable-length part length-prefixed so that different documents never
		// look alike.
		switch {
		case n == 0:
			sig = append(sig, 't')
		case l.artifact >= 0:
			sig = append(sig, 'a')
		default:
			sig = append(sig, 'u')
		}
		sig = append(binary.AppendUvarint(sig, uint64(len(l.key))), l.key...)
		levelSig = levelSig[:0]
		for _, x := range l.latest { // length-prefixed: levels with different evidence never look alike
			a := &in.Attestations[x.attestation]
			levelSig = append(binary.AppendUvarint(levelSig, uint64(len(x.name))), x.name...)
			levelSig = append(binary.AppendUvarint(levelSig, uint64(len(a.Type))), a.Type...)
			levelSig = append(levelSig, boolByte(a.IsCompliant))
		}
		sig = append(binary.AppendUvarint(sig, uint64(len(levelSig))), levelSig...)
		v, ok := shared[string(levelSig)]
		if !ok {
			types := make([][2]*ast.Term, len(l.latest))
			compliance := make([][2]*ast.Term, len(l.latest))
			for i, x := range l.latest {
				a := &in.Attestations[x.attestation]
				k := ast.StringTerm(x.name)
				types[i] = [2]*ast.Term{k, ast.StringTerm(a.Type)}
				compliance[i] = [2]*ast.Term{k, ast.InternedTerm(a.IsCompliant)}
			}
			v = ast.ObjectTerm(ast.Item(kTypes, ast.ObjectTerm(types...)), ast.Item(kCompliance, ast.ObjectTerm(compliance...)))
			shared[string(levelSig)] = v
		}
		switch {
		case n == 0:
			trail = v
		case l.artifact >= 0:
			arts = append(arts, ast.Item(ast.StringTerm(l.key), v))
		default:
			unclaimed = append(unclaimed, ast.Item(ast.StringTerm(l.key), v))
		}
	}
	return ast.NewObject(
		ast.Item(kTrail, trail),
		ast.Item(kArtifacts, ast.ObjectTerm(arts...)),
		ast.Item(kUnclaimed, ast.ObjectTerm(unclaimed...)),
	), sig
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// decode reads the result of the compiled module. For each entry the policy gives the status of every attestation
// the template expects there, in template order, and the names of the unexpected ones. The fields shown are copied
// from the template (for a MISSING one) or from the latest attestation with that name at that level, and an
// artifact entry shows the artifact in its slot, or the fingerprint it was made for.
func (b *binding) decode(v ast.Value, spec TrailSpec, in TrailInput) (TrailCompliance, error) {
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
	trail, err := b.decodeEntry(obj.Get(kTrail), 0, spec.Attestations, in)
	if err != nil {
		return out, fmt.Errorf("trail: %w", err)
	}
	out.Attestations = trail.Attestations
	arts, ok := termValue(obj.Get(kArtifacts)).(ast.Object)
	if !ok {
		return out, fmt.Errorf("artifacts: want an object")
	}
	expected := func(name string) []Expected {
		for _, a := range spec.Artifacts {
			if a.Name == name {
				return a.Attestations
			}
		}
		return nil
	}
	if len(spec.Artifacts) > 8 {
		byName := make(map[string][]Expected, len(spec.Artifacts))
		for _, a := range spec.Artifacts {
			byName[a.Name] = a.Attestations
		}
		expected = func(name string) []Expected { return byName[name] }
	}
	out.Artifacts = make(map[string]ArtifactStatus, arts.Len())
	err = arts.Iter(func(k, v *ast.Term) error {
		key, ok := k.Value.(ast.String)
		if !ok {
			return fmt.Errorf("artifacts: key %v is not a string", k)
		}
		n, ok := b.index[string(key)]
		if !ok {
			n = -1 // a slot without artifact or evidence
		}
		s, err := b.decodeEntry(v, n, expected(string(key)), in)
		if err != nil {
			return fmt.Errorf("artifacts[%s]: %w", key, err)
		}
		out.Artifacts[string(key)] = s
		return nil
	})
	return out, err
}

// decodeEntry reads the entry of level n (-1: none), where the template expects es.
func (b *binding) decodeEntry(t *ast.Term, n int, es []Expected, in TrailInput) (ArtifactStatus, error) {
	var s ArtifactStatus
	o, ok := termValue(t).(ast.Object)
	if !ok {
		return s, fmt.Errorf("want an object")
	}
	var err error
	if s.Status, err = getString(o, kStatus); err != nil {
		return s, err
	}
	if s.IsCompliant, err = getBool(o, kIsCompliant); err != nil {
		return s, err
	}
	if s.Unexpected, err = getBool(o, kUnexpected); err != nil {
		return s, err
	}
	if s.Unexpected {
		es = nil
	}
	expected, ok := termValue(o.Get(kExpectedAttestations)).(*ast.Array)
	if !ok || expected.Len() != len(es) {
		return s, fmt.Errorf("%v: want the status of each of the %d attestations expected here", kExpectedAttestations, len(es))
	}
	unexpected, ok := termValue(o.Get(kUnexpectedAttestations)).(*ast.Array)
	if !ok {
		return s, fmt.Errorf("%v: want an array", kUnexpectedAttestations)
	}
	if n >= 0 && s.Status != StatusMissing {
		l := &b.levels[n]
		if l.artifact >= 0 {
			s.ID = in.Artifacts[l.artifact].ID
		}
		s.Fingerprint = l.fingerprint
	}
	s.Attestations = make([]AttestationStatus, len(es)+unexpected.Len())
	compliance := make([]bool, len(s.Attestations)) // one allocation for every IsCompliant of the entry
	for i, e := range es {
		switch st, _ := expected.Elem(i).Value.(ast.String); st {
		case StatusMissing:
			s.Attestations[i] = AttestationStatus{Name: e.Name, Type: e.Type, Status: StatusMissing}
		case StatusComplete:
			if err := b.complete(&s.Attestations[i], &compliance[i], n, e.Name, in); err != nil {
				return s, err
			}
		default:
			return s, fmt.Errorf("%v[%d]: want %s or %s", kExpectedAttestations, i, StatusComplete, StatusMissing)
		}
	}
	for j := range unexpected.Len() {
		name, ok := unexpected.Elem(j).Value.(ast.String)
		if !ok {
			return s, fmt.Errorf("%v[%d]: want a name", kUnexpectedAttestations, j)
		}
		i := len(es) + j
		if err := b.complete(&s.Attestations[i], &compliance[i], n, string(name), in); err != nil {
			return s, err
		}
		s.Attestations[i].Unexpected = true
	}
	return s, nil
}

// complete sets s to the COMPLETE status of the latest attestation named name at level n; c holds its compliance.
func (b *binding) complete(s *AttestationStatus, c *bool, n int, name string, in TrailInput) error {
	i, ok := -1, false
	if n >= 0 {
		i, ok = b.attestation(n, name)
	}
	if !ok {
		return fmt.Errorf("no attestation %q here", name)
	}
	a := &in.Attestations[i]
	*c = a.IsCompliant
	*s = AttestationStatus{Name: a.Name, Type: a.Type, ID: a.ID, OverriddenID: a.OverriddenID, Status: StatusComplete, IsCompliant: c}
	return nil
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
