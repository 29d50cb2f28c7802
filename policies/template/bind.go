package template

import (
	"math"
	"slices"
	"strings"
)

// Go applies the part of the compliance rules (doc.go) that is the same for every template, and that made the
// policy slow when it ran in Rego: rule 4's choice of the latest artifact for a slot, rule 1 (binding) and rule 2's
// choice of the latest attestation per name at each level. The policy (template.rego.tmpl) decides everything the
// template is needed for, from what bind leaves. TestEvaluateMatchesReferencePolicy checks the split against the
// policy that did it all in Rego (testdata/reference.rego.tmpl).

// binding is where the evidence of a trail lands.
type binding struct {
	levels []level        // levels[0] is the trail, then the artifact entries in the order they were made
	index  map[string]int // artifact entry key -> index in levels
}

// level is the trail, or an artifact entry: a slot a reported artifact fills, or a key only evidence names.
type level struct {
	key         string // "" for the trail (no artifact entry key is empty)
	artifact    int    // index of the artifact in the slot, -1 when there is none (always for the trail)
	fingerprint string // the artifact's, or the key of an entry made for a fingerprint alone (rule 1d), or ""
	latest      []namedAttestation
	// byName indexes latest by name once it holds more than scanNames; below that a scan is
	// cheaper than hashing, and a level holds the few names its template lists.
	byName map[string]int
}

// scanNames is the number of names a level looks up by scanning latest.
const scanNames = 8

// find returns the position of name in l.latest, or -1.
func (l *level) find(name string) int {
	if l.byName != nil {
		if p, ok := l.byName[name]; ok {
			return p
		}
		return -1
	}
	for p, x := range l.latest {
		if x.name == name {
			return p
		}
	}
	return -1
}

// add appends the first attestation named name at l.
func (l *level) add(name string, i int) {
	l.latest = append(l.latest, namedAttestation{name, i})
	switch {
	case l.byName != nil:
		l.byName[name] = len(l.latest) - 1
	case len(l.latest) > scanNames:
		l.byName = make(map[string]int, 2*len(l.latest))
		for p, x := range l.latest {
			l.byName[x.name] = p
		}
	}
}

// namedAttestation is the latest attestation with a name at a level, by its index in TrailInput.Attestations.
type namedAttestation struct {
	name        string
	attestation int
}

// later reports whether x (reported at index i) is later than y (at index j): greater CreatedAt, then later report.
func later(x float64, i int, y float64, j int) bool {
	x, y = finiteTime(x), finiteTime(y)
	return x > y || x == y && i > j
}

// finiteTime is a timestamp as "latest" compares it: NaN and infinities (which JSON cannot hold) count as 0.
func finiteTime(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// bind applies rule 4's latest artifact per slot, rule 1 and rule 2's latest attestation per level and name to in.
func bind(in TrailInput) *binding {
	arts := in.Artifacts
	// Rule 4: the latest artifact reported with a template name wins that slot.
	byName := make(map[string]int, len(arts))
	for i, r := range arts {
		if r.TemplateName == "" {
			continue
		}
		if j, ok := byName[r.TemplateName]; !ok || later(r.CreatedAt, i, arts[j].CreatedAt, j) {
			byName[r.TemplateName] = i
		}
	}
	// One reported without a name is keyed by its fingerprint, unless that fingerprint already fills a named slot
	// (the same artifact reported twice) or is a slot's key.
	var byFingerprint map[string]int
	var namedFingerprints map[string]bool
	for i, r := range arts {
		fp := r.Fingerprint
		if r.TemplateName != "" || fp == "" {
			continue
		}
		if namedFingerprints == nil {
			namedFingerprints = make(map[string]bool, len(byName))
			for _, j := range byName {
				namedFingerprints[arts[j].Fingerprint] = true
			}
			byFingerprint = map[string]int{}
		}
		if _, ok := byName[fp]; ok || namedFingerprints[fp] {
			continue
		}
		if j, ok := byFingerprint[fp]; !ok || later(r.CreatedAt, i, arts[j].CreatedAt, j) {
			byFingerprint[fp] = i
		}
	}

	slotCount := len(byName) + len(byFingerprint)
	b := &binding{
		levels: make([]level, 1, 1+slotCount),
		index:  make(map[string]int, slotCount),
	}
	b.levels[0].artifact = -1
	slots := make(map[string][]int, slotCount) // fingerprint -> the levels of the slots whose artifact has it
	// In report order, so that the levels are too.
	for i, r := range arts {
		k := r.TemplateName
		if k == "" {
			k = r.Fingerprint
			if j, ok := byFingerprint[k]; !ok || j != i {
				continue
			}
		} else if byName[k] != i {
			continue
		}
		n := b.entry(k)
		b.levels[n].artifact, b.levels[n].fingerprint = i, r.Fingerprint
		slots[r.Fingerprint] = append(slots[r.Fingerprint], n)
	}
	var reported map[string]bool // every reported fingerprint, those of artifacts that lost their slot included
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

	// Rule 1, then rule 2's latest per level and name.
	for i, a := range in.Attestations {
		fp, target := a.ArtifactFingerprint, a.TargetArtifact
		switch ns, ok := slots[fp]; {
		case fp == "" && target == "": // e: trail-level
			b.place(0, in, i)
		case ok: // a: the slots whose artifact has the fingerprint; only the one it names, if it names one of them
			if n, ok := b.index[target]; ok && slices.Contains(ns, n) {
				b.place(n, in, i)
				break
			}
			for _, n := range ns {
				b.place(n, in, i)
			}
		case isReported(fp): // b: evidence about an artifact that lost its slot binds nowhere
		case target != "": // c: the slot it names, whenever its artifact arrives
			b.place(b.entry(target), in, i)
		default: // d: an entry for the fingerprint alone (or the slot of that key, if there is one)
			n := b.entry(fp)
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

// entry returns the level of the artifact entry keyed k, making it if needed.
func (b *binding) entry(k string) int {
	n, ok := b.index[k]
	if !ok {
		n = len(b.levels)
		b.levels = append(b.levels, level{key: k, artifact: -1})
		b.index[k] = n
	}
	return n
}

// place binds attestation i to level n: it becomes the one with its name there if it is the latest so far.
func (b *binding) place(n int, in TrailInput, i int) {
	l := &b.levels[n]
	name := in.Attestations[i].Name
	p := l.find(name)
	if p < 0 {
		l.add(name, i)
		return
	}
	if j := l.latest[p].attestation; later(in.Attestations[i].CreatedAt, i, in.Attestations[j].CreatedAt, j) {
		l.latest[p].attestation = i
	}
}

// sortNames orders the names at level n, so that levels holding the same evidence look the same.
func (b *binding) sortNames(n int) {
	l := &b.levels[n]
	byName := func(x, y namedAttestation) int { return strings.Compare(x.name, y.name) }
	if slices.IsSortedFunc(l.latest, byName) {
		return
	}
	slices.SortFunc(l.latest, byName)
	if l.byName != nil {
		for p, x := range l.latest {
			l.byName[x.name] = p
		}
	}
}

// attestation returns the index of the latest attestation named name at level n.
func (b *binding) attestation(n int, name string) (int, bool) {
	l := &b.levels[n]
	p := l.find(name)
	if p < 0 {
		return 0, false
	}
	return l.latest[p].attestation, true
}
