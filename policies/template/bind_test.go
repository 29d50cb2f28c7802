package template

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Levels holding the same evidence share one input term; evidence that only a careless encoding would confuse
// ("a" of type "custom:b\x00c", "a\x00custom:b" of type "c") must not.
func TestEvaluateKeepsLevelsApart(t *testing.T) {
	in := TrailInput{
		Attestations: []Attestation{
			artAtt("1", "a", "custom:b\x00c", true, 1, fpCli, "x"),
			artAtt("2", "a\x00custom:b", "c", true, 1, fpDocs, "y"),
			artAtt("3", "a", "custom:b\x00c", true, 1, fpOther, "z"), // the same evidence as x
		},
		Artifacts: []Artifact{artifact("ax", fpCli, "x", 0), artifact("ay", fpDocs, "y", 0), artifact("az", fpOther, "z", 0)},
	}
	got, err := NewEngine(EngineOptions{}).Evaluate(context.Background(), nil, in)
	if err != nil {
		t.Fatal(err)
	}
	want := verdict(StateCompliant, nil, map[string]ArtifactStatus{
		"x": unexpectedArt("ax", fpCli, StateCompliant, unexpected("a", "custom:b\x00c", "1", true)),
		"y": unexpectedArt("ay", fpDocs, StateCompliant, unexpected("a\x00custom:b", "c", "2", true)),
		"z": unexpectedArt("az", fpOther, StateCompliant, unexpected("a", "custom:b\x00c", "3", true)),
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", dumpJSON(got), dumpJSON(want))
	}
	doc, _ := bind(in).input(in)
	arts := doc.(ast.Object).Get(kArtifacts).Value.(ast.Object)
	x, y, z := arts.Get(ast.StringTerm("x")), arts.Get(ast.StringTerm("y")), arts.Get(ast.StringTerm("z"))
	if x != z || x == y {
		t.Errorf("x %v, y %v, z %v: want x and z, and only them, to share one term", x, y, z)
	}
}

// Re-attestations collapse to the latest per name before evaluation, whatever their number.
func TestBindKeepsLatestPerName(t *testing.T) {
	var in TrailInput
	for i := range 100 {
		in.Attestations = append(in.Attestations, trailAtt(string(rune('a'+i%26))+"x", "lint", "generic", i == 42, float64(i%50)))
	}
	b := bind(in)
	if len(b.levels) != 1 || len(b.levels[0].latest) != 1 {
		t.Fatalf("levels = %+v", b.levels)
	}
	// CreatedAt 49 is reported at 49 and 99: the later report wins.
	if i, ok := b.attestation(0, "lint"); !ok || i != 99 {
		t.Errorf("latest lint = %d, %v; want 99", i, ok)
	}
}

// Inputs that differ only in where a level sits (an artifact slot, an unclaimed entry, its key) have different
// signatures, so the result cache never answers one with the other's result.
func TestInputSignatureSeparatesPlaces(t *testing.T) {
	evidence := func(fp, target string) TrailInput {
		return TrailInput{Attestations: []Attestation{artAtt("1", "a", "generic", true, 1, fp, target)}}
	}
	withArtifact := evidence(fpCli, "")
	withArtifact.Artifacts = []Artifact{artifact("ax", fpCli, "x", 0)}
	inputs := map[string]TrailInput{
		"unclaimed target x":      evidence("", "x"),
		"unclaimed target y":      evidence("", "y"),
		"unclaimed fingerprint":   evidence(fpCli, ""),
		"artifact slot x":         withArtifact,
		"trail-level":             {Attestations: []Attestation{trailAtt("1", "a", "generic", true, 1)}},
		"trail-level, other type": {Attestations: []Attestation{trailAtt("1", "a", "junit", true, 1)}},
	}
	seen := map[string]string{}
	for name, in := range inputs {
		_, sig := bind(in).input(in)
		if other, ok := seen[string(sig)]; ok {
			t.Errorf("%q and %q have the same signature", name, other)
		}
		seen[string(sig)] = name
	}
}

// The latest per name holds whether a level looks names up by scanning or through its index
// (more than scanNames names), and the names end up sorted either way.
func TestBindLatestPerNameAtAnyWidth(t *testing.T) {
	for _, names := range []int{3, scanNames, scanNames + 1, 40} {
		rng := rand.New(rand.NewPCG(uint64(names), 7))
		var in TrailInput
		want := map[string]int{} // name -> index of its latest attestation
		for i := range 3 * names {
			name := fmt.Sprintf("n%02d", rng.IntN(names))
			at := float64(rng.IntN(5))
			in.Attestations = append(in.Attestations, trailAtt(fmt.Sprint(i), name, "generic", true, at))
			if j, ok := want[name]; !ok || later(at, i, in.Attestations[j].CreatedAt, j) {
				want[name] = i
			}
		}
		b := bind(in)
		latest := b.levels[0].latest
		if len(latest) != len(want) {
			t.Fatalf("%d names: %d at the trail level, want %d", names, len(latest), len(want))
		}
		if !slices.IsSortedFunc(latest, func(x, y namedAttestation) int { return strings.Compare(x.name, y.name) }) {
			t.Errorf("%d names: not sorted: %v", names, latest)
		}
		for name, i := range want {
			if got, ok := b.attestation(0, name); !ok || got != i {
				t.Errorf("%d names: latest %s = %d, %v; want %d", names, name, got, ok, i)
			}
		}
		if _, ok := b.attestation(0, "absent"); ok {
			t.Errorf("%d names: found a name never reported", names)
		}
	}
}
