package snapexpr

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// syntaxErr checks that err is a *SyntaxError at pos whose reason contains reason.
func syntaxErr(t *testing.T, in string, err error, pos int, reason string) {
	t.Helper()
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("%q: got error %v (%T), want *SyntaxError", in, err, err)
	}
	if se.Input != in || se.Pos != pos || !strings.Contains(se.Reason, reason) {
		t.Fatalf("%q: got Input %q Pos %d Reason %q, want Pos %d Reason containing %q",
			in, se.Input, se.Pos, se.Reason, pos, reason)
	}
}

func TestParseSnapshot(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical String()
		kind Kind
	}{
		{"-1", "#-1", KindFromEnd},
		{" -1 ", "#-1", KindFromEnd},
		{"\t-3\n", "#-3", KindFromEnd},
		{"#-2", "#-2", KindFromEnd},
		{"7", "#7", KindIndex},
		{"#7", "#7", KindIndex},
		{"007", "#7", KindIndex},
		{"0", "#0", KindIndex},
		{"#0", "#0", KindIndex},
		{"-0", "#0", KindIndex},
		{"#-0", "#0", KindIndex},
		{"9223372036854775807", "#9223372036854775807", KindIndex},
		{"-9223372036854775807", "#-9223372036854775807", KindFromEnd},
		{"~0", "~0", KindBehind},
		{"~3", "~3", KindBehind},
		{"@{now}", "@{now}", KindNow},
		{"@{NOW}", "@{now}", KindNow},
		{"@{ Now }", "@{now}", KindNow},
		{"@{2.hours.ago}", "@{2.hours.ago}", KindAgo},
		{"@{1.hour.ago}", "@{1.hour.ago}", KindAgo},
		{"@{1.hours.ago}", "@{1.hour.ago}", KindAgo},
		{"@{3.days.ago}", "@{3.days.ago}", KindAgo},
		{"@{10.minutes.ago}", "@{10.minutes.ago}", KindAgo},
		{"@{1.week.ago}", "@{1.week.ago}", KindAgo},
		{"@{30.seconds.ago}", "@{30.seconds.ago}", KindAgo},
		{"@{2.months.ago}", "@{2.months.ago}", KindAgo},
		{"@{2.HOURS.AGO}", "@{2.hours.ago}", KindAgo},
		{"@{2.h.ago}", "@{2.hours.ago}", KindAgo},
		{"@{0.seconds.ago}", "@{0.seconds.ago}", KindAgo},
		{"@{9223372036854775807.weeks.ago}", "@{9223372036854775807.weeks.ago}", KindAgo},
		{"@{2024-01-01T10:00:00}", "@{2024-01-01T10:00:00Z}", KindTime},
		{"@{2024-01-01 10:00:00}", "@{2024-01-01T10:00:00Z}", KindTime},
		{"@{2024-01-01t10:00:00z}", "@{2024-01-01T10:00:00Z}", KindTime},
		{"@{ 2024-01-01T10:00:00Z }", "@{2024-01-01T10:00:00Z}", KindTime},
		{"@{2024-01-01T10:00}", "@{2024-01-01T10:00:00Z}", KindTime},
		{"@{2024-01-01T10:00:00.5}", "@{2024-01-01T10:00:00.5Z}", KindTime},
		{"@{2024-01-01T10:00:00.123456789Z}", "@{2024-01-01T10:00:00.123456789Z}", KindTime},
		{"@{2024-01-01T12:00:00+02:00}", "@{2024-01-01T10:00:00Z}", KindTime},
		{"@{2024-01-01T12:00:00+02}", "@{2024-01-01T10:00:00Z}", KindTime},
		{"@{2024-01-01T05:30:00-0430}", "@{2024-01-01T10:00:00Z}", KindTime},
		{"@{2024-01-01T00:30:00+01:00}", "@{2023-12-31T23:30:00Z}", KindTime},
		{"@{2024-01-01}", "@{2024-01-01T00:00:00Z}", KindTime},
		{"@{2024-02-29}", "@{2024-02-29T00:00:00Z}", KindTime},
		{"@{9999-12-31T23:59:59.999999999}", "@{9999-12-31T23:59:59.999999999Z}", KindTime},
	}
	for _, tt := range tests {
		got, err := ParseSnapshot(tt.in)
		if err != nil {
			t.Errorf("ParseSnapshot(%q): %v", tt.in, err)
			continue
		}
		if got.String() != tt.want || got.Kind() != tt.kind {
			t.Errorf("ParseSnapshot(%q) = %s (kind %d), want %s (kind %d)", tt.in, got, got.Kind(), tt.want, tt.kind)
		}
		again, err := ParseSnapshot(got.String())
		if err != nil || !again.Equal(got) {
			t.Errorf("ParseSnapshot(%q) re-parsed to %v, %v", got.String(), again, err)
		}
	}
}

