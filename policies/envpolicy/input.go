package envpolicy

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Environment is where a snapshot was taken.
type Environment struct {
	Name string
	Type string // K8S, ECS, server, ...
	Tags map[string]string
}

// Artifact is one artifact of a snapshot (or of an assert) with the evidence about it.
type Artifact struct {
	Name        string // its name in the snapshot
	Fingerprint string
	Allowlisted bool    // allowlisted in the environment: compliant there whatever the policies say
	Trails      []Trail // the trails that reported it, each with its flow; none when it has no provenance
}

// Flow is the flow of a trail.
type Flow struct {
	Name string
	Tags map[string]string
}

// Trail is a trail that reported the artifact, with its compliance and its evidence.
type Trail struct {
	Flow  Flow
	Name  string
	State string // the trail's compliance_state: COMPLIANT, NON-COMPLIANT or INCOMPLETE
	// Attestations are the trail's own (trail-level) attestations and those of this artifact in the trail, as
	// reported (overrides folded in). The input keeps the latest per level, name and control.
	Attestations []Attestation
}

// Attestation is one reported attestation.
type Attestation struct {
	ID         string
	Name       string
	Type       string // generic, junit, snyk, pull_request, jira, sonar, custom:<name>, decision (or system:decision)
	Compliant  bool
	CreatedAt  float64 // unix seconds
	OnArtifact bool    // reported for the artifact; false for a trail-level attestation
	Control    string  // the control id of a decision; "" otherwise
}

// Input is a snapshot prepared for evaluation: each artifact's evidence normalized, with the hash of what a policy
// sees of it. The input documents OPA reads are built when first evaluated, once: evaluations of several policies
// share them, and Inputs selected from this one (Select) share them too. Safe for concurrent use.
type Input struct {
	Environment Environment
	Artifacts   []ArtifactInput
	env         *ast.Term
	b           *builder
}

// ArtifactInput is one artifact's part of an Input.
type ArtifactInput struct {
	Name, Fingerprint string
	Allowlisted       bool
	// Hash is the hex SHA-256 of the input document a policy sees for this artifact (the artifact with its
	// evidence, normalized, and the environment unless NewInputFor left it out). The evaluation of an artifact by
	// one policy version depends on nothing else: a caller may keep results keyed by (Policy.ID, Hash) and evaluate
	// only the artifacts whose hash changed.
	Hash string
	// shape is what a YAML policy that does not read the artifact itself can tell of it by whether it passes
	// (encoder.shape): artifacts of one shape that one such policy finds compliant, it finds compliant with the
	// same rule evaluations.
	shape string
	doc   *artifactState
}

type artifactState struct {
	doc  artifactDoc
	once sync.Once
	term *ast.Term // built once, by the first evaluation that needs it
}

// NewInput prepares artifacts in env. Evidence is normalized first: trails sorted by flow and name, tags by key,
// the latest attestation kept per level (artifact or trail), name and control, and system:decision read as
// decision. Each artifact's Hash covers the environment too.
func NewInput(env Environment, artifacts []Artifact) *Input { return newInput(env, artifacts, true) }

// NewInputFor is NewInput for evaluations by policies, whose artifact Hashes cover only what those policies can
// read. A YAML policy reads the artifact and its evidence, never the environment: when every policy is YAML, the
// Hash leaves the environment out, so that an artifact judged by a policy version in one environment keeps that
// evaluation in the next (a build promoted from staging to production is not evaluated again). A raw Rego policy
// may read input.environment, and so may a policy that did not parse (nil): either puts the environment in.
func NewInputFor(policies []*Policy, env Environment, artifacts []Artifact) *Input {
	return newInput(env, artifacts, ReadEnvironment(policies))
}

// ReadEnvironment reports whether any of policies may read the environment of its input (see NewInputFor).
func ReadEnvironment(policies []*Policy) bool {
	return slices.ContainsFunc(policies, func(p *Policy) bool { return p == nil || p.Kind != KindYAML })
}

func newInput(env Environment, artifacts []Artifact, hashEnv bool) *Input {
	envDoc := envDocument(env)
	in := &Input{Environment: env, Artifacts: make([]ArtifactInput, len(artifacts)), env: envDoc.term(),
		b: &builder{flows: map[string]*ast.Term{}}}
	var e encoder
	envHash := sha256.Sum256(e.env(envDoc))
	for i, a := range artifacts {
		doc := artifactDocument(a)
		h := sha256.New()
		if hashEnv {
			h.Write(envHash[:])
		}
		h.Write(e.artifact(doc))
		in.Artifacts[i] = ArtifactInput{
			Name: a.Name, Fingerprint: a.Fingerprint, Allowlisted: a.Allowlisted,
			Hash: hex.EncodeToString(h.Sum(nil)), shape: string(e.shape(doc)), doc: &artifactState{doc: doc},
		}
	}
	return in
}

