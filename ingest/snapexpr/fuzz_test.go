package snapexpr

import (
	"errors"
	"math"
	"testing"
	"time"
)

// Fixed snapshots for the fuzz targets to resolve against.
var (
	fuzzTS  = []float64{1704103200, 1704103200.5, 1704106800, 1704189600}
	fuzzAt  = func(i int) float64 { return fuzzTS[i-1] }
	fuzzNow = time.Unix(1704200000, 250000000)
)

// checkSyntaxError fails unless err is a *SyntaxError pointing into in.
func checkSyntaxError(t *testing.T, in string, err error) {
	t.Helper()
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("%q: error %v is %T, want *SyntaxError", in, err, err)
	}
	if se.Input != in || se.Pos < 0 || se.Pos > len(in) || se.Reason == "" || se.Error() == "" {
		t.Fatalf("%q: bad SyntaxError %+v", in, se)
	}
}

func checkResolve(t *testing.T, s Snapshot) {
	t.Helper()
	for n := 0; n <= len(fuzzTS); n++ {
		idx, err := s.Resolve(n, fuzzAt, fuzzNow)
		if err == nil {
			if idx < 1 || idx > n {
				t.Fatalf("%s among %d resolved to %d", s, n, idx)
			}
			continue
		}
		var re *RangeError
		if !errors.As(err, &re) {
			t.Fatalf("%s among %d: %v is %T, want *RangeError", s, n, err, err)
		}
		if re.Message("org", "env") == "" {
			t.Fatalf("%s: empty message", s)
		}
	}
}

func FuzzParseSnapshot(f *testing.F) {
	for _, s := range []string{"-1", "7", "#7", "#-2", "-0", "~3", "@{now}", "@{2.hours.ago}",
		"@{2024-01-01T10:00:00}", "@{2024-01-01 10:00:00.5+02:00}", "@{2024-01-01}", " #3 ",
		"9223372036854775808", "@{1.WEEK.AGO}", "@{", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSnapshot(in)
		if err != nil {
			checkSyntaxError(t, in, err)
			return
		}
		canon := s.String()
		again, err := ParseSnapshot(canon)
		if err != nil || !again.Equal(s) || again.String() != canon {
			t.Fatalf("%q -> %q -> %v, %v", in, canon, again, err)
		}
		checkResolve(t, s)
	})
}

func FuzzParseSnappish(f *testing.F) {
	for _, s := range []string{"prod", "prod#3", "prod#-1", "prod~1", "prod@{now}", "prod@{3.days.ago}",
		"aws-prod-1@{2024-01-01T10:00:00Z}", " my env #2", "x~", "#3", "prød~0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		env, s, err := ParseSnappish(in)
		if err != nil {
			checkSyntaxError(t, in, err)
			return
		}
		if env == "" {
			t.Fatalf("%q: empty environment name", in)
		}
		canon := FormatSnappish(env, s)
		env2, again, err := ParseSnappish(canon)
		if err != nil || env2 != env || !again.Equal(s) {
			t.Fatalf("%q -> %q -> %q, %v, %v", in, canon, env2, again, err)
		}
		checkResolve(t, s)
	})
}

func FuzzParseBoundary(f *testing.F) {
	for _, s := range []string{"1", "-1", "~3", "NOW", "now", "1hour", "1h", "2days", "30mins", "45min",
		"10s", "2weeks", "3w", "1d", "5m", "1 hour", "0", "-0", "99999999999999999999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		b, err := ParseBoundary(in)
		if err != nil {
			checkSyntaxError(t, in, err)
			return
		}
		canon := b.String()
		again, err := ParseBoundary(canon)
		if err != nil || again != b || again.String() != canon {
			t.Fatalf("%q -> %q -> %v, %v", in, canon, again, err)
		}
		for n := 0; n <= len(fuzzTS); n++ {
			for _, other := range []Boundary{DefaultStart(), DefaultEnd()} {
				checkWindow(t, b, other, n)
				checkWindow(t, other, b, n)
			}
		}
	})
}

func checkWindow(t *testing.T, start, end Boundary, n int) {
	t.Helper()
	w, err := ResolveWindow(start, end, n, fuzzAt, fuzzNow)
	if err != nil {
		t.Fatalf("%s..%s among %d: %v", start, end, n, err)
	}
	if w.Empty() && w != (Window{1, 0}) || !w.Empty() && (w.From < 1 || w.To > n) {
		t.Fatalf("%s..%s among %d: %+v", start, end, n, w)
	}
}

func FuzzParseInterval(f *testing.F) {
	for _, s := range []string{"3..5", "-5..-1", "2days..NOW", "~3..NOW", "3..", "..", "", "1..2..3", "3...5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		start, end, err := ParseInterval(in)
		if err != nil {
			checkSyntaxError(t, in, err)
			return
		}
		canon := start.String() + ".." + end.String()
		s2, e2, err := ParseInterval(canon)
		if err != nil || s2 != start || e2 != end {
			t.Fatalf("%q -> %q -> %v..%v, %v", in, canon, s2, e2, err)
		}
		for n := 0; n <= len(fuzzTS); n++ {
			checkWindow(t, start, end, n)
		}
	})
}

func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"1704103200", "1704103200.5", "1.7e9", "-1", "NaN", "inf", "1e400", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ts, err := ParseTimestamp(in)
		if err != nil {
			checkSyntaxError(t, in, err)
			return
		}
		if ts < 0 || math.IsNaN(ts) || math.IsInf(ts, 0) || math.Signbit(ts) {
			t.Fatalf("%q parsed to %v", in, ts)
		}
		checkWindow(t, BoundaryAt(ts), DefaultEnd(), len(fuzzTS))
	})
}