func TestParseSnapshotFields(t *testing.T) {
	s, _ := ParseSnapshot("@{3.days.ago}")
	if s.Number() != 3 || s.Unit() != Day || s.Unit().Seconds() != 86400 {
		t.Errorf("got %d %v", s.Number(), s.Unit())
	}
	s, _ = ParseSnapshot("@{2024-01-01T12:00:00+02:00}")
	if want := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC); !s.Time().Equal(want) || s.Time().Location() != time.UTC {
		t.Errorf("got %v, want %v in UTC", s.Time(), want)
	}
	if !Latest().Equal(mustSnap(t, "-1")) || !Index(4).Equal(mustSnap(t, "#4")) {
		t.Error("constructors differ from the parsed forms")
	}
	if mustSnap(t, "~0").Equal(Latest()) {
		t.Error("~0 and -1 resolve alike but are different expressions")
	}
}

func mustSnap(t *testing.T, s string) Snapshot {
	t.Helper()
	snap, err := ParseSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestParseSnapshotErrors(t *testing.T) {
	tests := []struct {
		in     string
		pos    int
		reason string
	}{
		{"", 0, "empty expression"},
		{"   ", 3, "empty expression"},
		{"x", 0, "expected a snapshot expression"},
		{"ENV#3", 0, "expected a snapshot expression"},
		{"+1", 0, "expected a snapshot expression"},
		{"NOW", 0, "expected a snapshot expression"},
		{"~", 1, "expected a number after '~'"},
		{"#", 1, "expected a number after '#'"},
		{"-", 1, "expected a number after '-'"},
		{"#-", 2, "expected a number after '-'"},
		{"- 1", 1, "expected a number after '-'"},
		{"~x", 1, "expected a number after '~'"},
		{"~-1", 1, "expected a number after '~'"},
		{"1x", 1, "unexpected 'x'"},
		{"1.5", 1, "unexpected '.'"},
		{"#3~1", 2, "unexpected '~'"},
		{"1 2", 1, "unexpected ' '"},
		{"9223372036854775808", 0, "number too large"},
		{"-9223372036854775808", 1, "number too large"},
		{"~99999999999999999999", 1, "number too large"},
		{"@", 1, "expected '{' after '@'"},
		{"@now", 1, "expected '{' after '@'"},
		{"@{", 2, "expected '}'"},
		{"@{now", 5, "expected '}'"},
		{"@{}", 2, "expected now"},
		{"@{  }", 4, "expected now"},
		{"@{now}x", 6, "unexpected 'x'"},
		{"@{2024-01-01}}", 13, "unexpected '}'"},
		{"@{yesterday}", 2, "expected now"},
		{"@{-1}", 2, "expected now"},
		{"@{2.fortnights.ago}", 4, `unknown time unit "fortnights"`},
		{"@{2..ago}", 4, "expected a time unit"},
		{"@{2.hours}", 9, "expected '.ago'"},
		{"@{2.hours.since}", 10, "expected 'ago'"},
		{"@{2.hours.ago.x}", 13, "unexpected '.'"},
		{"@{99999999999999999999.hours.ago}", 2, "number too large"},
		{"@{2024-13-01}", 7, "month 13 out of range"},
		{"@{2024-00-01}", 7, "month 00 out of range"},
		{"@{2024-02-30}", 10, "day 30 out of range"},
		{"@{2023-02-29}", 10, "day 29 out of range"},
		{"@{2024-01-01T24:00:00}", 13, "hour 24 out of range"},
		{"@{2024-01-01T10:60:00}", 16, "minute 60 out of range"},
		{"@{2024-01-01T10:00:60}", 19, "second 60 out of range"},
		{"@{2024-01-01T10:00:00.}", 22, "expected digits after '.'"},
		{"@{2024-01-01T10:00:00.1234567890}", 31, "more than 9 fractional digits"},
		{"@{2024-01-01T10:00:00+25:00}", 22, "offset hour 25 out of range"},
		{"@{2024-01-01T10:00:00+02:}", 25, "expected a 2-digit offset minute"},
		{"@{2024-01-01T10:00:00 UTC}", 21, "expected a time zone"},
		{"@{2024-01-01X10:00:00}", 12, "expected 'T' or a space"},
		{"@{2024-01-01T10}", 15, "expected ':'"},
		{"@{24-01-01}", 4, "expected a 4-digit year"},
		{"@{2024/01/01}", 6, "expected '-', found '/'"},
		{"@{2024-1-1}", 8, "expected a 2-digit month"},
		{"@{0000-01-01}", 2, "outside the years 0001 to 9999"},
		{"@{0001-01-01T00:00:00+01:00}", 2, "outside the years 0001 to 9999"},
		{"@{9999-12-31T23:00:00-02:00}", 2, "outside the years 0001 to 9999"},
		{"@{1704103200}", 6, "expected '-', found '1'"},
	}
	for _, tt := range tests {
		_, err := ParseSnapshot(tt.in)
		syntaxErr(t, tt.in, err, tt.pos, tt.reason)
	}
}

func TestSyntaxErrorText(t *testing.T) {
	_, _, err := ParseSnappish("x~")
	want := `invalid snapshot expression "x~": expected a number after '~' at column 3`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	// Columns count runes, not bytes.
	_, _, err = ParseSnappish("prød~x")
	if want := `invalid snapshot expression "prød~x": expected a number after '~' at column 6`; err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if got := (&SyntaxError{Input: "a", Pos: 99, Reason: "r"}).Error(); got != `invalid expression "a": r at column 2` {
		t.Fatalf("got %s", got)
	}
}

func TestParseSnappish(t *testing.T) {
	tests := []struct {
		in, env, snap string
	}{
		{"prod", "prod", "#-1"},
		{" prod ", "prod", "#-1"},
		{"prod#3", "prod", "#3"},
		{"prod#-1", "prod", "#-1"},
		{"prod#0", "prod", "#0"},
		{"prod~1", "prod", "~1"},
		{"prod~0", "prod", "~0"},
		{"prod@{2.hours.ago}", "prod", "@{2.hours.ago}"},
		{"prod@{2024-01-01T10:00:00}", "prod", "@{2024-01-01T10:00:00Z}"},
		{"prod @{now}", "prod", "@{now}"},
		{"aws-prod-1#3", "aws-prod-1", "#3"},
		{"prod-1", "prod-1", "#-1"}, // a name, since '-' and digits occur in names
		{"prod3", "prod3", "#-1"},
		{"my env.x{y}#3", "my env.x{y}", "#3"},
		{"prød#2", "prød", "#2"},
	}
	for _, tt := range tests {
		env, snap, err := ParseSnappish(tt.in)
		if err != nil {
			t.Errorf("ParseSnappish(%q): %v", tt.in, err)
			continue
		}
		if env != tt.env || snap.String() != tt.snap {
			t.Errorf("ParseSnappish(%q) = %q, %s; want %q, %s", tt.in, env, snap, tt.env, tt.snap)
		}
		env2, snap2, err := ParseSnappish(FormatSnappish(env, snap))
		if err != nil || env2 != env || !snap2.Equal(snap) {
			t.Errorf("re-parse of %q = %q, %v, %v", FormatSnappish(env, snap), env2, snap2, err)
		}
	}
}

func TestParseSnappishErrors(t *testing.T) {
	tests := []struct {
		in     string
		pos    int
		reason string
	}{
		{"", 0, "empty expression"},
		{"#3", 0, "environment name is missing"},
		{"  ~1", 2, "environment name is missing"},
		{"@{now}", 0, "environment name is missing"},
		{"x~", 2, "expected a number after '~'"},
		{"prod#", 5, "expected a number after '#'"},
		{"prod#x", 5, "expected a number after '#'"},
		{"prod#3~1", 6, "unexpected '~'"},
		{"prod~1#2", 6, "unexpected '#'"},
		{"prod@3", 5, "expected '{' after '@'"},
		{"prod@{now", 9, "expected '}'"},
		{"prod#99999999999999999999", 5, "number too large"},
		{"prod# 3", 5, "expected a number after '#'"},
	}
	for _, tt := range tests {
		_, _, err := ParseSnappish(tt.in)
		syntaxErr(t, tt.in, err, tt.pos, tt.reason)
	}
}

func TestResolve(t *testing.T) {
	ts := []float64{100, 200, 200.5, 300, 400}
	now := time.Unix(1000, 0)
	tests := []struct {
		expr string
		n    int
		want int
		msg  string // RangeError.Message("acme", "prod") when want is 0
	}{
		{"-1", 5, 5, ""},
		{"-1", 1, 1, ""},
		{"-1", 0, 0, "Org: 'acme'. Snapshot 'prod#-1' resolves to 'prod#0'. len(snapshots) == 0. Indexes are 1-based"},
		{"#-1", 0, 0, "Org: 'acme'. Snapshot 'prod#-1' resolves to 'prod#0'. len(snapshots) == 0. Indexes are 1-based"},
		{"-5", 5, 1, ""},
		{"-6", 5, 0, "Org: 'acme'. Snapshot 'prod#-6' resolves to 'prod#0'. len(snapshots) == 5. Indexes are 1-based"},
		{"-7", 5, 0, "Org: 'acme'. Snapshot 'prod#-7' resolves to 'prod#-1'. len(snapshots) == 5. Indexes are 1-based"},
		{"1", 1, 1, ""},
		{"#5", 5, 5, ""},
		{"3", 5, 3, ""},
		{"7", 5, 0, "Org: 'acme'. Snapshot 'prod#7' resolves to 'prod#7'. len(snapshots) == 5. Indexes are 1-based"},
		{"#6", 5, 0, "Org: 'acme'. Snapshot 'prod#6' resolves to 'prod#6'. len(snapshots) == 5. Indexes are 1-based"},
		{"0", 5, 0, "Org: 'acme'. Snapshot 'prod#0' resolves to 'prod#0'. len(snapshots) == 5. Indexes are 1-based"},
		{"1", 0, 0, "Org: 'acme'. Snapshot 'prod#1' resolves to 'prod#1'. len(snapshots) == 0. Indexes are 1-based"},
		{"9223372036854775807", 5, 0, "Org: 'acme'. Snapshot 'prod#9223372036854775807' resolves to 'prod#9223372036854775807'. len(snapshots) == 5. Indexes are 1-based"},
		{"~0", 5, 5, ""},
		{"~0", 1, 1, ""},
		{"~0", 0, 0, "Org: 'acme'. Snapshot 'prod#-1' resolves to 'prod#0'. len(snapshots) == 0. Indexes are 1-based"},
		{"~4", 5, 1, ""},
		{"~5", 5, 0, "Org: 'acme'. Snapshot 'prod#-6' resolves to 'prod#0'. len(snapshots) == 5. Indexes are 1-based"},
		{"~9", 5, 0, "Org: 'acme'. Snapshot 'prod#-10' resolves to 'prod#-4'. len(snapshots) == 5. Indexes are 1-based"},
		{"~9223372036854775807", 5, 0, "Org: 'acme'. Snapshot 'prod#-9223372036854775808' resolves to 'prod#-9223372036854775802'. len(snapshots) == 5. Indexes are 1-based"},
		{"-9223372036854775807", 0, 0, "Org: 'acme'. Snapshot 'prod#-9223372036854775807' resolves to 'prod#-9223372036854775806'. len(snapshots) == 0. Indexes are 1-based"},
		{"@{now}", 5, 5, ""},
		{"@{now}", 1, 1, ""},
		{"@{now}", 0, 0, "Org: 'acme'. Snapshot 'prod#-1' resolves to 'prod#0'. len(snapshots) == 0. Indexes are 1-based"},
		// Time forms: the latest snapshot whose timestamp <= t.
		{"@{1970-01-01T00:01:40}", 5, 1, ""},   // == first
		{"@{1970-01-01T00:03:20}", 5, 2, ""},   // == 200
		{"@{1970-01-01T00:03:20.4}", 5, 2, ""}, // between 200 and 200.5
		{"@{1970-01-01T00:03:20.5}", 5, 3, ""}, // == 200.5
		{"@{1970-01-01T00:06:40}", 5, 5, ""},   // == last
		{"@{2030-01-01}", 5, 5, ""},            // after last
		{"@{2030-01-01}", 1, 1, ""},
		{"@{1970-01-01T00:01:39.999}", 5, 0, "Org: 'acme'. Snapshot 'prod@{1970-01-01T00:01:39.999Z}' does not exist. 1970-01-01T00:01:39.999Z is before the first snapshot 'prod#1' at 1970-01-01T00:01:40Z"},
		{"@{1970-01-01}", 0, 0, "Org: 'acme'. Snapshot 'prod@{1970-01-01T00:00:00Z}' does not exist. len(snapshots) == 0"},
		// now is 1000.
		{"@{600.seconds.ago}", 5, 5, ""}, // 400 == last
		{"@{601.seconds.ago}", 5, 4, ""}, // 399
		{"@{10.minutes.ago}", 5, 5, ""},
		{"@{15.minutes.ago}", 5, 1, ""}, // 100 == first
		{"@{0.seconds.ago}", 5, 5, ""},
		{"@{16.minutes.ago}", 5, 0, "Org: 'acme'. Snapshot 'prod@{16.minutes.ago}' does not exist. 1970-01-01T00:00:40Z is before the first snapshot 'prod#1' at 1970-01-01T00:01:40Z"},
		{"@{1.week.ago}", 0, 0, "Org: 'acme'. Snapshot 'prod@{1.week.ago}' does not exist. len(snapshots) == 0"},
		{"@{9223372036854775807.months.ago}", 5, 0, "Org: 'acme'. Snapshot 'prod@{9223372036854775807.months.ago}' does not exist. unix time -2.390698031952758e+25 is before the first snapshot 'prod#1' at 1970-01-01T00:01:40Z"},
	}
	for _, tt := range tests {
		s := mustSnap(t, tt.expr)
		got, err := s.Resolve(tt.n, func(i int) float64 { return ts[i-1] }, now)
		if tt.want != 0 {
			if err != nil || got != tt.want {
				t.Errorf("%s among %d = %d, %v; want %d", tt.expr, tt.n, got, err, tt.want)
			}
			continue
		}
		var re *RangeError
		if !errors.As(err, &re) {
			t.Errorf("%s among %d = %d, %v; want a *RangeError", tt.expr, tt.n, got, err)
			continue
		}
		if m := re.Message("acme", "prod"); m != tt.msg {
			t.Errorf("%s among %d: message\n got %s\nwant %s", tt.expr, tt.n, m, tt.msg)
		}
		if !re.Snapshot.Equal(s) || re.Len != tt.n {
			t.Errorf("%s among %d: RangeError %+v", tt.expr, tt.n, re)
		}
	}
}

func TestRangeErrorEchoes(t *testing.T) {
	_, err := Latest().Resolve(0, nil, time.Time{})
	var re *RangeError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a RangeError", err)
	}
	want := "Org: 'acme'. Snapshot 'prod' resolves to 'prod#0'. len(snapshots) == 0. Indexes are 1-based"
	if m := re.MessageEchoing("acme", "prod", "prod"); m != want {
		t.Fatalf("got %s, want %s", m, want)
	}
}

