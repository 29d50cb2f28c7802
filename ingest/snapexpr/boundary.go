package snapexpr

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// BoundaryKind tells which form a Boundary has.
type BoundaryKind uint8

// Boundary forms; the zero BoundaryKind is the invalid zero Boundary.
const (
	BoundaryIndex BoundaryKind = iota + 1 // Index(): positive absolute, negative from the end
	BoundaryNow                           // NOW: the latest snapshot
	BoundaryAgo                           // Number() Unit()s before now
	BoundaryTime                          // Unix(): an absolute time, from BoundaryAt only
)

// Boundary is one end of an events window. Compare with Equal or ==.
type Boundary struct {
	kind BoundaryKind
	n    int
	unit Unit
	ts   float64
}

// DefaultStart is the start when none is given: snapshot 1.
func DefaultStart() Boundary { return Boundary{kind: BoundaryIndex, n: 1} }

// DefaultEnd is the end when none is given: NOW.
func DefaultEnd() Boundary { return Boundary{kind: BoundaryNow} }

// BoundaryAt is the absolute time ts (unix seconds), for start_ts/end_ts/from/to values
// parsed with ParseTimestamp. It is kept as the float given so that it compares exactly
// with stored timestamps.
func BoundaryAt(ts float64) Boundary { return Boundary{kind: BoundaryTime, ts: ts} }

// Kind is the form; 0 for the zero Boundary.
func (b Boundary) Kind() BoundaryKind { return b.kind }

// Index is the signed index of BoundaryIndex (-1 is the latest).
func (b Boundary) Index() int {
	if b.kind != BoundaryIndex {
		return 0
	}
	return b.n
}

// Number is N of BoundaryAgo.
func (b Boundary) Number() int {
	if b.kind != BoundaryAgo {
		return 0
	}
	return b.n
}

// Unit is the unit of BoundaryAgo.
func (b Boundary) Unit() Unit { return b.unit }

// Unix is the time of BoundaryTime in unix seconds.
func (b Boundary) Unix() float64 { return b.ts }

// Equal reports whether b and o are the same boundary.
func (b Boundary) Equal(o Boundary) bool { return b == o }

// String is the canonical form: "3", "-1", "NOW", "2hours", "1day". ParseBoundary parses
// it back to an Equal value, except for BoundaryAt, shown as "@" and the unix seconds
// since no request parameter spells an absolute time that way.
func (b Boundary) String() string {
	switch b.kind {
	case BoundaryIndex:
		return strconv.Itoa(b.n)
	case BoundaryNow:
		return "NOW"
	case BoundaryAgo:
		return b.unit.count(b.n, "")
	case BoundaryTime:
		return "@" + strconv.FormatFloat(b.ts, 'f', -1, 64)
	}
	return ""
}

// ParseBoundary parses the start or end parameter of the environment events listing.
func ParseBoundary(s string) (Boundary, error) {
	p := parser{in: s, what: "interval boundary"}
	lo, hi := p.trim(0, len(s))
	if lo == hi {
		return Boundary{}, p.fail(lo, "empty value")
	}
	b, err := p.boundary(lo, hi)
	if err != nil {
		return Boundary{}, err
	}
	return b, nil
}

// ParseInterval parses the deprecated interval parameter, START..END. Either side may be
// empty and then is NOW; a bare expression E is E..E; an empty or all-white-space interval gives DefaultStart and
// DefaultEnd (see the package comment).
func ParseInterval(s string) (start, end Boundary, err error) {
	p := parser{in: s, what: "interval"}
	lo, hi := p.trim(0, len(s))
	if lo == hi {
		return DefaultStart(), DefaultEnd(), nil
	}
	k := strings.Index(s[lo:hi], "..")
	if k < 0 {
		// A bare expression E is the interval E..E (`kosli log environment --interval NOW`).
		b, serr := p.boundary(lo, hi)
		if serr != nil {
			return Boundary{}, Boundary{}, serr
		}
		return b, b, nil
	}
	k += lo
	var serr *SyntaxError
	if start, serr = p.side(lo, k); serr != nil {
		return Boundary{}, Boundary{}, serr
	}
	if end, serr = p.side(k+2, hi); serr != nil {
		return Boundary{}, Boundary{}, serr
	}
	return start, end, nil
}

// side parses one side of an interval; empty is NOW.
func (p *parser) side(lo, hi int) (Boundary, *SyntaxError) {
	lo, hi = p.trim(lo, hi)
	if lo == hi {
		return DefaultEnd(), nil
	}
	return p.boundary(lo, hi)
}

