package evaluate

import (
	"context"
	"slices"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

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
	// controls maps decision attestations to the control each names, which policies read
	// beside the facts and which never changes either. Safe for concurrent use.
	controls *lru.Cache[string, string]
}

// decisionsKept bounds the decisions whose controls a factCache keeps.
const decisionsKept = 1 << 16

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
	controls, _ := lru.New[string, string](decisionsKept) // errs only for a size <= 0
	return &factCache{kept: newWeightedLRU(limit, func(f trailFacts) int { return len(f.facts) }), controls: controls}
}

// read answers the facts of trails: what is kept of them plus what they gained since, from r,
// which reads what is committed.
func (c *factCache) read(ctx context.Context, r store.Reader, trails []string) (map[string][]store.AttestationFact, error) {
	out, now, err := c.gather(ctx, r, trails)
	if err != nil {
		return nil, err
	}
	c.keepAll(now)
	return out, nil
}

// readIn is read inside tx, which may have added attestations of its own: what it read is kept
// only once tx commits.
func (c *factCache) readIn(ctx context.Context, tx store.Tx, trails []string) (map[string][]store.AttestationFact, error) {
	out, now, err := c.gather(ctx, tx, trails)
	if err != nil {
		return nil, err
	}
	tx.OnCommit(func() { c.keepAll(now) })
	return out, nil
}

// gather reads what trails gained since what is kept of them, and answers their facts now, both
// as handed out and as they would be kept.
func (c *factCache) gather(ctx context.Context, r store.Reader, trails []string) (map[string][]store.AttestationFact, map[string]trailFacts, error) {
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
		return nil, nil, err
	}
	out := make(map[string][]store.AttestationFact, len(trails))
	now := make(map[string]trailFacts, len(trails))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range trails {
		f := base[id]
		if pos, ok := last[id]; ok {
			f = f.grow(pos, fresh[id])
		}
		if len(f.facts) > 0 {
			out[id] = slices.Clip(f.facts) // a caller's append must not reach the cache's spare room
			now[id] = f
		}
	}
	return out, now, nil
}

func (c *factCache) keepAll(now map[string]trailFacts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, f := range now {
		c.keep(id, f)
	}
}

// keep stores a trail's facts unless what is kept of it is newer (another evaluation of the same
// trail, by EvaluateTrail, may have read further meanwhile). The caller holds c.mu.
func (c *factCache) keep(id string, f trailFacts) {
	if kept, ok := c.kept.Peek(id); ok && kept.last > f.last {
		return
	}
	c.kept.Put(id, f)
}

// decisionControlsIn maps each decision of ids to the control it names, reading inside tx only
// those not kept; what it read is kept once tx commits.
func (c *factCache) decisionControlsIn(ctx context.Context, tx store.Tx, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	var missing []string
	for _, id := range ids {
		if control, ok := c.controls.Get(id); ok {
			out[id] = control
		} else {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	read, err := tx.DecisionControls(ctx, missing)
	if err != nil {
		return nil, err
	}
	for id, control := range read {
		out[id] = control
	}
	tx.OnCommit(func() {
		for id, control := range read {
			c.controls.Add(id, control)
		}
	})
	return out, nil
}

// txAttestations reads, inside a transaction, the attestations policies judge (a
// policyeval.AttestationReader) through the evaluator's fact cache.
type txAttestations struct {
	facts *factCache
	tx    store.Tx
}

func (a txAttestations) TrailAttestationFactsByIDs(ctx context.Context, trailIDs []string) (map[string][]store.AttestationFact, error) {
	return a.facts.readIn(ctx, a.tx, trailIDs)
}

func (a txAttestations) DecisionControls(ctx context.Context, ids []string) (map[string]string, error) {
	return a.facts.decisionControlsIn(ctx, a.tx, ids)
}
