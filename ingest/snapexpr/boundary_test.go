package snapexpr

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseBoundary(t *testing.T) {
	tests := []struct {
		in   string
		want string
		kind BoundaryKind
	}{
		{"1", "1", BoundaryIndex},
		{"3", "3", BoundaryIndex},
		{" 3 ", "3", BoundaryIndex},
		{"007", "7", BoundaryIndex},
		{"-1", "-1", BoundaryIndex},
		{"-5", "-5", BoundaryIndex},
		{"~0", "-1", BoundaryIndex},
		{"~3", "-4", BoundaryIndex},
		{"9223372036854775807", "9223372036854775807", BoundaryIndex},
		{"-9223372036854775807", "-9223372036854775807", BoundaryIndex},
		{"~9223372036854775806", "-9223372036854775807", BoundaryIndex},
		{"NOW", "NOW", BoundaryNow},
		{"now", "NOW", BoundaryNow},
		{" Now\t", "NOW", BoundaryNow},
		{"1hour", "1hour", BoundaryAgo},
		{"1h", "1hour", BoundaryAgo},
		{"1hr", "1hour", BoundaryAgo},
		{"3hrs", "3hours", BoundaryAgo},
		{"1 hour", "1hour", BoundaryAgo},
		{"2days", "2days", BoundaryAgo},
		{"2 DAYS", "2days", BoundaryAgo},
		{"1d", "1day", BoundaryAgo},
		{"30mins", "30minutes", BoundaryAgo},
		{"45min", "45minutes", BoundaryAgo},
		{"5m", "5minutes", BoundaryAgo},
		{"5M", "5minutes", BoundaryAgo},
		{"1minute", "1minute", BoundaryAgo},
		{"10s", "10seconds", BoundaryAgo},
		{"1sec", "1second", BoundaryAgo},
		{"2secs", "2seconds", BoundaryAgo},
		{"2weeks", "2weeks", BoundaryAgo},
		{"3w", "3weeks", BoundaryAgo},
		{"1week", "1week", BoundaryAgo},
		{"2months", "2months", BoundaryAgo},
		{"0h", "0hours", BoundaryAgo},
		{"9223372036854775807w", "9223372036854775807weeks", BoundaryAgo},
	}
	for _, tt := range tests {
		got, err := ParseBoundary(tt.in)
		if err != nil {
			t.Errorf("ParseBoundary(%q): %v", tt.in, err)
			continue
		}
		if got.String() != tt.want || got.Kind() != tt.kind {
			t.Errorf("ParseBoundary(%q) = %s (kind %d), want %s (kind %d)", tt.in, got, got.Kind(), tt.want, tt.kind)
		}
		again, err := ParseBoundary(got.String())
		if err != nil || !again.Equal(got) {
			t.Errorf("ParseBoundary(%q) re-parsed to %v, %v", got.String(), again, err)
		}
	}
	b, _ := ParseBoundary("2days")
	if b.Number() != 2 || b.Unit() != Day || b.Index() != 0 {
		t.Errorf("2days: %d %v %d", b.Number(), b.Unit(), b.Index())
	}
	b, _ = ParseBoundary("-3")
	if b.Index() != -3 || b.Number() != 0 {
		t.Errorf("-3: %d %d", b.Index(), b.Number())
	}
}

func TestParseBoundaryErrors(t *testing.T) {
	tests := []struct {
		in     string
		pos    int
		reason string
	}{
		{"", 0, "empty value"},
		{" ", 1, "empty value"},
		{"0", 0, "1-based"},
		{"00", 0, "1-based"},
		{"-0", 0, "1-based"},
		{"+1", 0, "expected a snapshot index, NOW or a time reference"},
		{"#3", 0, "expected a snapshot index"},
		{"@{now}", 0, "expected a snapshot index"},
		{"NOWX", 0, "expected a snapshot index"},
		{"later", 0, "expected a snapshot index"},
		{"-x", 1, "expected a number after '-'"},
		{"- 1", 1, "expected a number after '-'"},
		{"~", 1, "expected a number after '~'"},
		{"-1h", 2, "unexpected 'h'"},
		{"1.5", 1, "unexpected '.'"},
		{"1x", 1, `unknown time unit "x"`},
		{"1 fortnight", 2, `unknown time unit "fortnight"`},
		{"1hour ago", 5, "unexpected ' '"},
		{"1h2m", 2, "unexpected '2'"},
		{"2 h 3", 3, "unexpected ' '"},
		{"3..5", 1, "unexpected '.'"},
		{"9223372036854775808", 0, "number too large"},
		{"-9223372036854775808", 1, "number too large"},
		{"~9223372036854775807", 1, "number too large"},
		{"99999999999999999999h", 0, "number too large"},
	}
	for _, tt := range tests {
		_, err := ParseBoundary(tt.in)
		syntaxErr(t, tt.in, err, tt.pos, tt.reason)
		if se := (*SyntaxError)(nil); errors.As(err, &se) && se.What != "interval boundary" {
			t.Errorf("%q: What %q", tt.in, se.What)
		}
	}
}