// boundary parses [lo, hi), non-empty.
func (p *parser) boundary(lo, hi int) (Boundary, *SyntaxError) {
	const expected = "expected a snapshot index, NOW or a time reference such as 1h or 2days"
	c := p.in[lo]
	switch {
	case c == '-' || c == '~':
		n, j, err := p.uint(lo+1, hi, fmt.Sprintf(" after %q", rune(c)))
		switch {
		case err != nil:
			return Boundary{}, err
		case j != hi:
			return Boundary{}, p.unexpected(j, hi)
		case c == '~' && n == math.MaxInt:
			return Boundary{}, p.fail(lo+1, "number too large")
		case c == '~':
			return Boundary{kind: BoundaryIndex, n: -(n + 1)}, nil
		case n == 0:
			return Boundary{}, p.fail(lo, "snapshot indexes are 1-based; -1 is the latest")
		}
		return Boundary{kind: BoundaryIndex, n: -n}, nil
	case isDigit(c):
		n, j, err := p.uint(lo, hi, "")
		if err != nil {
			return Boundary{}, err
		}
		if j == hi {
			if n == 0 {
				return Boundary{}, p.fail(lo, "snapshot indexes are 1-based; the first is 1")
			}
			return Boundary{kind: BoundaryIndex, n: n}, nil
		}
		u := j
		for u < hi && isSpace(p.in[u]) {
			u++
		}
		if !isLetter(p.in[u]) {
			return Boundary{}, p.unexpected(u, hi)
		}
		unit, w, err := p.unit(u, hi)
		if err != nil {
			return Boundary{}, err
		}
		if w != hi {
			return Boundary{}, p.unexpected(w, hi)
		}
		return Boundary{kind: BoundaryAgo, n: n, unit: unit}, nil
	case isLetter(c):
		if p.word(lo, hi) == hi && asciiLower(p.in[lo:hi]) == "now" {
			return DefaultEnd(), nil
		}
	}
	return Boundary{}, p.fail(lo, expected)
}

// Window is an inclusive range of snapshot indexes, [From, To]. An empty Window is always
// {From: 1, To: 0}.
type Window struct {
	From, To int
}

// Empty reports whether no index falls inside.
func (w Window) Empty() bool { return w.From > w.To }

// Len is the number of indexes inside.
func (w Window) Len() int { return max(w.To-w.From+1, 0) }

// Contains reports whether index i falls inside.
func (w Window) Contains(i int) bool { return w.From <= i && i <= w.To }

// ResolveWindow maps (start, end) onto n snapshots by the rules of the package comment.
// timestampOf is as for Snapshot.Resolve and now anchors the "ago" forms. The only error
// is an invalid boundary: a zero Boundary, index 0, or a BoundaryAt that is NaN or
// infinite.
func ResolveWindow(start, end Boundary, n int, timestampOf func(int) float64, now time.Time) (Window, error) {
	if err := start.check("start"); err != nil {
		return Window{}, err
	}
	if err := end.check("end"); err != nil {
		return Window{}, err
	}
	n = max(n, 0)
	if n == 0 {
		return Window{From: 1, To: 0}, nil
	}
	// Clamping the start to 1 also covers a time before the first snapshot (position 0).
	from := max(start.position(n, timestampOf, now), 1)
	to := min(end.position(n, timestampOf, now), n)
	if from > to {
		return Window{From: 1, To: 0}, nil
	}
	return Window{From: from, To: to}, nil
}

func (b Boundary) check(name string) error {
	switch {
	case b.kind == 0 || b.kind > BoundaryTime:
		return fmt.Errorf("snapexpr: invalid %s boundary", name)
	case b.kind == BoundaryIndex && b.n == 0:
		return fmt.Errorf("snapexpr: %s boundary index 0: indexes are 1-based", name)
	case b.kind == BoundaryTime && (math.IsNaN(b.ts) || math.IsInf(b.ts, 0)):
		return fmt.Errorf("snapexpr: %s boundary time %v", name, b.ts)
	}
	return nil
}

// position is the index b lands on among n >= 1 snapshots, before clamping: possibly < 1
// or > n for indexes, 0 for a time before the first snapshot.
func (b Boundary) position(n int, timestampOf func(int) float64, now time.Time) int {
	switch b.kind {
	case BoundaryIndex:
		if b.n < 0 {
			return n + b.n + 1 // no overflow: b.n >= -MaxInt
		}
		return b.n
	case BoundaryAgo:
		return currentAt(n, timestampOf, unixSeconds(now)-float64(b.n)*b.unit.Seconds())
	case BoundaryTime:
		return currentAt(n, timestampOf, b.ts)
	}
	return n // BoundaryNow
}

// ParseTimestamp parses unix seconds given as an integer or a decimal, optionally with an
// exponent (1.7e9, as JSON encoders write them): the start_ts, end_ts, from and to
// parameters. Negative values, NaN, infinities and values that overflow are errors.
func ParseTimestamp(s string) (float64, error) {
	p := parser{in: s, what: "timestamp"}
	lo, hi := p.trim(0, len(s))
	if lo == hi {
		return 0, p.fail(lo, "empty value")
	}
	if s[lo] == '-' {
		return 0, p.fail(lo, "must not be negative")
	}
	if !isDigit(s[lo]) {
		return 0, p.fail(lo, "expected unix seconds such as 1704103200 or 1704103200.5")
	}
	i := lo
	for i < hi && isDigit(s[i]) {
		i++
	}
	if i < hi && s[i] == '.' {
		j := i + 1
		for j < hi && isDigit(s[j]) {
			j++
		}
		if j == i+1 {
			return 0, p.fail(j, "expected digits after '.'")
		}
		i = j
	}
	if i < hi && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < hi && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < hi && isDigit(s[k]) {
			k++
		}
		if k == j {
			return 0, p.fail(j, "expected digits in the exponent")
		}
		i = k
	}
	if i != hi {
		return 0, p.unexpected(i, hi)
	}
	f, err := strconv.ParseFloat(s[lo:hi], 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, p.fail(lo, "out of range")
	}
	return f, nil
}