// Select returns an Input of the artifacts for which keep is true, in order, sharing their prepared documents:
// the artifacts whose evidence changed, for instance.
func (in *Input) Select(keep func(ArtifactInput) bool) *Input {
	out := &Input{Environment: in.Environment, env: in.env, b: in.b}
	for _, a := range in.Artifacts {
		if keep(a) {
			out.Artifacts = append(out.Artifacts, a)
		}
	}
	return out
}

// pick returns an Input of the artifacts at idx, in that order, sharing their prepared documents.
func (in *Input) pick(idx []int) *Input {
	out := &Input{Environment: in.Environment, env: in.env, b: in.b, Artifacts: make([]ArtifactInput, len(idx))}
	for k, i := range idx {
		out.Artifacts[k] = in.Artifacts[i]
	}
	return out
}

// terms returns the input document of each artifact, building those not built yet. Evaluations side by side
// build the documents of their artifacts side by side: only the flows' terms, which they share, take a lock.
func (in *Input) terms() []*ast.Term {
	out := make([]*ast.Term, len(in.Artifacts))
	for i, a := range in.Artifacts {
		a.doc.once.Do(func() { a.doc.term = in.b.artifact(a.doc.doc) })
		out[i] = a.doc.term
	}
	return out
}

// batch is the input document of one evaluation of every artifact: {environment, artifacts}.
func (in *Input) batch() ast.Value {
	return ast.NewObject(ast.Item(kEnvironment, in.env), ast.Item(kArtifacts, ast.ArrayTerm(in.terms()...)))
}

// conditionsBatch is the input of a policy's artifact_conditions: of each artifact only what a condition can read
// (its name and fingerprint, and the flow of each trail), far cheaper to build than the whole documents, which
// judging by shape builds for one artifact of each shape only.
func (in *Input) conditionsBatch() ast.Value {
	arts := make([]*ast.Term, len(in.Artifacts))
	for i, a := range in.Artifacts {
		trails := make([]*ast.Term, len(a.doc.doc.Trails))
		for j, t := range a.doc.doc.Trails {
			trails[j] = ast.ObjectTerm(ast.Item(kFlow, in.b.flow(t.Flow)))
		}
		arts[i] = ast.ObjectTerm(
			ast.Item(kName, ast.StringTerm(a.Name)),
			ast.Item(kFingerprint, ast.StringTerm(a.Fingerprint)),
			ast.Item(kTrails, ast.ArrayTerm(trails...)),
		)
	}
	return ast.NewObject(ast.Item(kEnvironment, in.env), ast.Item(kArtifacts, ast.ArrayTerm(arts...)))
}

// Document returns the input document a policy's rule_evaluations sees for artifact i, as JSON:
// {"environment": ..., "artifact": ...}. Policy authors start their Rego unit tests from it.
func (in *Input) Document(i int) (json.RawMessage, error) {
	v, err := ast.JSON(ast.NewObject(ast.Item(kEnvironment, in.env), ast.Item(kArtifact, in.terms()[i])))
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// encoder writes the normalized documents as bytes for the hash: every string length-prefixed, so different
// documents never encode alike. Its buffer is reused.
type encoder struct{ buf []byte }

func (e *encoder) str(s string) {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *encoder) tags(ts []tagDoc) {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(ts)))
	for _, t := range ts {
		e.str(t.Key)
		e.str(t.Value)
	}
}

func (e *encoder) env(d envDoc) []byte {
	e.buf = e.buf[:0]
	e.str(d.Name)
	e.str(d.Type)
	e.tags(d.Tags)
	return e.buf
}