func TestParseInterval(t *testing.T) {
	tests := []struct {
		in, start, end string
	}{
		{"3..5", "3", "5"},
		{"-5..-1", "-5", "-1"},
		{"2days..NOW", "2days", "NOW"},
		{"~3..NOW", "-4", "NOW"},
		{"~5..now", "-6", "NOW"},
		{" 3 .. 5 ", "3", "5"},
		{"1h..30m", "1hour", "30minutes"},
		{"3..", "3", "NOW"},
		{"..5", "NOW", "5"},
		{"..", "NOW", "NOW"},
		{"", "1", "NOW"}, // the Kosli CLI always sends interval=
		{"  ", "1", "NOW"},
		// A bare expression E is E..E (kosli log environment --interval NOW).
		{"NOW", "NOW", "NOW"},
		{" 3 ", "3", "3"},
		{"~2", "-3", "-3"},
	}
	for _, tt := range tests {
		start, end, err := ParseInterval(tt.in)
		if err != nil {
			t.Errorf("ParseInterval(%q): %v", tt.in, err)
			continue
		}
		if start.String() != tt.start || end.String() != tt.end {
			t.Errorf("ParseInterval(%q) = %s..%s, want %s..%s", tt.in, start, end, tt.start, tt.end)
		}
		s2, e2, err := ParseInterval(start.String() + ".." + end.String())
		if err != nil || s2 != start || e2 != end {
			t.Errorf("re-parse of %s..%s = %v..%v, %v", start, end, s2, e2, err)
		}
	}
}

func TestParseIntervalErrors(t *testing.T) {
	tests := []struct {
		in     string
		pos    int
		reason string
	}{
		{"x", 0, "expected a snapshot index"},
		{" 0 ", 1, "1-based"},
		{"3...5", 3, "expected a snapshot index"},
		{"1..2..3", 4, "unexpected '.'"},
		{"x..3", 0, "expected a snapshot index"},
		{"3..0", 3, "1-based"},
		{"0..3", 0, "1-based"},
		{"3..x", 3, "expected a snapshot index"},
		{"3 ..1 fortnight", 6, "unknown time unit"},
	}
	for _, tt := range tests {
		_, _, err := ParseInterval(tt.in)
		syntaxErr(t, tt.in, err, tt.pos, tt.reason)
	}
	_, _, err := ParseInterval("3..x")
	if want := `invalid interval "3..x": expected a snapshot index, NOW or a time reference such as 1h or 2days at column 4`; err.Error() != want {
		t.Errorf("got %s, want %s", err, want)
	}
}

