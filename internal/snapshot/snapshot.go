package snapshot

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"slices"
	"strings"
)

// Annotation types of a snapshot artifact, relative to the previous snapshot.
const (
	Started   = "started"
	Changed   = "changed"
	Exited    = "exited"
	Unchanged = "unchanged"
)

// Instance is one running copy of an artifact as a reporter saw it.
type Instance struct {
	Name              string         // the artifact name (the digests map key, e.g. image name)
	Fingerprint       string         // sha256
	CreationTimestamp float64        // 0 when unknown
	Context           map[string]any // type-specific fields of the report item (podName, namespace, taskArn, ...), kept for display
}

// Running is one artifact in a snapshot: all instances with the same (Name, Fingerprint).
type Running struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	Instances   int    `json:"instances"`
	// CreationTimestamps is sorted ascending, one per instance whose time is known or 0.
	CreationTimestamps []float64 `json:"creationTimestamp"`
	// Contexts[i] is the context of the instance created at CreationTimestamps[i], so a
	// display can pair pods with their start times; nil when no instance has one.
	Contexts   []map[string]any `json:"contexts,omitempty"`
	Annotation Annotation       `json:"annotation"`
}

// Annotation says how an artifact moved since the previous snapshot. Type is one of Started,
// Changed, Exited, Unchanged; Was and Now are the instance counts before and after.
type Annotation struct {
	Type string `json:"type"`
	Was  int    `json:"was"`
	Now  int    `json:"now"`
}

// Expand turns one report item into its instances, one per digest, in name order so that the
// result does not depend on map iteration. The instances share ctx, which is only read.
func Expand(digests map[string]string, creationTimestamp float64, ctx map[string]any) []Instance {
	out := make([]Instance, 0, len(digests))
	for name, fp := range digests {
		out = append(out, Instance{Name: name, Fingerprint: fp, CreationTimestamp: creationTimestamp, Context: ctx})
	}
	slices.SortFunc(out, func(a, b Instance) int { return compareKey(a.Name, a.Fingerprint, b.Name, b.Fingerprint) })
	return out
}

// Group folds report items into the running set, sorted by (Name, Fingerprint). It leaves
// items untouched and allocates four slices whatever the number of artifacts: the result and
// one backing array each for the timestamps, the contexts and the sort order.
func Group(items []Instance) []Running {
	n := len(items)
	if n == 0 {
		return nil
	}
	// Sort positions rather than the items: cheaper to swap, and the position breaks ties so
	// that the (unstable, O(n log n)) sort still yields one deterministic order.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int {
		a, b := &items[x], &items[y]
		if c := compareKey(a.Name, a.Fingerprint, b.Name, b.Fingerprint); c != 0 {
			return c
		}
		if c := cmp.Compare(a.CreationTimestamp, b.CreationTimestamp); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})

	groups := 1
	for i := 1; i < n; i++ {
		if !sameKey(&items[order[i-1]], &items[order[i]]) {
			groups++
		}
	}
	out := make([]Running, 0, groups)
	ts := make([]float64, n)
	ctxs := make([]map[string]any, n)
	start := 0
	for i, k := range order {
		ts[i] = items[k].CreationTimestamp
		ctxs[i] = items[k].Context
		if i+1 < n && sameKey(&items[k], &items[order[i+1]]) {
			continue
		}
		first := &items[order[start]]
		out = append(out, Running{
			Name:               first.Name,
			Fingerprint:        first.Fingerprint,
			Instances:          i + 1 - start,
			CreationTimestamps: ts[start : i+1 : i+1], // capped: an append must not run into the next artifact
			Contexts:           contexts(ctxs[start : i+1 : i+1]),
		})
		start = i + 1
	}
	return out
}

