package template

import (
	"context"
	"fmt"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/veritrail/veritrail/policies/rego"
)

// BenchmarkTrivialQuery is the baseline the Evaluate benchmarks are judged against on a noisy machine: a prepared
// query (same options as every policy) that reads one input field, with a one-field parsed input.
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

// BenchmarkEvaluateRetries: CI retries. A small template, and 200 re-attestations of 3 names (one trail-level, two
// on the artifact) reported out of CreatedAt order, besides one attestation of each other expected name.
func BenchmarkEvaluateRetries(b *testing.B) {
	tpl := mustParse(b, `
trail:
  attestations:
  - {name: pr, type: pull_request}
  - {name: lint, type: generic}
  artifacts:
  - name: cli
    attestations:
    - {name: sbom, type: generic}
    - {name: scan, type: snyk}
    - {name: test, type: junit}
`)
	in := TrailInput{
		Attestations: []Attestation{
			trailAtt("pr", "pr", "pull_request", true, 1),
			artAtt("sbom", "sbom", "generic", true, 2, fpCli, "cli"),
		},
		Artifacts: []Artifact{artifact("a", fpCli, "cli", 0)},
	}
	latest := map[string]int{}
	for i := range 200 {
		at := float64(10 + (i*37)%200) // a permutation of 10..209: report order is not time order
		id := fmt.Sprint("r", i)
		var a Attestation
		switch i % 3 {
		case 0:
			a = trailAtt(id, "lint", "generic", false, at)
		case 1:
			a = artAtt(id, "scan", "snyk", false, at, fpCli, "cli")
		default:
			a = artAtt(id, "test", "junit", false, at, fpCli, "cli")
		}
		if j, ok := latest[a.Name]; !ok || in.Attestations[j].CreatedAt < at {
			latest[a.Name] = len(in.Attestations)
		}
		in.Attestations = append(in.Attestations, a)
	}
	for _, j := range latest { // only the retry that counts passed
		in.Attestations[j].IsCompliant = true
	}
	benchmarkEvaluate(b, tpl, in)
}

// BenchmarkEvaluateLongTrail: a trail whose pipeline ran 100 times, 300 attestations of the
// template's three names, as the bench's busy trails are. The policy's answer comes from the
// result cache (its key holds names, types and compliance, not IDs), as it mostly does for the
// trails of one flow: what is measured is mostly binding the evidence to its levels.
func BenchmarkEvaluateLongTrail(b *testing.B) {
	tpl := mustParse(b, `
trail:
  attestations:
  - {name: pr, type: pull_request}
  - {name: lint, type: generic}
  - {name: test, type: junit}
`)
	var in TrailInput
	for i := range 300 {
		in.Attestations = append(in.Attestations, trailAtt(fmt.Sprint(i), []string{"pr", "lint", "test"}[i%3], "generic", true, float64(i)))
	}
	e := NewEngine(EngineOptions{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Evaluate(ctx, tpl, in); err != nil {
			b.Fatal(err)
		}
	}
}
