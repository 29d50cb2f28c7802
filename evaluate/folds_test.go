package evaluate

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/template"
)

// wholeHistory is the input of every fact, each override folded into what it overrides (the
// last override of an attestation wins), folded afresh: what a foldCache must answer.
func wholeHistory(atts []store.AttestationFact) (template.Fold, float64) {
	overrides := map[string]store.AttestationFact{}
	var modifiedAt float64
	for _, a := range atts {
		modifiedAt = max(modifiedAt, a.CreatedAt)
		if a.OverridesID != "" {
			overrides[a.OverridesID] = a
		}
	}
	var f template.Fold
	for _, a := range atts {
		if a.OverridesID == "" {
			o, ok := overrides[a.ID]
			f.Add(attestationInput(a, o, ok))
		}
	}
	return f, modifiedAt
}

// TestFoldCacheExtendsAsWholeHistory: a trail's fold, kept between evaluations that each hand in
// more of its facts, holds what a fold of all of them does, overrides included (of attestations
// before and after them, and of ones folded away); facts that do not begin with what was folded
// (another trail's, or read anew) are folded afresh.
func TestFoldCacheExtendsAsWholeHistory(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 3))
		c := newFoldCache(1 << 10)
		var atts []store.AttestationFact
		for len(atts) < 60 {
			for range 1 + rng.IntN(4) { // the facts a trail gained since its last evaluation
				i := len(atts)
				a := store.AttestationFact{ID: fmt.Sprint("a", i), Name: []string{"pr", "lint", "test"}[rng.IntN(3)],
					Type: "generic", IsCompliant: rng.IntN(2) == 0, CreatedAt: float64(rng.IntN(6)),
					ArtifactFingerprint: []string{"", "f1", "f2"}[rng.IntN(3)]}
				if rng.IntN(6) == 0 { // an override of an attestation before, or of one to come
					a.OverridesID = fmt.Sprint("a", rng.IntN(i+3))
				}
				atts = append(atts, a)
			}
			f := c.take("t", atts)
			want, modifiedAt := wholeHistory(atts)
			if !reflect.DeepEqual(f.fold.Attestations(), want.Attestations()) || f.modifiedAt != modifiedAt {
				t.Fatalf("seed %d, %d facts: folded %+v (modified %v), want %+v (%v)", seed, len(atts),
					f.fold.Attestations(), f.modifiedAt, want.Attestations(), modifiedAt)
			}
			c.put("t", f)
		}
		other := make([]store.AttestationFact, len(atts)+1) // as long as the history folded, and more
		for i := range other {
			other[i] = store.AttestationFact{ID: fmt.Sprint("b", i), Name: "pr", Type: "generic", CreatedAt: 1}
		}
		if got := c.take("t", other).fold.Attestations(); len(got) != 1 || got[0].ID != other[len(atts)].ID {
			t.Fatalf("seed %d: facts of another history folded as %+v", seed, got)
		}
	}
}

// TestFoldCacheHandsOutOnce: a fold taken is the taker's alone until it is put back; one kept
// meanwhile that folded more facts stays.
func TestFoldCacheHandsOutOnce(t *testing.T) {
	c := newFoldCache(1 << 10)
	atts := []store.AttestationFact{{ID: "a0", Name: "pr"}, {ID: "a1", Name: "lint"}}
	first := c.take("t", atts[:1])
	second := c.take("t", atts)
	if first == second {
		t.Fatal("one fold handed out twice")
	}
	c.put("t", second)
	c.put("t", first) // folded less: dropped
	if got := c.take("t", atts); got != second {
		t.Errorf("kept the fold of %d facts, want the one of %d", got.n, second.n)
	}
}
