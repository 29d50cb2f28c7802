package snapexpr

import (
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// Unit is a unit of a relative time ("2.hours.ago", "2h").
type Unit uint8

// Units; the zero Unit is invalid.
const (
	Second Unit = iota + 1
	Minute
	Hour
	Day
	Week
	Month
)

var unitInfo = [...]struct {
	name    string
	seconds float64
}{
	Second: {"second", 1},
	Minute: {"minute", 60},
	Hour:   {"hour", 3600},
	Day:    {"day", 86400},
	Week:   {"week", 7 * 86400},
	Month:  {"month", 30 * 86400},
}

// units maps every accepted spelling, lower case, to its unit.
var units = map[string]Unit{
	"s": Second, "sec": Second, "secs": Second, "second": Second, "seconds": Second,
	"m": Minute, "min": Minute, "mins": Minute, "minute": Minute, "minutes": Minute,
	"h": Hour, "hr": Hour, "hrs": Hour, "hour": Hour, "hours": Hour,
	"d": Day, "day": Day, "days": Day,
	"w": Week, "week": Week, "weeks": Week,
	"month": Month, "months": Month,
}

// Seconds is the length of the unit; a month counts 30 days.
func (u Unit) Seconds() float64 {
	if u == 0 || int(u) >= len(unitInfo) {
		return 0
	}
	return unitInfo[u].seconds
}

// String is the singular name, e.g. "hour".
func (u Unit) String() string {
	if u == 0 || int(u) >= len(unitInfo) {
		return "Unit(" + strconv.Itoa(int(u)) + ")"
	}
	return unitInfo[u].name
}

// count renders n units with the name singular for 1, e.g. "1hour", "2hours" (sep "") or
// "2.hours" (sep ".").
func (u Unit) count(n int, sep string) string {
	s := strconv.Itoa(n) + sep + u.String()
	if n != 1 {
		s += "s"
	}
	return s
}

// parser holds the whole input so every error can point into it, whatever sub-range is
// being parsed.
type parser struct {
	in   string
	what string
}

func (p *parser) fail(pos int, format string, args ...any) *SyntaxError {
	return &SyntaxError{What: p.what, Input: p.in, Pos: pos, Reason: fmt.Sprintf(format, args...)}
}

// unexpected reports the character at pos (or the end of the range).
func (p *parser) unexpected(pos, hi int) *SyntaxError {
	if pos >= hi {
		return p.fail(pos, "unexpected end")
	}
	r, _ := utf8.DecodeRuneInString(p.in[pos:hi])
	return p.fail(pos, "unexpected %q", r)
}

// trim narrows [lo, hi) to exclude ASCII white space at both ends.
func (p *parser) trim(lo, hi int) (int, int) {
	for lo < hi && isSpace(p.in[lo]) {
		lo++
	}
	for hi > lo && isSpace(p.in[hi-1]) {
		hi--
	}
	return lo, hi
}

// uint reads a decimal number at i; ctx completes "expected a number" when there is none.
func (p *parser) uint(i, hi int, ctx string) (int, int, *SyntaxError) {
	if i >= hi || !isDigit(p.in[i]) {
		return 0, i, p.fail(i, "expected a number%s", ctx)
	}
	v, j := 0, i
	for ; j < hi && isDigit(p.in[j]); j++ {
		d := int(p.in[j] - '0')
		if v > (math.MaxInt-d)/10 {
			return 0, i, p.fail(i, "number too large")
		}
		v = v*10 + d
	}
	return v, j, nil
}

// digits reads exactly n digits at i, naming the field in the error.
func (p *parser) digits(i, hi, n int, field string) (int, int, *SyntaxError) {
	v := 0
	for k := range n {
		if i+k >= hi || !isDigit(p.in[i+k]) {
			return 0, i, p.fail(i+k, "expected a %d-digit %s", n, field)
		}
		v = v*10 + int(p.in[i+k]-'0')
	}
	return v, i + n, nil
}

func (p *parser) expect(i, hi int, c byte) *SyntaxError {
	if i >= hi || p.in[i] != c {
		if i >= hi {
			return p.fail(i, "expected %q", rune(c))
		}
		r, _ := utf8.DecodeRuneInString(p.in[i:hi])
		return p.fail(i, "expected %q, found %q", rune(c), r)
	}
	return nil
}

// word returns the end of the run of ASCII letters at i.
func (p *parser) word(i, hi int) int {
	for i < hi && isLetter(p.in[i]) {
		i++
	}
	return i
}

// unit reads a unit word at i, which must be there.
func (p *parser) unit(i, hi int) (Unit, int, *SyntaxError) {
	j := p.word(i, hi)
	if j == i {
		return 0, i, p.fail(i, "expected a time unit (s, m, h, d, w, month)")
	}
	u, ok := units[asciiLower(p.in[i:j])]
	if !ok {
		return 0, i, p.fail(i, "unknown time unit %q", p.in[i:j])
	}
	return u, j, nil
}

// date parses TIME as described in the package comment, in [lo, hi) exactly.
func (p *parser) date(lo, hi int) (time.Time, *SyntaxError) {
	i := lo
	y, i, err := p.digits(i, hi, 4, "year")
	if err != nil {
		return time.Time{}, err
	}
	if err := p.expect(i, hi, '-'); err != nil {
		return time.Time{}, err
	}
	posMo := i + 1
	mo, i, err := p.digits(posMo, hi, 2, "month")
	if err != nil {
		return time.Time{}, err
	}
	if err := p.expect(i, hi, '-'); err != nil {
		return time.Time{}, err
	}
	posD := i + 1
	d, i, err := p.digits(posD, hi, 2, "day")
	if err != nil {
		return time.Time{}, err
	}
	if mo < 1 || mo > 12 {
		return time.Time{}, p.fail(posMo, "month %02d out of range", mo)
	}
	// Day 0 of the next month is the last day of this one.
	if last := time.Date(y, time.Month(mo)+1, 0, 0, 0, 0, 0, time.UTC).Day(); d < 1 || d > last {
		return time.Time{}, p.fail(posD, "day %02d out of range", d)
	}
	var h, mi, s, ns, off int
	if i < hi {
		if c := p.in[i]; c != 'T' && c != 't' && c != ' ' {
			return time.Time{}, p.fail(i, "expected 'T' or a space between date and time")
		}
		posH := i + 1
		if h, i, err = p.digits(posH, hi, 2, "hour"); err != nil {
			return time.Time{}, err
		}
		if err := p.expect(i, hi, ':'); err != nil {
			return time.Time{}, err
		}
		posMi := i + 1
		if mi, i, err = p.digits(posMi, hi, 2, "minute"); err != nil {
			return time.Time{}, err
		}
		posS := i
		if i < hi && p.in[i] == ':' {
			posS = i + 1
			if s, i, err = p.digits(posS, hi, 2, "second"); err != nil {
				return time.Time{}, err
			}
			if i < hi && p.in[i] == '.' {
				if ns, i, err = p.fraction(i+1, hi); err != nil {
					return time.Time{}, err
				}
			}
		}
		switch {
		case h > 23:
			return time.Time{}, p.fail(posH, "hour %02d out of range", h)
		case mi > 59:
			return time.Time{}, p.fail(posMi, "minute %02d out of range", mi)
		case s > 59:
			return time.Time{}, p.fail(posS, "second %02d out of range", s)
		}
		if i < hi {
			if off, i, err = p.zone(i, hi); err != nil {
				return time.Time{}, err
			}
		}
	}
	if i != hi {
		return time.Time{}, p.unexpected(i, hi)
	}
	t := time.Date(y, time.Month(mo), d, h, mi, s, ns, time.UTC).Add(-time.Duration(off) * time.Second)
	// Keeps String's 4-digit year re-parseable.
	if t.Year() < 1 || t.Year() > 9999 {
		return time.Time{}, p.fail(lo, "time outside the years 0001 to 9999")
	}
	return t, nil
}

// fraction reads 1 to 9 digits of a second as nanoseconds.
func (p *parser) fraction(i, hi int) (int, int, *SyntaxError) {
	j := i
	for j < hi && isDigit(p.in[j]) {
		j++
	}
	switch {
	case j == i:
		return 0, i, p.fail(i, "expected digits after '.'")
	case j-i > 9:
		return 0, i, p.fail(i+9, "more than 9 fractional digits")
	}
	ns, _ := strconv.Atoi(p.in[i:j])
	for range 9 - (j - i) {
		ns *= 10
	}
	return ns, j, nil
}

// zone reads Z, ±HH, ±HHMM or ±HH:MM and returns the offset east of UTC in seconds.
func (p *parser) zone(i, hi int) (int, int, *SyntaxError) {
	switch p.in[i] {
	case 'Z', 'z':
		return 0, i + 1, nil
	case '+', '-':
	default:
		return 0, i, p.fail(i, "expected a time zone: Z or an offset like +02:00")
	}
	sign := 1
	if p.in[i] == '-' {
		sign = -1
	}
	posH := i + 1
	h, j, err := p.digits(posH, hi, 2, "offset hour")
	if err != nil {
		return 0, i, err
	}
	m, posM := 0, j
	if j < hi && p.in[j] == ':' {
		posM = j + 1
	}
	if posM < hi && isDigit(p.in[posM]) || posM > j {
		if m, j, err = p.digits(posM, hi, 2, "offset minute"); err != nil {
			return 0, i, err
		}
	}
	switch {
	case h > 23:
		return 0, i, p.fail(posH, "offset hour %02d out of range", h)
	case m > 59:
		return 0, i, p.fail(posM, "offset minute %02d out of range", m)
	}
	return sign * (h*3600 + m*60), j, nil
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// asciiLower folds ASCII only: Unicode folding would let "K" (Kelvin) spell "k".
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// unixSeconds converts t to the float a JSON timestamp with up to 9 decimals parses to:
// one correctly rounded conversion of the decimal text, so an @{TIME} equal to a stored
// timestamp compares equal (sec + ns/1e9 in floats can be off by one ulp).
func unixSeconds(t time.Time) float64 {
	sec, ns := t.Unix(), int64(t.Nanosecond())
	if ns == 0 {
		return float64(sec)
	}
	neg := sec < 0
	if neg { // -2s + 0.75s is -(1s + 0.25s)
		sec, ns = -sec-1, 1e9-ns
	}
	f, _ := strconv.ParseFloat(fmt.Sprintf("%d.%09d", sec, ns), 64)
	if neg {
		f = -f
	}
	return f
}
