// Package snapexpr parses the small expressions clients use to name environment snapshots
// and points in time, and resolves them against an environment's snapshots. It is pure:
// resolution sees the snapshots only through their count n (indexes 1..n) and a function
// returning the timestamp (unix seconds) of an index, timestamps ascending with the index.
//
// # Snapshot expressions
//
// Used by GET /snapshots/{org}/{env}/{expr} (ParseSnapshot) and, prefixed with an environment
// name, by the snappish1/snappish2 parameters of env-diff (ParseSnappish).
//
//	N, #N          absolute index N (0 parses, and never resolves: indexes are 1-based)
//	-N, #-N        the N-th from the end; -1 is the latest (-0 is the same as 0)
//	~N             N snapshots before the latest; ~0 is the latest
//	@{now}         the latest
//	@{TIME}        the snapshot current at TIME: the latest one whose timestamp <= TIME
//	@{N.UNIT.ago}  the snapshot current N units before the now given to Resolve
//
// TIME is YYYY-MM-DD, optionally followed by 'T' or one space and HH:MM, HH:MM:SS or
// HH:MM:SS.fraction (1 to 9 digits), optionally followed by Z or an offset ±HH, ±HHMM or
// ±HH:MM. Without a zone it is UTC, as the Kosli CLI documents. A date alone is midnight UTC.
//
// A snappish is ENV, ENV#N, ENV#-N, ENV~N or ENV@{...}: the name is everything before the
// first '#', '~' or '@' (it may contain any other character) and ENV alone is the latest.
// The bare forms N and -N are not allowed after a name, since '-' and digits occur in names.
//
// # Interval boundaries
//
// Used by the start and end parameters of GET /environments/{org}/{env}/events
// (ParseBoundary) and the deprecated interval parameter, two boundaries joined by ".."
// (ParseInterval). Defaults: start 1, end NOW.
//
//	N          snapshot index N (N >= 1)
//	-N         N-th snapshot from the end; -1 is the latest
//	~N         N snapshots before the latest, that is -(N+1); the Kosli CLI documents it
//	NOW        the latest snapshot
//	N UNIT     N units ago (the space is optional): 1h, 2days, 30mins, 0s
//
// In an interval either side may be empty and then means NOW, as the Kosli CLI documents
// ("3.." is 3..NOW), and a bare expression E is E..E ("NOW" is NOW..NOW). An interval that is empty or all white space is reported as the
// defaults 1..NOW, because the Kosli CLI always sends "interval=", even when unset; callers
// should treat it as absent. An absolute time comes only from start_ts/end_ts/from/to:
// parse those with ParseTimestamp and wrap them with BoundaryAt.
//
// ResolveWindow turns (start, end) into an inclusive index range [From, To]:
//
//   - an index maps to itself; a negative index -k to n-k+1. A start below 1 is clamped to 1,
//     an end above n to n; a start above n, or an end below 1, gives an empty window.
//   - NOW maps to n, whatever the timestamps say (so clock skew cannot hide the latest).
//   - a time t (N UNIT ago, or BoundaryAt) maps to the latest snapshot whose timestamp <= t,
//     the one current at t. If t is before the first snapshot, a start becomes 1 and an end
//     leaves the window empty.
//   - From > To is an empty window; an empty window is always {From: 1, To: 0}, and so is
//     every window of an environment without snapshots.
//
// # Units
//
// Case-insensitive, in both grammars:
//
//	s, sec, secs, second, seconds
//	m, min, mins, minute, minutes
//	h, hr, hrs, hour, hours
//	d, day, days
//	w, week, weeks
//	month, months (30 days; the Kosli CLI documents N.months.ago)
//
// # Case, white space and numbers
//
// Keywords (NOW, ago, units, T, Z) are matched case-insensitively (ASCII only). White space
// around a whole expression, around a name in a snappish, inside @{ }, around ".." and
// between a number and its unit is ignored; anywhere else it is an error. Numbers are
// decimal, leading zeros allowed, no sign other than the '-' above; one that does not fit
// an int is a *SyntaxError, never a panic or a wrap-around.
//
// # Errors
//
// Parse functions return a *SyntaxError carrying the input, the byte offset of the problem
// and a reason, so the API can answer 400 naming the parameter. Snapshot.Resolve returns a
// *RangeError when the expression falls outside the snapshots; its Message method renders
// the hosted service's text, e.g. for -1 on an environment without snapshots:
//
//	Org: 'ORG'. Snapshot 'ENV#-1' resolves to 'ENV#0'. len(snapshots) == 0. Indexes are 1-based
//
// Relative forms (-N, ~N, @{now}) are shown as the negative index the hosted service turns
// them into, so ~0, -1, @{now} and a bare ENV all give the message above.
package snapexpr
