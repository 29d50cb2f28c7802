// Package expr parses, checks and compiles to Rego the conditions of environment policies (the if of an
// attestation rule or of an exception), written as policies write them: ${{ flow.tags.risk-level == "high" }}.
//
// Grammar, loosest binding first:
//
//	expression := or
//	or         := and ("or" and)*
//	and        := not ("and" not)*
//	not        := "not" not | comparison
//	comparison := primary (("==" | "!=" | "<" | ">" | "<=" | ">=" | "in") primary)?
//	primary    := path | call | string | number | "true" | "false" | list | "(" expression ")"
//	path       := flow | flow.name | flow.tags | flow.tags.<key> | flow.tags["<key>"]
//	              | artifact | artifact.name | artifact.fingerprint
//	call       := exists(path) | matches(value, "regex")
//	list       := "[" (expression ("," expression)* ","?)? "]"
//
// A tag key after flow.tags. may hold letters, digits, _, -, . and / (risk-level, app.kubernetes.io/name); any
// other key is written flow.tags["my key"]. Strings take double or single quotes; a backslash escapes the quote
// and itself and is kept as written before anything else, so "^v\d+" is the regular expression people expect.
// Numbers are decimal (3, -1, 2.5).
//
// Expressions are type-checked when they are parsed, so a policy never fails when it runs:
//   - and, or and not take conditions; so does the whole expression. A bare path is not a condition: compare it
//     or test it with exists().
//   - == and != compare two strings, two numbers or two booleans. A context value (always a string) compared
//     with a number is read as a number ("2" == 2); one that is not written as a number equals no number.
//   - <, >, <=, >= order two strings (lexicographically) or two numbers, with the same reading of context values
//     compared with numbers; a missing value, or values of different types, are never ordered (false).
//   - in tests membership in a list literal of one type, with == semantics.
//   - exists(path) is true when the value is present: exists(flow) is false for an artifact of no flow,
//     exists(flow.tags.team) when the flow has no tag team.
//   - matches(value, "regex") uses RE2 syntax (Go's, as OPA's regex.match), checked at parse time; it is false for
//     a missing value.
//
// A value that is absent (a tag the flow does not have, any flow field of an artifact of no flow) is null: it
// equals nothing but null, so flow.tags.team != "a" holds for a flow without the tag.
//
// Errors are *Error with the 1-based column (in characters) of the text given to Parse. An expression is at most
// MaxLength bytes and nests at most 64 levels.
package expr