// Union is the running set of a logical environment: the union of its physical members'
// current running sets, sorted by (Name, Fingerprint). Instances of the same (Name,
// Fingerprint) in several members add up and their timestamps merge. Annotations are dropped:
// they are relative to a member's own history, and the caller diffs the union against the
// logical environment's previous snapshot. The result shares no memory with the inputs.
func Union(sets ...[]Running) []Running {
	total := 0
	for _, s := range sets {
		total += len(s)
	}
	if total == 0 {
		return nil
	}
	type ref struct {
		r   *Running
		seq int // position across all sets: equal keys merge in argument order
	}
	refs := make([]ref, 0, total)
	nts := 0
	for _, s := range sets {
		for i := range s {
			refs = append(refs, ref{&s[i], len(refs)})
			nts += len(s[i].CreationTimestamps)
		}
	}
	// seq makes the order total, so the O(n log n) unstable sort is still deterministic.
	slices.SortFunc(refs, func(a, b ref) int {
		if c := compareKey(a.r.Name, a.r.Fingerprint, b.r.Name, b.r.Fingerprint); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})

	out := make([]Running, 0, total)
	ts := make([]float64, 0, nts)
	ctxs := make([]map[string]any, 0, nts)
	var merge []tsContext
	for i := 0; i < len(refs); {
		first := refs[i].r
		j := i + 1
		for j < len(refs) && compareKey(first.Name, first.Fingerprint, refs[j].r.Name, refs[j].r.Fingerprint) == 0 {
			j++
		}
		r := Running{Name: first.Name, Fingerprint: first.Fingerprint}
		from := len(ts)
		if j == i+1 { // the common case: in one member only, usually sorted already
			r.Instances = first.Instances
			ts = append(ts, first.CreationTimestamps...)
			for k := range first.CreationTimestamps {
				ctxs = append(ctxs, contextAt(first, k))
			}
			if !slices.IsSorted(ts[from:]) {
				sortAligned(ts[from:], ctxs[from:], &merge)
			}
		} else {
			merge = merge[:0]
			for _, m := range refs[i:j] {
				r.Instances += m.r.Instances
				for k, t := range m.r.CreationTimestamps {
					merge = append(merge, tsContext{t: t, ctx: contextAt(m.r, k), seq: len(merge)})
				}
			}
			sortMerge(merge)
			for _, p := range merge {
				ts = append(ts, p.t)
				ctxs = append(ctxs, p.ctx)
			}
		}
		r.CreationTimestamps = ts[from:len(ts):len(ts)]
		r.Contexts = contexts(ctxs[from:len(ctxs):len(ctxs)])
		out = append(out, r)
		i = j
	}
	return out
}

// tsContext keeps a timestamp with its instance's context while they are sorted together;
// seq is the original position and breaks ties, keeping the sort deterministic.
type tsContext struct {
	t   float64
	ctx map[string]any
	seq int
}

func sortMerge(p []tsContext) {
	slices.SortFunc(p, func(a, b tsContext) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
}

// sortAligned sorts ts ascending and permutes ctxs the same way.
func sortAligned(ts []float64, ctxs []map[string]any, buf *[]tsContext) {
	p := (*buf)[:0]
	for i, t := range ts {
		p = append(p, tsContext{t: t, ctx: ctxs[i], seq: i})
	}
	sortMerge(p)
	for i := range p {
		ts[i], ctxs[i] = p[i].t, p[i].ctx
	}
	*buf = p
}

// contexts returns c, or nil when no instance has a context (a server or S3 reporter sends
// none), so that such artifacts carry no list of nulls.
func contexts(c []map[string]any) []map[string]any {
	for _, m := range c {
		if m != nil {
			return c
		}
	}
	return nil
}

func contextAt(r *Running, i int) map[string]any {
	if i < len(r.Contexts) {
		return r.Contexts[i]
	}
	return nil
}

// normalize returns s when it is what Group and Union produce (strictly sorted by key, each
// artifact's timestamps sorted) and otherwise rebuilds it with Union, which sorts and folds
// duplicates. The check is linear, so well-formed input costs no sort and no allocation.
func normalize(s []Running) []Running {
	for i := range s {
		if i > 0 && compareKey(s[i-1].Name, s[i-1].Fingerprint, s[i].Name, s[i].Fingerprint) >= 0 {
			return Union(s)
		}
		if !slices.IsSorted(s[i].CreationTimestamps) {
			return Union(s)
		}
	}
	return s
}

// CompareKey orders artifacts as running sets are ordered: by name, then fingerprint.
func CompareKey(aName, aFP, bName, bFP string) int { return compareKey(aName, aFP, bName, bFP) }

func compareKey(aName, aFP, bName, bFP string) int {
	if c := strings.Compare(aName, bName); c != 0 {
		return c
	}
	return strings.Compare(aFP, bFP)
}

func sameKey(a, b *Instance) bool {
	return a.Name == b.Name && a.Fingerprint == b.Fingerprint
}

// Digest identifies a running set by what Diff compares: names, fingerprints, instance counts
// and creation timestamps (contexts do not count). Two sets with the same digest are the same
// set under either include_scaling setting, so a report that repeats the last one can be
// recognised without decoding the last snapshot; different digests may still be no change
// (timestamps only, without include_scaling), which Diff then decides.
func Digest(set []Running) []byte {
	h := sha256.New()
	var buf []byte
	for _, r := range normalize(set) {
		buf = buf[:0]
		buf = binary.AppendUvarint(buf, uint64(len(r.Name)))
		buf = append(buf, r.Name...)
		buf = binary.AppendUvarint(buf, uint64(len(r.Fingerprint)))
		buf = append(buf, r.Fingerprint...)
		buf = binary.AppendUvarint(buf, uint64(r.Instances))
		buf = binary.AppendUvarint(buf, uint64(len(r.CreationTimestamps)))
		for _, ts := range r.CreationTimestamps {
			buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(ts))
		}
		h.Write(buf)
	}
	return h.Sum(nil)
}
