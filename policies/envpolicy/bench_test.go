package envpolicy

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/veritrail/veritrail/policies/envpolicy/envpolicytest"
	"github.com/veritrail/veritrail/policies/rego"
)

// benchPolicies are the shared policies of envpolicytest.
var benchPolicies = envpolicytest.Policies()

// benchArtifacts is a snapshot of n artifacts, each reported in one trail of one of 20 flows with a pull request,
// tests, a scan, an SBOM and a decision, all compliant but for every 10th artifact's trail.
func benchArtifacts(n int) []Artifact {
	arts := make([]Artifact, n)
	for i := range arts {
		fp := fmt.Sprintf("%064x", i+1)
		arts[i] = Artifact{
			Name: fmt.Sprintf("registry.example.com/team/service-%d:1.%d", i%50, i), Fingerprint: fp,
			Trails: []Trail{{
				Flow: Flow{Name: fmt.Sprintf("service-%d", i%20),
					Tags: map[string]string{"risk-level": []string{"high", "low"}[i%2], "tier": fmt.Sprint(i % 4), "team": "core"}},
				Name: fmt.Sprintf("%040x", i), State: []string{"COMPLIANT", "NON-COMPLIANT"}[min(i%10, 1)^1], Attestations: []Attestation{
					{ID: "1", Name: "pr", Type: "pull_request", Compliant: true, CreatedAt: 1},
					{ID: "2", Name: "unit-tests", Type: "junit", Compliant: true, CreatedAt: 2, OnArtifact: true},
					{ID: "3", Name: "snyk", Type: "snyk", Compliant: true, CreatedAt: 3, OnArtifact: true},
					{ID: "4", Name: "sbom", Type: "generic", Compliant: true, CreatedAt: 4, OnArtifact: true},
					{ID: "5", Name: "release", Type: "decision", Compliant: true, CreatedAt: 5, OnArtifact: true, Control: "change-approval"},
				},
			}},
		}
	}
	return arts
}

func benchSetup(b *testing.B) ([]*Policy, []Artifact) {
	var ps []*Policy
	for i, src := range benchPolicies {
		p, err := Parse([]byte(src), ParseOptions{})
		if err != nil {
			b.Fatal(err)
		}
		p.Name, p.Version = fmt.Sprint("policy-", i), 1
		ps = append(ps, p)
	}
	return ps, benchArtifacts(1000)
}

