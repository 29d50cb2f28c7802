package template

// Fold holds a trail's attestations reduced to those bind can still choose, so that a caller
// that keeps it between evaluations adds only what the trail gained: a trail's evaluation then
// costs what its distinct evidence costs, not what its whole history does.
//
// Attestations with the same name, artifact fingerprint and target artifact are bound to the same
// levels by rule 1 (which reads only those two fields and the reported artifacts), so at each of
// those levels rule 2 can pick only the latest of them (later). The fold keeps that one, and keeps
// the attestations it holds in report order: where two of different keys land at one level with
// the same name and time, the later report still wins. An artifact entry that evidence alone
// makes (rule 1c, 1d) may be made at a later attestation than it would be from the whole
// history, which changes the order of levels and nothing decided from them.
// TestFoldEvaluatesAsWholeHistory checks the result against the whole history.
//
// The zero Fold is empty. It is not safe for concurrent use.
type Fold struct {
	atts []Attestation
	at   map[foldKey]int // the position in atts of each key's latest
}

type foldKey struct{ name, fingerprint, target string }

// Add folds a in; a was reported after every attestation added before it.
func (f *Fold) Add(a Attestation) {
	k := foldKey{a.Name, a.ArtifactFingerprint, a.TargetArtifact}
	p, ok := f.at[k]
	if !ok {
		if f.at == nil {
			f.at = map[foldKey]int{}
		}
		f.at[k] = len(f.atts)
		f.atts = append(f.atts, a)
		return
	}
	if !later(a.CreatedAt, 1, f.atts[p].CreatedAt, 0) { // a is reported after atts[p]
		return
	}
	// a replaces atts[p], at the end, where the latest report goes.
	if p == len(f.atts)-1 {
		f.atts[p] = a
		return
	}
	copy(f.atts[p:], f.atts[p+1:])
	f.atts[len(f.atts)-1] = a
	for key, q := range f.at {
		if q > p {
			f.at[key] = q - 1
		}
	}
	f.at[k] = len(f.atts) - 1
}

// Attestations are what the fold holds, in report order: TrailInput.Attestations for Evaluate,
// which gives the same result as for every attestation added. The slice is the fold's own, valid
// until the next Add.
func (f *Fold) Attestations() []Attestation { return f.atts }

// Len is the number of attestations held.
func (f *Fold) Len() int { return len(f.atts) }
