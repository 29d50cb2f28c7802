package snapexpr

import (
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// SyntaxError reports an expression that does not parse.
type SyntaxError struct {
	// What names the grammar: "snapshot expression", "interval boundary", "interval" or
	// "timestamp".
	What string
	// Input is the text as given, white space included, so Pos indexes it.
	Input string
	// Pos is the byte offset in Input where the problem is; len(Input) means "at the end".
	Pos    int
	Reason string
}

// Error reads like: invalid snapshot expression "x~": expected a number after '~' at column 3.
// Columns count runes from 1, so they match what a person sees.
func (e *SyntaxError) Error() string {
	what := e.What
	if what == "" {
		what = "expression"
	}
	return fmt.Sprintf("invalid %s %q: %s at column %d", what, e.Input, e.Reason, e.Column())
}

// Column is the 1-based rune column of Pos.
func (e *SyntaxError) Column() int {
	pos := min(max(e.Pos, 0), len(e.Input))
	return utf8.RuneCountInString(e.Input[:pos]) + 1
}

// RangeError reports a snapshot expression that parses but names no existing snapshot.
type RangeError struct {
	// Snapshot is the expression that failed.
	Snapshot Snapshot
	// Len is the number of snapshots it was resolved against.
	Len int
	// Index is where an index form landed (absolute: as given; relative: computed, so
	// possibly 0 or negative). Unused for time forms.
	Index int
	// At is the instant a time form asked for, unix seconds.
	At float64
	// First is the timestamp of snapshot 1 for a time form when Len > 0.
	First float64
}

// Error is Message without the org and environment names.
func (e *RangeError) Error() string { return e.text("") }

// Message renders the hosted service's text for the environment env of org org.
func (e *RangeError) Message(org, env string) string {
	return "Org: '" + org + "'. " + e.text(env)
}

// MessageEchoing is Message naming the snapshot as the user typed it (echo), for env-diff,
// whose errors repeat the snappish unchanged: "Snapshot 'prod' resolves to 'prod#0'". Time
// forms keep Message's text.
func (e *RangeError) MessageEchoing(org, echo, env string) string {
	switch e.Snapshot.kind {
	case KindIndex, KindFromEnd, KindBehind, KindNow:
		return "Org: '" + org + "'. " + e.resolves(echo, env)
	}
	return e.Message(org, env)
}

// resolves is the text of an index form: never "does not exist", as the hosted service says.
func (e *RangeError) resolves(echo, env string) string {
	return fmt.Sprintf("Snapshot '%s' resolves to '%s#%d'. len(snapshots) == %d. Indexes are 1-based", echo, env, e.Index, e.Len)
}

func (e *RangeError) text(env string) string {
	s := e.Snapshot
	switch s.kind {
	case KindIndex:
		return e.resolves(fmt.Sprintf("%s#%d", env, e.Index), env)
	case KindFromEnd, KindBehind, KindNow:
		return e.resolves(fmt.Sprintf("%s#-%s", env, fromEnd(s)), env)
	case KindTime, KindAgo:
		if e.Len == 0 {
			return fmt.Sprintf("Snapshot '%s%s' does not exist. len(snapshots) == 0", env, s)
		}
		return fmt.Sprintf("Snapshot '%s%s' does not exist. %s is before the first snapshot '%s#1' at %s",
			env, s, formatUnix(e.At), env, formatUnix(e.First))
	}
	return "invalid snapshot expression"
}

// fromEnd is k of the equivalent #-k, as a string because ~MaxInt needs k = MaxInt+1.
func fromEnd(s Snapshot) string {
	switch s.kind {
	case KindBehind:
		return strconv.FormatUint(uint64(s.n)+1, 10)
	case KindNow:
		return "1"
	}
	return strconv.Itoa(s.n)
}

// formatUnix renders unix seconds as RFC 3339 in UTC, or as a number when out of the
// years 1..9999 (a huge N.weeks.ago can get there).
func formatUnix(f float64) string {
	const lo, hi = -62135596800, 253402300800 // 0001-01-01, 10000-01-01
	if math.IsNaN(f) || f < lo || f >= hi {
		return "unix time " + strconv.FormatFloat(f, 'g', -1, 64)
	}
	sec := math.Floor(f)
	ns := math.Round((f - sec) * 1e9)
	return time.Unix(int64(sec), int64(ns)).UTC().Format(time.RFC3339Nano)
}
