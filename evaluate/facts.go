package evaluate

import (
	"context"
	"slices"
	"sync"

	"github.com/veritrail/veritrail/internal/store"
)

// factCache keeps the attestation facts of recently evaluated trails, so that evaluating a trail
// again reads only the attestations it gained since: a busy trail's whole history was read at
// every evaluation, the largest cost per message in the bench's profile, growing with the trail.
// What it keeps stays true because attestations are never changed or removed and a trail's
// attestations take positions in the order they commit (store.PolicyReader.TrailAttestationFactsAfter).
// It is bounded by the number of facts kept in all, dropping the trails evaluated longest ago; their
// arrays may have room for as many again (trailFacts.grow).
type factCache struct {
	mu   sync.Mutex
	kept *weightedLRU[trailFacts] // by trail, weighing their facts
}

// trailFacts are a trail's facts up to the attestation at position last.
type trailFacts struct {
	last  int64
	facts []store.AttestationFact
	// array is the state of facts' backing array, which the slices of this trail handed out
	// earlier may share.
	array *factArray
}

// factArray records how much of a backing array holds facts. The slices handed out over it are
// never longer than written, and the cache only appends past it, so a slice once handed out is
// never written while its holder reads it.
type factArray struct {
	written int
}

// grow returns f with more appended: in place while the backing array has room and nothing was
// appended past f yet (an evaluation that read further may have), in a new array with room to
// double otherwise, so that a trail's facts are copied a bounded number of times in all rather
// than whole at every evaluation. The caller holds c.mu.
func (f trailFacts) grow(last int64, more []store.AttestationFact) trailFacts {
	n := len(f.facts)
	if f.array != nil && f.array.written == n && n+len(more) <= cap(f.facts) {
		f.facts = append(f.facts, more...)
		f.array.written = len(f.facts)
		f.last = last
		return f
	}
	facts := make([]store.AttestationFact, n+len(more), 2*(n+len(more)))
	copy(facts, f.facts)
	copy(facts[n:], more)
	return trailFacts{last: last, facts: facts, array: &factArray{written: len(facts)}}
}

func newFactCache(limit int) *factCache {
	return &factCache{kept: newWeightedLRU(limit, func(f trailFacts) int { return len(f.facts) })}
}

// read answers the facts of trails: what is kept of them plus what they gained since, from r.
func (c *factCache) read(ctx context.Context, r store.Reader, trails []string) (map[string][]store.AttestationFact, error) {
	base := make(map[string]trailFacts, len(trails))
	after := make(map[string]int64, len(trails))
	c.mu.Lock()
	for _, id := range trails {
		kept, _ := c.kept.Get(id)
		base[id], after[id] = kept, kept.last
	}
	c.mu.Unlock()

	fresh, last, err := r.TrailAttestationFactsAfter(ctx, after)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]store.AttestationFact, len(trails))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range trails {
		now := base[id]
		if pos, ok := last[id]; ok {
			now = now.grow(pos, fresh[id])
		}
		if len(now.facts) > 0 {
			out[id] = slices.Clip(now.facts) // a caller's append must not reach the cache's spare room
			c.keep(id, now)
		}
	}
	return out, nil
}

// keep stores a trail's facts unless what is kept of it is newer (another evaluation of the same
// trail, by EvaluateTrail, may have read further meanwhile).
func (c *factCache) keep(id string, f trailFacts) {
	if kept, ok := c.kept.Peek(id); ok && kept.last > f.last {
		return
	}
	c.kept.Put(id, f)
}
