package template

import (
	"math"
	"slices"
	"strings"
)

// This file prepares the policy's input. It applies the rules that are the same for every template: rule 4's choice
// of the latest artifact for a slot, rule 1 (binding) and rule 2's choice of the latest attestation per name at a
// level. The policy (template.rego.tmpl) decides everything that depends on the template: which expected entries
// are COMPLETE or MISSING, which attestations and artifacts are unexpected, which slots are MISSING, the status of
// each artifact and the state of the trail.

// binding is where the evidence of a trail lands.
type binding struct {
	levels []level          // levels[0] is the trail; then artifact entries in the order they were made
	index  map[string]int   // artifact entry key -> index in levels
	placed map[placeKey]int // (level, name) -> index in that level's latest
}

// level is the trail, or an artifact entry: a slot filled by a reported artifact, or a key only evidence names.
type level struct {
	key         string // "" for the trail (no artifact entry key is empty)
	artifact    int    // index of the artifact that fills the slot, -1 when none does (always -1 for the trail)
	fingerprint string // the artifact's, or the key of an entry made for a fingerprint alone (rule 1d), or ""
	latest      []named
}

// named is the latest attestation with a name at a level: its index in TrailInput.Attestations.
type named struct {
	name        string
	attestation int
}

type placeKey struct {
	level int
	name  string
}

// later reports whether x (reported at index i) is later than y (at index j): greater CreatedAt, then later report.
func later(x float64, i int, y float64, j int) bool {
	x, y = finiteTime(x), finiteTime(y)
	return x > y || x == y && i > j
}

// finiteTime is a timestamp as "latest" compares it: NaN and infinities count as 0.
func finiteTime(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// bind applies rules 4, 1 and 2's "latest" to in. It keeps the semantics the policy had when it did this itself
// (see doc.go); the comments name the cases of rule 1.
func bind(in TrailInput) *binding {
	arts := in.Artifacts
	// Rule 4: the latest artifact reported with a template name wins that slot.
	named := make(map[string]int, len(arts))
	for i, r := range arts {
		if r.TemplateName == "" {
			continue
		}
		if j, ok := named[r.TemplateName]; !ok || later(r.CreatedAt, i, arts[j].CreatedAt, j) {
			named[r.TemplateName] = i
		}
	}
	// One reported without a name is keyed by its fingerprint, unless that fingerprint already fills a named slot
	// (the same artifact reported twice) or is a slot's name.
	var unnamed map[string]int
	var namedFingerprints map[string]bool
	for i, r := range arts {
		fp := r.Fingerprint
		if r.TemplateName != "" || fp == "" {
			continue
		}
		if namedFingerprints == nil {
			namedFingerprints = make(map[string]bool, len(named))
			for _, j := range named {
				namedFingerprints[arts[j].Fingerprint] = true
			}
			unnamed = map[string]int{}
		}
		if _, ok := named[fp]; ok || namedFingerprints[fp] {
			continue
		}
		if j, ok := unnamed[fp]; !ok || later(r.CreatedAt, i, arts[j].CreatedAt, j) {
			unnamed[fp] = i
		}
	}

	b := &binding{
		levels: make([]level, 1, 1+len(named)+len(unnamed)),
		index:  make(map[string]int, len(named)+len(unnamed)),
		placed: make(map[placeKey]int, len(in.Attestations)),
	}
	b.levels[0].artifact = -1
	// Fingerprint -> the slots whose artifact has it (usually one).
	slots := make(map[string][]int, len(named)+len(unnamed))
	for _, m := range []map[string]int{named, unnamed} {
		for k, i := range m {
			n := b.level(k)
			b.levels[n].artifact = i
			b.levels[n].fingerprint = arts[i].Fingerprint
			slots[arts[i].Fingerprint] = append(slots[arts[i].Fingerprint], n)
		}
	}
	var reported map[string]bool // every reported fingerprint, including those of artifacts that lost their slot
	isReported := func(fp string) bool {
		if reported == nil {
			reported = make(map[string]bool, len(arts))
			for _, r := range arts {
				if r.Fingerprint != "" {
					reported[r.Fingerprint] = true
				}
			}
		}
		return reported[fp]
	}

	// Rule 1, then rule 2's latest per (level, name).
	for i, a := range in.Attestations {
		fp, target := a.ArtifactFingerprint, a.TargetArtifact
		switch ns, ok := slots[fp]; {
		case fp == "" && target == "": // e: trail-level
			b.place(0, in, i)
		case ok: // a: the slots whose artifact has the fingerprint; only the one it names, if it names one of them
			if n, ok := b.index[target]; ok && slices.Contains(ns, n) {
				b.place(n, in, i)
				continue
			}
			for _, n := range ns {
				b.place(n, in, i)
			}
		case isReported(fp): // b: about an artifact that lost its slot
		case target != "": // c: the slot it names, whenever its artifact arrives
			b.place(b.level(target), in, i)
		default: // d: an entry for the fingerprint alone (unless a slot has that name)
			n := b.level(fp)
			if b.levels[n].artifact < 0 {
				b.levels[n].fingerprint = fp
			}
			b.place(n, in, i)
		}
	}

	for n := range b.levels {
		b.sortNames(n)
	}
	return b
}

// level returns the index of the artifact entry keyed k, making it if needed.
func (b *binding) level(k string) int {
	n, ok := b.index[k]
	if !ok {
		n = len(b.levels)
		b.levels = append(b.levels, level{key: k, artifact: -1})
		b.index[k] = n
	}
	return n
}

// place binds attestation i to level n, where it is the one with its name if it is the latest so far.
func (b *binding) place(n int, in TrailInput, i int) {
	l := &b.levels[n]
	name := in.Attestations[i].Name
	k := placeKey{n, name}
	p, ok := b.placed[k]
	if !ok {
		b.placed[k] = len(l.latest)
		l.latest = append(l.latest, named{name, i})
		return
	}
	if j := l.latest[p].attestation; later(in.Attestations[i].CreatedAt, i, in.Attestations[j].CreatedAt, j) {
		l.latest[p].attestation = i
	}
}

// sortNames orders the names bound to level n, so that levels holding the same evidence look the same.
func (b *binding) sortNames(n int) {
	l := &b.levels[n]
	cmp := func(x, y named) int { return strings.Compare(x.name, y.name) }
	if slices.IsSortedFunc(l.latest, cmp) {
		return
	}
	slices.SortFunc(l.latest, cmp)
	for p, x := range l.latest {
		b.placed[placeKey{n, x.name}] = p
	}
}

// attestation returns the index of the latest attestation named name bound to level n.
func (b *binding) attestation(n int, name string) (int, bool) {
	p, ok := b.placed[placeKey{n, name}]
	if !ok {
		return 0, false
	}
	return b.levels[n].latest[p].attestation, true
}
