package snapexpr

import (
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kind tells which form a Snapshot has.
type Kind uint8

// Snapshot forms; the zero Kind is the invalid zero Snapshot.
const (
	KindIndex   Kind = iota + 1 // N, #N: absolute index Number()
	KindFromEnd                 // -N, #-N: Number()-th from the end, 1 = latest
	KindBehind                  // ~N: Number() before the latest
	KindTime                    // @{TIME}: current at Time()
	KindAgo                     // @{N.unit.ago}: current Number() Unit()s before now
	KindNow                     // @{now}: the latest
)

// Snapshot is a parsed snapshot expression. Compare with Equal: it holds a time.Time.
type Snapshot struct {
	kind Kind
	n    int
	unit Unit
	t    time.Time
}

// Latest is the snapshot a bare environment name means; its String is "#-1".
func Latest() Snapshot { return Snapshot{kind: KindFromEnd, n: 1} }

// Index is the absolute snapshot n, e.g. to print "ENV#n" with FormatSnappish.
func Index(n int) Snapshot { return Snapshot{kind: KindIndex, n: n} }

// Kind is the form; 0 for the zero Snapshot.
func (s Snapshot) Kind() Kind { return s.kind }

// Number is N of the forms that have one (index, from-end, behind, ago).
func (s Snapshot) Number() int { return s.n }

// Unit is the unit of KindAgo.
func (s Snapshot) Unit() Unit { return s.unit }

// Time is the instant of KindTime, in UTC.
func (s Snapshot) Time() time.Time { return s.t }

// Equal reports whether s and o are the same expression (times compared as instants).
func (s Snapshot) Equal(o Snapshot) bool {
	return s.kind == o.kind && s.n == o.n && s.unit == o.unit && s.t.Equal(o.t)
}

// String is the canonical form, which ParseSnapshot parses back to an Equal value:
// "#7", "#-1", "~2", "@{now}", "@{2.hours.ago}", "@{2024-01-01T10:00:00.5Z}". Index forms
// carry '#' so that the same text also follows an environment name in a snappish.
func (s Snapshot) String() string {
	switch s.kind {
	case KindIndex:
		return "#" + strconv.Itoa(s.n)
	case KindFromEnd:
		return "#-" + strconv.Itoa(s.n)
	case KindBehind:
		return "~" + strconv.Itoa(s.n)
	case KindTime:
		return "@{" + s.t.UTC().Format(time.RFC3339Nano) + "}"
	case KindAgo:
		return "@{" + s.unit.count(s.n, ".") + ".ago}"
	case KindNow:
		return "@{now}"
	}
	return ""
}

// FormatSnappish is the canonical snappish, env followed by s.String(), which
// ParseSnappish parses back when env is non-empty and has no '#', '~' or '@'.
func FormatSnappish(env string, s Snapshot) string { return env + s.String() }

// ParseSnapshot parses the expression of GET /snapshots/{org}/{env}/{expr}.
func ParseSnapshot(s string) (Snapshot, error) {
	p := parser{in: s, what: "snapshot expression"}
	lo, hi := p.trim(0, len(s))
	if lo == hi {
		return Snapshot{}, p.fail(lo, "empty expression")
	}
	snap, err := p.snapshot(lo, hi, true)
	if err != nil {
		return Snapshot{}, err
	}
	return snap, nil
}

// ParseSnappish parses ENV, ENV#N, ENV#-N, ENV~N or ENV@{...} (env-diff's snappish1/2).
// The returned name has surrounding white space removed.
func ParseSnappish(s string) (env string, snap Snapshot, err error) {
	p := parser{in: s, what: "snapshot expression"}
	lo, hi := p.trim(0, len(s))
	if lo == hi {
		return "", Snapshot{}, p.fail(lo, "empty expression")
	}
	k := strings.IndexAny(s[lo:hi], "#~@")
	if k < 0 {
		return s[lo:hi], Latest(), nil
	}
	k += lo
	elo, ehi := p.trim(lo, k)
	if elo == ehi {
		return "", Snapshot{}, p.fail(lo, "environment name is missing")
	}
	snap, serr := p.snapshot(k, hi, false)
	if serr != nil {
		return "", Snapshot{}, serr
	}
	return s[elo:ehi], snap, nil
}

// snapshot parses [lo, hi), non-empty; bare allows N and -N, which a snappish cannot have.
func (p *parser) snapshot(lo, hi int, bare bool) (Snapshot, *SyntaxError) {
	var (
		snap Snapshot
		j    int
		err  *SyntaxError
	)
	switch c := p.in[lo]; {
	case c == '#':
		snap, j, err = p.index(lo+1, hi, " after '#'")
	case c == '~':
		snap.kind = KindBehind
		snap.n, j, err = p.uint(lo+1, hi, " after '~'")
	case c == '@':
		return p.at(lo+1, hi)
	case bare && (c == '-' || isDigit(c)):
		snap, j, err = p.index(lo, hi, "")
	case bare:
		return Snapshot{}, p.fail(lo, "expected a snapshot expression: N, -N, #N, ~N or @{...}")
	default:
		return Snapshot{}, p.fail(lo, "expected '#', '~' or '@' after the environment name")
	}
	if err != nil {
		return Snapshot{}, err
	}
	if j != hi {
		return Snapshot{}, p.unexpected(j, hi)
	}
	return snap, nil
}

// index reads N or -N. -0 is 0, as integer parsing on the hosted service makes it.
func (p *parser) index(i, hi int, ctx string) (Snapshot, int, *SyntaxError) {
	if i < hi && p.in[i] == '-' {
		n, j, err := p.uint(i+1, hi, " after '-'")
		if err != nil || n == 0 {
			return Index(0), j, err
		}
		return Snapshot{kind: KindFromEnd, n: n}, j, nil
	}
	n, j, err := p.uint(i, hi, ctx)
	return Index(n), j, err
}

// at parses {now}, {TIME} or {N.unit.ago} starting at i, the byte after '@'.
func (p *parser) at(i, hi int) (Snapshot, *SyntaxError) {
	if i >= hi || p.in[i] != '{' {
		return Snapshot{}, p.fail(i, "expected '{' after '@'")
	}
	end := strings.IndexByte(p.in[i+1:hi], '}')
	if end < 0 {
		return Snapshot{}, p.fail(hi, "expected '}'")
	}
	end += i + 1
	if end != hi-1 {
		return Snapshot{}, p.unexpected(end+1, hi)
	}
	lo, chi := p.trim(i+1, end)
	if lo == chi {
		return Snapshot{}, p.fail(lo, "expected now, a time like 2024-01-01T10:00:00 or N.unit.ago inside @{}")
	}
	d := lo
	for d < chi && isDigit(p.in[d]) {
		d++
	}
	switch {
	case d > lo && d < chi && p.in[d] == '.':
		return p.ago(lo, chi)
	case d > lo:
		t, err := p.date(lo, chi)
		if err != nil {
			return Snapshot{}, err
		}
		return Snapshot{kind: KindTime, t: t}, nil
	case p.word(lo, chi) == chi && asciiLower(p.in[lo:chi]) == "now":
		return Snapshot{kind: KindNow}, nil
	}
	return Snapshot{}, p.fail(lo, "expected now, a time like 2024-01-01T10:00:00 or N.unit.ago inside @{}")
}

// ago parses N.unit.ago; the caller saw "N.".
func (p *parser) ago(lo, hi int) (Snapshot, *SyntaxError) {
	n, i, err := p.uint(lo, hi, "")
	if err != nil {
		return Snapshot{}, err
	}
	u, i, err := p.unit(i+1, hi)
	if err != nil {
		return Snapshot{}, err
	}
	if i >= hi || p.in[i] != '.' {
		return Snapshot{}, p.fail(i, "expected '.ago' after the unit")
	}
	w := p.word(i+1, hi)
	if asciiLower(p.in[i+1:w]) != "ago" {
		return Snapshot{}, p.fail(i+1, "expected 'ago'")
	}
	if w != hi {
		return Snapshot{}, p.unexpected(w, hi)
	}
	return Snapshot{kind: KindAgo, n: n, unit: u}, nil
}

// Resolve finds the index (1..n) that s names among n snapshots. timestampOf(i) is the
// timestamp of index i, ascending with i; it is only called, O(log n) times, for the
// time forms. now anchors N.unit.ago. A result outside 1..n is a *RangeError.
func (s Snapshot) Resolve(n int, timestampOf func(index int) float64, now time.Time) (int, error) {
	n = max(n, 0)
	var idx int
	switch s.kind {
	case KindIndex:
		idx = s.n
	case KindFromEnd:
		idx = n - s.n + 1 // no overflow: n >= 0 and 1 <= s.n <= MaxInt
	case KindBehind:
		idx = n - s.n
	case KindNow:
		idx = n
	case KindTime:
		return s.byTime(n, timestampOf, unixSeconds(s.t))
	case KindAgo:
		// In float seconds: N units can exceed time.Duration's 292 years.
		return s.byTime(n, timestampOf, unixSeconds(now)-float64(s.n)*s.unit.Seconds())
	default:
		return 0, errors.New("snapexpr: Resolve of the zero Snapshot")
	}
	if idx < 1 || idx > n {
		return 0, &RangeError{Snapshot: s, Len: n, Index: idx}
	}
	return idx, nil
}

func (s Snapshot) byTime(n int, timestampOf func(int) float64, at float64) (int, error) {
	if n == 0 {
		return 0, &RangeError{Snapshot: s, At: at}
	}
	idx := currentAt(n, timestampOf, at)
	if idx == 0 {
		return 0, &RangeError{Snapshot: s, Len: n, At: at, First: timestampOf(1)}
	}
	return idx, nil
}

// currentAt is the latest index whose timestamp <= at, 0 if none.
func currentAt(n int, timestampOf func(int) float64, at float64) int {
	return sort.Search(n, func(i int) bool { return timestampOf(i+1) > at })
}
