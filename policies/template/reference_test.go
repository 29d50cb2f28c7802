package template

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
	texttemplate "text/template"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/veritrail/veritrail/policies/rego"
)

// The policy before Go took over binding and the choice of the latest attestation and artifact
// (testdata/reference.rego.tmpl, which did everything in Rego from the raw attestations and artifacts) is the
// reference: on any trail, Evaluate must give exactly its verdict.

func referenceEngine(t testing.TB) func(*Template, TrailInput) (TrailCompliance, error) {
	src, err := os.ReadFile("testdata/reference.rego.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := texttemplate.Must(texttemplate.New("reference").Parse(string(src)))
	cache := rego.NewQueryCache(64)
	return func(tpl *Template, in TrailInput) (TrailCompliance, error) {
		if tpl == nil {
			tpl = emptyTemplate
		}
		pq, err := cache.Prepared(context.Background(), tpl.key(), func() (rego.QuerySpec, error) {
			var b bytes.Buffer
			err := tmpl.Execute(&b, map[string]any{
				"ID":                tpl.key(),
				"Version":           1,
				"TrailAttestations": expectedLiteral(tpl.Trail.Attestations, "\t"),
				"Artifacts":         artifactsLiteral(tpl.Trail.Artifacts),
			})
			return rego.QuerySpec{Query: RegoQuery, Modules: map[string]string{"reference.rego": b.String()}}, err
		})
		if err != nil {
			return TrailCompliance{}, err
		}
		v, err := rego.Eval(context.Background(), pq, referenceInput(in))
		if err != nil {
			return TrailCompliance{}, err
		}
		return referenceDecode(v)
	}
}

func TestEvaluateMatchesReferencePolicy(t *testing.T) {
	reference := referenceEngine(t)
	// The default engine caches results by input: each input is evaluated twice (the second time from the
	// cache, as are inputs that repeat across runs), and once by an engine without the cache.
	e := NewEngine(EngineOptions{})
	uncached := NewEngine(EngineOptions{ResultCacheSize: -1})
	rng := rand.New(rand.NewPCG(1, 2))
	templates := []*Template{nil, mustParse(t, basicTemplate)}
	for range 20 {
		templates = append(templates, randomTemplate(t, rng))
	}
	runs := 1000
	if testing.Short() {
		runs = 100
	}
	for i := range runs {
		tpl := templates[i%len(templates)]
		in := randomTrail(rng)
		want, err := reference(tpl, in)
		if err != nil {
			t.Fatal(err)
		}
		for j, eng := range []*Engine{e, e, uncached} {
			got, err := eng.Evaluate(context.Background(), tpl, in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				content := "<nil>"
				if tpl != nil {
					content = tpl.Content
				}
				t.Fatalf("run %d, evaluation %d: template\n%s\ninput %+v\ngot\n%s\nwant\n%s", i, j, content, in, dumpJSON(got), dumpJSON(want))
			}
		}
	}
}

// Small alphabets, so that names, fingerprints, targets and times collide often; "x" is both a template artifact
// name and a fingerprint.
var (
	refNames        = []string{"a", "b", "c", "d"}
	refArtifacts    = []string{"x", "y", "z"}
	refTypes        = []string{"generic", "junit", "decision", "system:decision", "custom:q"}
	refFingerprints = []string{"", "f1", "f2", "f3", "x"}
	refTargets      = []string{"", "x", "y", "z", "w"}
	refTimes        = []float64{0, 1, 2, 3, math.NaN(), math.Inf(1), -0.0}
)

func pick[T any](rng *rand.Rand, s []T) T { return s[rng.IntN(len(s))] }

func randomExpected(rng *rand.Rand) []Expected {
	var es []Expected
	for _, n := range refNames {
		if rng.IntN(2) == 0 {
			typ := pick(rng, []string{"generic", "junit", "decision", "*", "custom:q"})
			es = append(es, Expected{Name: n, Type: typ})
		}
	}
	rng.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
	return es
}

func randomTemplate(t testing.TB, rng *rand.Rand) *Template {
	spec := TrailSpec{Attestations: randomExpected(rng), Artifacts: []ExpectedArtifact{}}
	for _, n := range refArtifacts {
		if rng.IntN(3) > 0 {
			spec.Artifacts = append(spec.Artifacts, ExpectedArtifact{Name: n, Attestations: randomExpected(rng)})
		}
	}
	if _, err := Compile(&Template{Trail: spec}); err != nil {
		t.Fatal(err)
	}
	tpl := &Template{Version: 1, Trail: spec}
	tpl.ID = spec.id(1)
	tpl.Content = dumpJSON(spec)
	return tpl
}

func randomTrail(rng *rand.Rand) TrailInput {
	var in TrailInput
	for i := range rng.IntN(5) {
		in.Artifacts = append(in.Artifacts, Artifact{ID: fmt.Sprint("art", i), Fingerprint: pick(rng, refFingerprints),
			TemplateName: pick(rng, append([]string{"", "", "w"}, refArtifacts...)), CreatedAt: pick(rng, refTimes)})
	}
	for i := range rng.IntN(12) {
		a := Attestation{ID: fmt.Sprint("att", i), Name: pick(rng, append(refNames, "e")), Type: pick(rng, refTypes),
			IsCompliant: rng.IntN(4) > 0, CreatedAt: pick(rng, refTimes)}
		if rng.IntN(5) == 0 {
			a.OverriddenID = fmt.Sprint("att", rng.IntN(i+1))
		}
		if rng.IntN(3) > 0 {
			a.ArtifactFingerprint, a.TargetArtifact = pick(rng, refFingerprints), pick(rng, refTargets)
		}
		in.Attestations = append(in.Attestations, a)
	}
	return in
}

// referenceInput and referenceDecode are the input and result documents of the reference policy.
func referenceInput(in TrailInput) ast.Value {
	num := func(f float64) *ast.Term { return ast.FloatNumberTerm(finiteTime(f)) }
	atts := make([]*ast.Term, len(in.Attestations))
	for i, a := range in.Attestations {
		atts[i] = ast.ObjectTerm(
			ast.Item(ast.StringTerm("id"), ast.StringTerm(a.ID)),
			ast.Item(ast.StringTerm("name"), ast.StringTerm(a.Name)),
			ast.Item(ast.StringTerm("type"), ast.StringTerm(a.Type)),
			ast.Item(ast.StringTerm("is_compliant"), ast.BooleanTerm(a.IsCompliant)),
			ast.Item(ast.StringTerm("overridden_id"), ast.StringTerm(a.OverriddenID)),
			ast.Item(ast.StringTerm("created_at"), num(a.CreatedAt)),
			ast.Item(ast.StringTerm("artifact_fingerprint"), ast.StringTerm(a.ArtifactFingerprint)),
			ast.Item(ast.StringTerm("target_artifact"), ast.StringTerm(a.TargetArtifact)),
		)
	}
	arts := make([]*ast.Term, len(in.Artifacts))
	for i, a := range in.Artifacts {
		arts[i] = ast.ObjectTerm(
			ast.Item(ast.StringTerm("id"), ast.StringTerm(a.ID)),
			ast.Item(ast.StringTerm("fingerprint"), ast.StringTerm(a.Fingerprint)),
			ast.Item(ast.StringTerm("template_name"), ast.StringTerm(a.TemplateName)),
			ast.Item(ast.StringTerm("created_at"), num(a.CreatedAt)),
		)
	}
	return ast.NewObject(ast.Item(ast.StringTerm("attestations"), ast.ArrayTerm(atts...)),
		ast.Item(ast.StringTerm("artifacts"), ast.ArrayTerm(arts...)))
}

func referenceDecode(v ast.Value) (TrailCompliance, error) {
	obj := v.(ast.Object)
	str := func(o ast.Object, k string) string { return string(o.Get(ast.StringTerm(k)).Value.(ast.String)) }
	boolean := func(o ast.Object, k string) bool { return bool(o.Get(ast.StringTerm(k)).Value.(ast.Boolean)) }
	statuses := func(t *ast.Term) []AttestationStatus {
		arr := t.Value.(*ast.Array)
		out := make([]AttestationStatus, arr.Len())
		for i := range arr.Len() {
			o := arr.Elem(i).Value.(ast.Object)
			out[i] = AttestationStatus{Name: str(o, "name"), Type: str(o, "type"), ID: str(o, "id"),
				OverriddenID: str(o, "overridden_id"), Status: str(o, "status"), Unexpected: boolean(o, "unexpected")}
			if c, ok := o.Get(ast.StringTerm("is_compliant")).Value.(ast.Boolean); ok {
				b := bool(c)
				out[i].IsCompliant = &b
			}
		}
		return out
	}
	out := TrailCompliance{State: str(obj, "state"), IsCompliant: boolean(obj, "is_compliant"),
		Attestations: statuses(obj.Get(ast.StringTerm("attestations"))), Artifacts: map[string]ArtifactStatus{}}
	obj.Get(ast.StringTerm("artifacts")).Value.(ast.Object).Foreach(func(k, v *ast.Term) {
		a := v.Value.(ast.Object)
		out.Artifacts[string(k.Value.(ast.String))] = ArtifactStatus{ID: str(a, "id"), Fingerprint: str(a, "fingerprint"),
			Status: str(a, "status"), IsCompliant: boolean(a, "is_compliant"), Attestations: statuses(a.Get(ast.StringTerm("attestations"))),
			Unexpected: boolean(a, "unexpected")}
	})
	return out, nil
}
