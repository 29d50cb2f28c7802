package evaluate

import (
	"sync"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/template"
)

// foldCache keeps the template input of recently evaluated trails folded (template.Fold), so
// that evaluating a trail again folds in only the attestations it gained: building the input
// from a busy trail's whole history, and binding all of it, grew with the trail at every
// evaluation (the bench's trails reach hundreds of attestations). A trail's facts only grow
// (factCache), so a fold of their first n stays true while the facts handed in begin with them.
type foldCache struct {
	mu   sync.Mutex
	kept *weightedLRU[*trailFold] // by trail, weighing the attestations each holds
}

// trailFold is a trail's input folded from its first n facts.
type trailFold struct {
	n      int
	lastID string // the ID of fact n-1, which the facts handed in next must have there
	// overrides are the override facts among the n, by the ID each overrides (later ones win,
	// as the overrides of one attestation are applied in report order); nil while there are none.
	overrides  map[string]store.AttestationFact
	fold       template.Fold
	modifiedAt float64 // the latest report time among the n
}

func newFoldCache(limit int) *foldCache {
	return &foldCache{kept: newWeightedLRU(limit, func(f *trailFold) int { return f.fold.Len() + 1 })}
}

// take answers trail's input folded from atts, its facts in position order. What it answers is the
// caller's until it gives it back (put); meanwhile an evaluation of the same trail folds its own.
func (c *foldCache) take(trail string, atts []store.AttestationFact) *trailFold {
	c.mu.Lock()
	f, ok := c.kept.Peek(trail)
	if ok {
		c.kept.Remove(trail)
	}
	c.mu.Unlock()
	if !ok || f.n > len(atts) || f.n > 0 && atts[f.n-1].ID != f.lastID {
		f = &trailFold{}
	}
	f.extend(atts)
	return f
}

// put keeps f for trail's next evaluation, unless one kept meanwhile folded more.
func (c *foldCache) put(trail string, f *trailFold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept, ok := c.kept.Peek(trail); ok && kept.n > f.n {
		return
	}
	c.kept.Put(trail, f)
}

// extend folds in atts past the n folded. An override among them may change an attestation
// folded earlier, so the fold is then made again from all of atts (overrides are rare).
func (f *trailFold) extend(atts []store.AttestationFact) {
	more := atts[f.n:]
	for _, a := range more {
		if a.OverridesID != "" {
			*f = trailFold{}
			f.overrides = map[string]store.AttestationFact{}
			for _, a := range atts {
				if a.OverridesID != "" {
					f.overrides[a.OverridesID] = a
				}
			}
			more = atts
			break
		}
	}
	for _, a := range more {
		f.modifiedAt = max(f.modifiedAt, a.CreatedAt)
		if a.OverridesID != "" {
			continue
		}
		o, overridden := f.overrides[a.ID]
		f.fold.Add(attestationInput(a, o, overridden))
	}
	f.n = len(atts)
	if f.n > 0 {
		f.lastID = atts[f.n-1].ID
	}
}

// forget drops what is kept of trails: their folds may hold attestations of a transaction that
// did not commit.
func (c *foldCache) forget(trails []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range trails {
		c.kept.Remove(id)
	}
}