func (e *encoder) artifact(d artifactDoc) []byte {
	e.buf = e.buf[:0]
	e.str(d.Name)
	e.str(d.Fingerprint)
	e.buf = append(e.buf, boolByte(d.Allowlisted))
	e.buf = binary.AppendUvarint(e.buf, uint64(len(d.Trails)))
	for _, t := range d.Trails {
		e.str(t.Flow.Name)
		e.tags(t.Flow.Tags)
		e.str(t.Name)
		e.str(t.State)
		e.buf = binary.AppendUvarint(e.buf, uint64(len(t.Attestations)))
		for _, a := range t.Attestations {
			e.str(a.ID)
			e.str(a.Name)
			e.str(a.Type)
			e.buf = append(e.buf, boolByte(a.Compliant))
			e.buf = binary.BigEndian.AppendUint64(e.buf, math.Float64bits(a.CreatedAt))
			e.str(a.Target)
			e.str(a.Control)
		}
	}
	return e.buf
}

// shape writes what decides whether a YAML policy that does not read the artifact itself finds it compliant:
// its allowlisting, and per trail the flow, the compliance, the attestations by level, name, type, compliance and
// control, and the decision each control and name resolves to. It leaves out the artifact's name and fingerprint,
// the trails' names, and the attestations' IDs and times, which such a policy reads only into the messages of
// the rules that fail (the times only to pick the latest decision, which is written instead).
func (e *encoder) shape(d artifactDoc) []byte {
	e.buf = e.buf[:0]
	e.buf = append(e.buf, boolByte(d.Allowlisted))
	e.buf = binary.AppendUvarint(e.buf, uint64(len(d.Trails)))
	for _, t := range d.Trails {
		e.str(t.Flow.Name)
		e.tags(t.Flow.Tags)
		e.str(t.State)
		e.buf = binary.AppendUvarint(e.buf, uint64(len(t.Attestations)))
		for _, a := range t.Attestations {
			e.str(a.Name)
			e.str(a.Type)
			e.buf = append(e.buf, boolByte(a.Compliant))
			e.str(a.Target)
			e.str(a.Control)
		}
		picks := t.decisions()
		e.buf = binary.AppendUvarint(e.buf, uint64(len(picks)))
		for _, p := range picks {
			e.str(p.control)
			e.str(p.name)
			e.buf = binary.AppendUvarint(e.buf, uint64(p.at))
		}
	}
	return e.buf
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// The normalized documents. The encoder turns them into the bytes the hash covers; the builder into the AST OPA
// reads, built directly so OPA converts nothing, with what follows from them: the distinct flows of an artifact,
// each trail's compliant and its index.

type envDoc struct {
	Name, Type string
	Tags       []tagDoc
}

type tagDoc struct{ Key, Value string }

type artifactDoc struct {
	Name, Fingerprint string
	Allowlisted       bool
	Trails            []trailDoc
}

type flowDoc struct {
	Name string
	Tags []tagDoc
}

type trailDoc struct {
	Flow         flowDoc
	Name, State  string
	Attestations []attestationDoc
}

type attestationDoc struct {
	ID, Name, Type string
	Compliant      bool
	CreatedAt      float64
	Target         string // artifact or trail
	Control        string
	seq            int // position in report order: the later of two at one time wins
}

func tags(m map[string]string) []tagDoc {
	out := make([]tagDoc, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, tagDoc{k, m[k]})
	}
	return out
}

func envDocument(e Environment) envDoc {
	return envDoc{Name: e.Name, Type: e.Type, Tags: tags(e.Tags)}
}

func artifactDocument(a Artifact) artifactDoc {
	doc := artifactDoc{Name: a.Name, Fingerprint: a.Fingerprint, Allowlisted: a.Allowlisted, Trails: make([]trailDoc, 0, len(a.Trails))}
	for _, t := range a.Trails {
		doc.Trails = append(doc.Trails, trailDoc{
			Flow: flowDoc{Name: t.Flow.Name, Tags: tags(t.Flow.Tags)}, Name: t.Name, State: t.State,
			Attestations: latest(t.Attestations),
		})
	}
	slices.SortFunc(doc.Trails, func(x, y trailDoc) int {
		return cmp.Or(cmp.Compare(x.Flow.Name, y.Flow.Name), cmp.Compare(x.Name, y.Name))
	})
	return doc
}