func TestRangeErrorError(t *testing.T) {
	_, err := Latest().Resolve(0, nil, time.Time{})
	if want := "Snapshot '#-1' resolves to '#0'. len(snapshots) == 0. Indexes are 1-based"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestResolveZeroSnapshot(t *testing.T) {
	_, err := Snapshot{}.Resolve(3, nil, time.Time{})
	var re *RangeError
	if err == nil || errors.As(err, &re) {
		t.Fatalf("got %v, want a plain error", err)
	}
	if (Snapshot{}).String() != "" {
		t.Fatal("zero Snapshot has a String")
	}
}

// Timestamps as the store holds them: floats parsed from JSON with microseconds.
func TestResolveRealTimestamps(t *testing.T) {
	ts := []float64{1787107000.25, 1787107798.493415, 1787107798.493416, 1787109999}
	at := func(i int) float64 { return ts[i-1] }
	for i, f := range ts {
		sec, frac := math.Modf(f)
		tm := time.Unix(int64(sec), int64(math.Round(frac*1e6))*1000).UTC()
		s := mustSnap(t, "@{"+tm.Format(time.RFC3339Nano)+"}")
		if got, err := s.Resolve(len(ts), at, time.Time{}); err != nil || got != i+1 {
			t.Errorf("%s = %d, %v; want %d", s, got, err, i+1)
		}
	}
}

func TestResolveDuplicateTimestamps(t *testing.T) {
	ts := []float64{100, 100, 200}
	s := mustSnap(t, "@{1970-01-01T00:01:40}")
	if got, _ := s.Resolve(3, func(i int) float64 { return ts[i-1] }, time.Time{}); got != 2 {
		t.Fatalf("got %d, want 2 (the latest of the equal ones)", got)
	}
}

func TestResolveBinarySearch(t *testing.T) {
	const n = 1 << 20
	calls := 0
	at := func(i int) float64 { calls++; return float64(i * 10) }
	s := mustSnap(t, "@{1970-01-01T00:00:55}") // 55 s: index 5
	if got, err := s.Resolve(n, at, time.Time{}); err != nil || got != 5 {
		t.Fatalf("got %d, %v", got, err)
	}
	if calls > 22 {
		t.Fatalf("%d timestamp lookups for %d snapshots", calls, n)
	}
}

func TestUnixSeconds(t *testing.T) {
	tests := []struct {
		t    time.Time
		want float64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(1787107798, 493415000), 1787107798.493415},
		{time.Unix(1704103200, 500000000), 1704103200.5},
		{time.Unix(-2, 750000000), -1.25},
		{time.Unix(-1, 0), -1},
	}
	for _, tt := range tests {
		if got := unixSeconds(tt.t); got != tt.want {
			t.Errorf("unixSeconds(%v) = %s, want %s", tt.t, strconv.FormatFloat(got, 'f', -1, 64), strconv.FormatFloat(tt.want, 'f', -1, 64))
		}
	}
}

func TestUnit(t *testing.T) {
	if Unit(0).Seconds() != 0 || Unit(99).Seconds() != 0 || Unit(99).String() != "Unit(99)" {
		t.Fatal("invalid units")
	}
	if Month.Seconds() != 30*86400 || Week.String() != "week" {
		t.Fatal("month or week")
	}
	for spelling, u := range units {
		if spelling != strings.ToLower(spelling) || u.Seconds() == 0 {
			t.Errorf("unit spelling %q", spelling)
		}
	}
}