func TestResolveWindow(t *testing.T) {
	ts := []float64{100, 200, 300, 400, 500}
	at := func(i int) float64 { return ts[i-1] }
	now := time.Unix(1000, 0)
	b := func(s string) Boundary {
		t.Helper()
		x, err := ParseBoundary(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	empty := Window{From: 1, To: 0}
	tests := []struct {
		name       string
		start, end Boundary
		n          int
		want       Window
	}{
		{"defaults", DefaultStart(), DefaultEnd(), 5, Window{1, 5}},
		{"defaults, no snapshots", DefaultStart(), DefaultEnd(), 0, empty},
		{"defaults, one snapshot", DefaultStart(), DefaultEnd(), 1, Window{1, 1}},
		{"negative n is none", DefaultStart(), DefaultEnd(), -3, empty},
		{"3..5", b("3"), b("5"), 5, Window{3, 5}},
		{"3..3", b("3"), b("3"), 5, Window{3, 3}},
		{"5..3 is empty", b("5"), b("3"), 5, empty},
		{"3..10 clamps end", b("3"), b("10"), 5, Window{3, 5}},
		{"6..NOW starts after last", b("6"), b("NOW"), 5, empty},
		{"-5..-1", b("-5"), b("-1"), 5, Window{1, 5}},
		{"-2..-1", b("-2"), b("-1"), 5, Window{4, 5}},
		{"-10..-1 clamps start", b("-10"), b("-1"), 5, Window{1, 5}},
		{"-10..-7 is before first", b("-10"), b("-7"), 5, empty},
		{"1..-10 is empty", b("1"), b("-10"), 5, empty},
		{"~1..NOW", b("~1"), b("NOW"), 5, Window{4, 5}},
		{"NOW..NOW", b("NOW"), b("NOW"), 5, Window{5, 5}},
		{"NOW..3", b("NOW"), b("3"), 5, empty},
		// now is 1000; 10 minutes ago is 400, a timestamp.
		{"10m..NOW", b("10m"), b("NOW"), 5, Window{4, 5}},
		{"601s..NOW", b("601s"), b("NOW"), 5, Window{3, 5}},
		{"1h..NOW start before first clamps", b("1h"), b("NOW"), 5, Window{1, 5}},
		{"1..1h end before first", b("1"), b("1h"), 5, empty},
		{"1..10m", b("1"), b("10m"), 5, Window{1, 4}},
		{"1..599s", b("1"), b("599s"), 5, Window{1, 4}},
		{"1..500s", b("1"), b("500s"), 5, Window{1, 5}},
		{"1..0s", b("1"), b("0s"), 5, Window{1, 5}},
		{"15m..13m", b("15m"), b("13m"), 5, Window{1, 2}},
		{"at 250..NOW", BoundaryAt(250), b("NOW"), 5, Window{2, 5}},
		{"at 200..NOW", BoundaryAt(200), b("NOW"), 5, Window{2, 5}},
		{"at 50..NOW", BoundaryAt(50), b("NOW"), 5, Window{1, 5}},
		{"at 600..NOW", BoundaryAt(600), b("NOW"), 5, Window{5, 5}},
		{"1..at 200", b("1"), BoundaryAt(200), 5, Window{1, 2}},
		{"1..at 199.9", b("1"), BoundaryAt(199.9), 5, Window{1, 1}},
		{"1..at 50", b("1"), BoundaryAt(50), 5, empty},
		{"at 250..at 450", BoundaryAt(250), BoundaryAt(450), 5, Window{2, 4}},
		{"huge ago", b("9223372036854775807w"), b("NOW"), 5, Window{1, 5}},
	}
	for _, tt := range tests {
		got, err := ResolveWindow(tt.start, tt.end, tt.n, at, now)
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

// Clock skew: snapshots stamped after the request's now. NOW still means the latest;
// "0s" means the time now.
func TestResolveWindowClockSkew(t *testing.T) {
	ts := []float64{100, 200, 300}
	at := func(i int) float64 { return ts[i-1] }
	now := time.Unix(150, 0)
	w, _ := ResolveWindow(DefaultStart(), DefaultEnd(), 3, at, now)
	if w != (Window{1, 3}) {
		t.Errorf("NOW: %+v", w)
	}
	zero, _ := ParseBoundary("0s")
	w, _ = ResolveWindow(DefaultStart(), zero, 3, at, now)
	if w != (Window{1, 1}) {
		t.Errorf("0s: %+v", w)
	}
}

func TestResolveWindowInvalid(t *testing.T) {
	bad := []Boundary{{}, {kind: BoundaryIndex}, BoundaryAt(math.NaN()), BoundaryAt(math.Inf(1)), {kind: 99}}
	for _, b := range bad {
		if _, err := ResolveWindow(b, DefaultEnd(), 3, nil, time.Time{}); err == nil || !strings.Contains(err.Error(), "start") {
			t.Errorf("start %+v: %v", b, err)
		}
		if _, err := ResolveWindow(DefaultStart(), b, 0, nil, time.Time{}); err == nil || !strings.Contains(err.Error(), "end") {
			t.Errorf("end %+v: %v", b, err)
		}
	}
}

func TestWindow(t *testing.T) {
	w := Window{2, 4}
	if w.Empty() || w.Len() != 3 || !w.Contains(2) || !w.Contains(4) || w.Contains(1) || w.Contains(5) {
		t.Errorf("%+v", w)
	}
	e := Window{1, 0}
	if !e.Empty() || e.Len() != 0 || e.Contains(0) || e.Contains(1) {
		t.Errorf("%+v", e)
	}
}

func TestBoundaryAt(t *testing.T) {
	b := BoundaryAt(1704103200.5)
	if b.Kind() != BoundaryTime || b.Unix() != 1704103200.5 || b.String() != "@1704103200.5" {
		t.Errorf("%+v %s", b, b)
	}
	if _, err := ParseBoundary(b.String()); err == nil {
		t.Error("BoundaryAt's String is display only")
	}
	if (Boundary{}).String() != "" {
		t.Error("zero Boundary has a String")
	}
}

func TestParseTimestamp(t *testing.T) {
	ok := []struct {
		in   string
		want float64
	}{
		{"1704103200", 1704103200},
		{"1704103200.5", 1704103200.5},
		{" 0 ", 0},
		{"0.0", 0},
		{"1.7e9", 1.7e9},
		{"1E3", 1000},
		{"1e+3", 1000},
		{"15e-1", 1.5},
		{"1e-400", 0}, // underflow rounds to zero
		{"1787107798.493415", 1787107798.493415},
		{"00012", 12},
	}
	for _, tt := range ok {
		if got, err := ParseTimestamp(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseTimestamp(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	bad := []struct {
		in     string
		pos    int
		reason string
	}{
		{"", 0, "empty value"},
		{"-1", 0, "must not be negative"},
		{"-0", 0, "must not be negative"},
		{"NaN", 0, "expected unix seconds"},
		{"inf", 0, "expected unix seconds"},
		{"Infinity", 0, "expected unix seconds"},
		{"+1", 0, "expected unix seconds"},
		{".5", 0, "expected unix seconds"},
		{"1.", 2, "expected digits after '.'"},
		{"1e", 2, "expected digits in the exponent"},
		{"1e+", 3, "expected digits in the exponent"},
		{"1e400", 0, "out of range"},
		{"0x10", 1, "unexpected 'x'"},
		{"1_000", 1, "unexpected '_'"},
		{"1 2", 1, "unexpected ' '"},
		{"2024-01-01", 4, "unexpected '-'"},
	}
	for _, tt := range bad {
		_, err := ParseTimestamp(tt.in)
		syntaxErr(t, tt.in, err, tt.pos, tt.reason)
	}
}