// latest keeps, per level, name and control, the attestation reported last (by CreatedAt, then by position), sorted
// by level, name and control. Older attestations of a name are history: a re-attestation replaces them.
func latest(atts []Attestation) []attestationDoc {
	type key struct {
		onArtifact    bool
		name, control string
	}
	keep := make(map[key]int, len(atts))
	for i, a := range atts {
		k := key{a.OnArtifact, a.Name, a.Control}
		if j, ok := keep[k]; !ok || atts[j].CreatedAt <= a.CreatedAt {
			keep[k] = i
		}
	}
	out := make([]attestationDoc, 0, len(keep))
	for _, i := range keep {
		a := atts[i]
		typ := a.Type
		if typ == "system:decision" {
			typ = "decision"
		}
		target := "trail"
		if a.OnArtifact {
			target = "artifact"
		}
		out = append(out, attestationDoc{ID: a.ID, Name: a.Name, Type: typ, Compliant: a.Compliant,
			CreatedAt: a.CreatedAt, Target: target, Control: a.Control, seq: i})
	}
	slices.SortFunc(out, func(x, y attestationDoc) int {
		return cmp.Or(cmp.Compare(x.Target, y.Target), cmp.Compare(x.Name, y.Name), cmp.Compare(x.Control, y.Control))
	})
	return out
}

// Keys of the input document.
var (
	kEnvironment     = ast.InternedTerm("environment")
	kArtifacts       = ast.InternedTerm("artifacts")
	kArtifact        = ast.InternedTerm("artifact")
	kName            = ast.InternedTerm("name")
	kType            = ast.InternedTerm("type")
	kTags            = ast.InternedTerm("tags")
	kFingerprint     = ast.InternedTerm("fingerprint")
	kAllowlisted     = ast.InternedTerm("allowlisted")
	kFlow            = ast.InternedTerm("flow")
	kFlows           = ast.InternedTerm("flows")
	kTrails          = ast.InternedTerm("trails")
	kComplianceState = ast.InternedTerm("compliance_state")
	kCompliant       = ast.InternedTerm("compliant")
	kAttestations    = ast.InternedTerm("attestations")
	kIndex           = ast.InternedTerm("index")
	kDecisions       = ast.InternedTerm("decisions")
	kID              = ast.InternedTerm("id")
	kCreatedAt       = ast.InternedTerm("created_at")
	kTarget          = ast.InternedTerm("target")
	kControl         = ast.InternedTerm("control")
)

func tagsTerm(ts []tagDoc) *ast.Term {
	items := make([][2]*ast.Term, len(ts))
	for i, t := range ts {
		items[i] = ast.Item(ast.StringTerm(t.Key), ast.StringTerm(t.Value))
	}
	return ast.ObjectTerm(items...)
}

func (e envDoc) term() *ast.Term {
	return ast.ObjectTerm(
		ast.Item(kName, ast.StringTerm(e.Name)),
		ast.Item(kType, ast.StringTerm(e.Type)),
		ast.Item(kTags, tagsTerm(e.Tags)),
	)
}

// builder builds the AST of artifact documents. Artifacts of one flow share its term.
type builder struct {
	mu    sync.Mutex           // over flows and key
	flows map[string]*ast.Term // by flow name and tags
	key   []byte
}

func (b *builder) flow(f flowDoc) *ast.Term {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.key = append(b.key[:0], f.Name...)
	for _, t := range f.Tags { // length-prefixed: different tags never look alike
		b.key = binary.AppendUvarint(b.key, uint64(len(t.Key)))
		b.key = append(b.key, t.Key...)
		b.key = binary.AppendUvarint(b.key, uint64(len(t.Value)))
		b.key = append(b.key, t.Value...)
	}
	if t, ok := b.flows[string(b.key)]; ok {
		return t
	}
	t := ast.ObjectTerm(ast.Item(kName, ast.StringTerm(f.Name)), ast.Item(kTags, tagsTerm(f.Tags)))
	b.flows[string(b.key)] = t
	return t
}

func (b *builder) artifact(a artifactDoc) *ast.Term {
	flows := make([]*ast.Term, 0, 1)
	trails := make([]*ast.Term, len(a.Trails))
	for i, t := range a.Trails {
		f := b.flow(t.Flow)
		if i == 0 || a.Trails[i-1].Flow.Name != t.Flow.Name { // trails are sorted by flow
			flows = append(flows, f)
		}
		trails[i] = t.term(f)
	}
	return ast.ObjectTerm(
		ast.Item(kName, ast.StringTerm(a.Name)),
		ast.Item(kFingerprint, ast.StringTerm(a.Fingerprint)),
		ast.Item(kAllowlisted, ast.InternedTerm(a.Allowlisted)),
		ast.Item(kFlows, ast.ArrayTerm(flows...)),
		ast.Item(kTrails, ast.ArrayTerm(trails...)),
	)
}