// BenchmarkTrivialQuery is the baseline the other benchmarks are judged against on a noisy machine: a prepared
// query that reads one input field.
func BenchmarkTrivialQuery(b *testing.B) {
	pq, err := rego.Prepare(context.Background(),
		rego.QuerySpec{Query: "data.x.y", Modules: map[string]string{"x.rego": "package x\n\ny := input.a == 1\n"}})
	if err != nil {
		b.Fatal(err)
	}
	in := ast.NewObject(ast.Item(ast.StringTerm("a"), ast.IntNumberTerm(1)))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rego.Eval(ctx, pq, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshotWarm: a 1,000-artifact snapshot against 3 policies, queries prepared, input prepared (as the
// evaluator holds it once the report was applied). One iteration is 3 OPA evaluations, side by side.
func BenchmarkSnapshotWarm(b *testing.B) {
	ps, arts := benchSetup(b)
	e := NewEngine(Options{})
	in := NewInput(Environment{Name: "prod", Type: "K8S"}, arts)
	ctx := context.Background()
	if res, err := e.EvaluateSnapshot(ctx, ps, in); err != nil || res[0].Compliant || !res[1].Compliant {
		b.Fatalf("%v %+v", err, res[:2])
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.EvaluateSnapshot(ctx, ps, in); err != nil {
			b.Fatal(err)
		}
	}
	reportEvals(b, len(ps), len(arts))
}

// BenchmarkSnapshotWarmDistinct: BenchmarkSnapshotWarm where no two artifacts share a shape (each flow has a tag of
// its own), so every artifact is evaluated by every policy: the worst case of judging by shape.
func BenchmarkSnapshotWarmDistinct(b *testing.B) {
	ps, arts := benchSetup(b)
	for i := range arts {
		arts[i].Trails[0].Flow.Tags = maps.Clone(arts[i].Trails[0].Flow.Tags)
		arts[i].Trails[0].Flow.Tags["build"] = fmt.Sprint(i)
	}
	e := NewEngine(Options{})
	in := NewInput(Environment{Name: "prod", Type: "K8S"}, arts)
	ctx := context.Background()
	before := e.Judged()
	if _, err := e.EvaluateSnapshot(ctx, ps, in); err != nil {
		b.Fatal(err)
	}
	if n := e.Judged() - before; n != int64(len(ps)*len(arts)) {
		b.Fatalf("OPA evaluated %d artifacts, want %d", n, len(ps)*len(arts))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.EvaluateSnapshot(ctx, ps, in); err != nil {
			b.Fatal(err)
		}
	}
	reportEvals(b, len(ps), len(arts))
}

// BenchmarkSnapshotCold: the same from the evidence with a new engine each time: every policy compiled and
// prepared, the input normalized, hashed and built.
func BenchmarkSnapshotCold(b *testing.B) {
	ps, arts := benchSetup(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		e := NewEngine(Options{})
		if _, err := e.EvaluateSnapshot(ctx, ps, NewInput(Environment{Name: "prod", Type: "K8S"}, arts)); err != nil {
			b.Fatal(err)
		}
	}
	reportEvals(b, len(ps), len(arts))
}

// BenchmarkSnapshotOneChanged: a new report of the 1,000-artifact snapshot where one artifact's evidence changed:
// normalize and hash all, evaluate only the artifact whose hash is new against the 3 policies.
func BenchmarkSnapshotOneChanged(b *testing.B) {
	ps, arts := benchSetup(b)
	e := NewEngine(Options{})
	ctx := context.Background()
	env := Environment{Name: "prod", Type: "K8S"}
	known := map[string]bool{}
	for _, a := range NewInput(env, arts).Artifacts {
		known[a.Hash] = true
	}
	for _, p := range ps {
		if err := e.Prepare(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		arts[500].Trails[0].Attestations[1].CreatedAt = float64(10 + i) // a re-attestation
		changed := NewInput(env, arts).Select(func(a ArtifactInput) bool { return !known[a.Hash] })
		if len(changed.Artifacts) != 1 {
			b.Fatalf("%d changed", len(changed.Artifacts))
		}
		if _, err := e.EvaluateSnapshot(ctx, ps, changed); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvaluatePolicy: one policy, one evaluation of the 1,000 artifacts on one core.
func BenchmarkEvaluatePolicy(b *testing.B) {
	ps, arts := benchSetup(b)
	in := NewInput(Environment{Name: "prod", Type: "K8S"}, arts)
	for i, p := range ps {
		b.Run(fmt.Sprint("policy-", i), func(b *testing.B) {
			e := NewEngine(Options{})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Evaluate(context.Background(), p, in); err != nil {
					b.Fatal(err)
				}
			}
			reportEvals(b, 1, len(arts))
		})
	}
}

// BenchmarkAssert: one artifact against the 3 policies, queries prepared (an assert).
func BenchmarkAssert(b *testing.B) {
	ps, arts := benchSetup(b)
	e := NewEngine(Options{})
	ctx := context.Background()
	env := Environment{Name: "prod", Type: "K8S"}
	if _, err := e.Assert(ctx, ps, env, arts[0]); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Assert(ctx, ps, env, arts[0]); err != nil {
			b.Fatal(err)
		}
	}
	reportEvals(b, len(ps), 1)
}

// BenchmarkNewInput: normalizing and hashing the evidence of a 1,000-artifact snapshot (the documents OPA reads
// are built on first evaluation).
func BenchmarkNewInput(b *testing.B) {
	arts := benchArtifacts(1000)
	b.ReportAllocs()
	for b.Loop() {
		NewInput(Environment{Name: "prod", Type: "K8S"}, arts)
	}
}

// reportEvals adds OPA evaluations per second and artifacts judged by one policy per second.
func reportEvals(b *testing.B, policies, artifacts int) {
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N*policies)/s, "evals/s")
	b.ReportMetric(float64(b.N*policies*artifacts)/s, "artifact-policies/s")
}
