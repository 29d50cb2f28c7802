package template

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestFoldEvaluatesAsWholeHistory: a trail's attestations folded give the result of the whole
// history, after every attestation added, over random trails that exercise every case of rule 1
// (evidence by fingerprint for one slot, several slots and a slot it names; for an artifact that
// lost its slot; for a slot before its artifact; for a fingerprint alone), re-reports of a name
// with the same, earlier and later times (NaN too), and artifacts reported in between. With no
// result cache, so that every evaluation reaches the policy.
func TestFoldEvaluatesAsWholeHistory(t *testing.T) {
	tpl := mustParse(t, basicTemplate)
	e := NewEngine(EngineOptions{ResultCacheSize: -1})
	ctx := context.Background()
	fps := []string{fpCli, fpCli2, fpDocs, fpOther, ""}
	targets := []string{"", "cli", "docs", "extra"}
	names := []string{"pr", "lint", "sbom", "scan"}
	times := []float64{1, 2, 2, 3, math.NaN()}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 21))
		var in TrailInput
		var f Fold
		for i := range 40 {
			if rng.IntN(8) == 0 { // an artifact, named or not, possibly a fingerprint seen before
				name := []string{"", "cli", "docs"}[rng.IntN(3)]
				in.Artifacts = append(in.Artifacts, artifact(fmt.Sprint("a", i), fps[rng.IntN(3)], name, times[rng.IntN(len(times))]))
			}
			a := artAtt(fmt.Sprint("x", i), names[rng.IntN(len(names))], "generic", rng.IntN(3) > 0,
				times[rng.IntN(len(times))], fps[rng.IntN(len(fps))], targets[rng.IntN(len(targets))])
			in.Attestations = append(in.Attestations, a)
			f.Add(a)
			want, err := e.Evaluate(ctx, tpl, in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Evaluate(ctx, tpl, TrailInput{Attestations: f.Attestations(), Artifacts: in.Artifacts})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, after %d attestations (%d folded):\n got %s\nwant %s", seed, i+1, f.Len(), dumpJSON(got), dumpJSON(want))
			}
		}
	}
}

// TestFoldKeepsLatestPerKey: the fold holds one attestation per name, fingerprint and target, the
// latest (ties to the later report), in report order.
func TestFoldKeepsLatestPerKey(t *testing.T) {
	var f Fold
	for _, a := range []Attestation{
		trailAtt("pr1", "pr", "pull_request", true, 5),
		artAtt("sbom1", "sbom", "generic", true, 1, fpCli, ""),
		trailAtt("pr2", "pr", "pull_request", false, 4), // earlier: pr1 stays
		trailAtt("lint1", "lint", "generic", true, 1),
		artAtt("sbom2", "sbom", "generic", true, 1, fpCli, "cli"), // another target: kept beside sbom1
		trailAtt("pr3", "pr", "pull_request", true, 5),            // the same time, reported later: replaces pr1
		artAtt("sbom3", "sbom", "generic", false, 2, fpCli, ""),   // replaces sbom1
	} {
		f.Add(a)
	}
	var ids []string
	for _, a := range f.Attestations() {
		ids = append(ids, a.ID)
	}
	if want := []string{"lint1", "sbom2", "pr3", "sbom3"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("folded %v, want %v", ids, want)
	}
	f.Add(trailAtt("lint2", "lint", "generic", true, 2)) // replaces the first of four
	f.Add(trailAtt("pr4", "pr", "pull_request", true, 9))
	f.Add(artAtt("sbom4", "sbom", "generic", true, 3, fpCli, "")) // must find sbom3 where it moved to
	ids = ids[:0]
	for _, a := range f.Attestations() {
		ids = append(ids, a.ID)
	}
	if want := []string{"sbom2", "lint2", "pr4", "sbom4"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("folded %v, want %v", ids, want)
	}
}