// term is the trail with its flow and its index:
//
//	index.attestations[name][type]: whether every attestation there of that name and type is compliant, with
//	  "*" standing for any name and any type (absent: there is none);
//	index.decisions[control][name]: the latest decision for the control with that name, "*" for any name.
func (t trailDoc) term(flow *ast.Term) *ast.Term {
	atts := make([]*ast.Term, len(t.Attestations))
	type match struct {
		name, typ string
		ok        bool
	}
	matches := make([]match, 0, 4*len(t.Attestations))
	for k, x := range t.Attestations {
		control := ast.InternedNullTerm
		if x.Control != "" {
			control = ast.StringTerm(x.Control)
		}
		atts[k] = ast.ObjectTerm(
			ast.Item(kID, ast.StringTerm(x.ID)),
			ast.Item(kName, ast.StringTerm(x.Name)),
			ast.Item(kType, ast.StringTerm(x.Type)),
			ast.Item(kCompliant, ast.InternedTerm(x.Compliant)),
			ast.Item(kCreatedAt, ast.FloatNumberTerm(x.CreatedAt)),
			ast.Item(kTarget, ast.InternedTerm(x.Target)),
			ast.Item(kControl, control),
		)
		matches = append(matches, match{x.Name, x.Type, x.Compliant}, match{x.Name, "*", x.Compliant},
			match{"*", x.Type, x.Compliant}, match{"*", "*", x.Compliant})
	}
	// Sorted by name and type, a run of equal keys is one entry: compliant when all of the run are.
	slices.SortFunc(matches, func(x, y match) int { return cmp.Or(cmp.Compare(x.name, y.name), cmp.Compare(x.typ, y.typ)) })
	var names, types [][2]*ast.Term
	for i := 0; i < len(matches); {
		m := matches[i]
		ok := true
		for ; i < len(matches) && matches[i].name == m.name && matches[i].typ == m.typ; i++ {
			ok = ok && matches[i].ok
		}
		types = append(types, ast.Item(ast.StringTerm(m.typ), ast.InternedTerm(ok)))
		if i == len(matches) || matches[i].name != m.name {
			names = append(names, ast.Item(ast.StringTerm(m.name), ast.ObjectTerm(types...)))
			types = types[:0]
		}
	}
	var controls, latest [][2]*ast.Term
	picks := t.decisions()
	for i, d := range picks {
		latest = append(latest, ast.Item(ast.StringTerm(d.name), atts[d.at]))
		if i == len(picks)-1 || picks[i+1].control != d.control {
			controls = append(controls, ast.Item(ast.StringTerm(d.control), ast.ObjectTerm(latest...)))
			latest = latest[:0]
		}
	}
	return ast.ObjectTerm(
		ast.Item(kName, ast.StringTerm(t.Name)),
		ast.Item(kFlow, flow),
		ast.Item(kComplianceState, ast.StringTerm(t.State)),
		ast.Item(kCompliant, ast.InternedTerm(t.State == "COMPLIANT")),
		ast.Item(kAttestations, ast.ArrayTerm(atts...)),
		ast.Item(kIndex, ast.ObjectTerm(
			ast.Item(kAttestations, ast.ObjectTerm(names...)),
			ast.Item(kDecisions, ast.ObjectTerm(controls...)),
		)),
	)
}

// decisionPick is the decision of a trail for a control and a name ("*": any name): the latest, by CreatedAt,
// then by report order. at is its index in the trail's attestations.
type decisionPick struct {
	control, name string
	at            int
}

// decisions picks the trail's decision for each control and name, sorted by control and name.
func (t trailDoc) decisions() []decisionPick {
	var ds []decisionPick
	for k, x := range t.Attestations {
		if x.Type == "decision" && x.Control != "" {
			ds = append(ds, decisionPick{x.Control, x.Name, k}, decisionPick{x.Control, "*", k})
		}
	}
	newer := func(x, y int) bool {
		a, b := t.Attestations[x], t.Attestations[y]
		return a.CreatedAt > b.CreatedAt || (a.CreatedAt == b.CreatedAt && a.seq > b.seq)
	}
	slices.SortFunc(ds, func(x, y decisionPick) int {
		return cmp.Or(cmp.Compare(x.control, y.control), cmp.Compare(x.name, y.name))
	})
	out := ds[:0]
	for i := 0; i < len(ds); {
		d := ds[i]
		for ; i < len(ds) && ds[i].control == d.control && ds[i].name == d.name; i++ {
			if newer(ds[i].at, d.at) {
				d.at = ds[i].at
			}
		}
		out = append(out, d)
	}
	return out
}
