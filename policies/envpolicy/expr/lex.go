package expr

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// tokenKind is the kind of a lexical token.
type tokenKind int

const (
	tokEOF    tokenKind = iota
	tokIdent            // flow.name, flow.tags.risk-level, exists, and, or, not, in, true, false
	tokString           // "..." or '...'
	tokNumber           // 12, 1.5, -3
	tokOp               // == != < > <= >=
	tokLParen
	tokRParen
	tokLBrack
	tokRBrack
	tokComma
)

// token is one lexical token; off is its byte offset in the source.
type token struct {
	kind tokenKind
	text string // as written (for strings: the decoded value)
	off  int
}

func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "the end of the expression"
	case tokString:
		return fmt.Sprintf("the string %q", t.text)
	}
	return fmt.Sprintf("'%s'", t.text)
}

// isIdentStart and isIdentPart say what a name is made of. Dots, dashes and slashes belong to names so that tag
// keys such as risk-level or app.kubernetes.io/name can follow flow.tags. without quoting; the language has no
// arithmetic, so a dash is never an operator.
func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isIdentPart(c byte) bool {
	return isIdentStart(c) || isDigit(c) || c == '.' || c == '-' || c == '/'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// lexer splits an expression into tokens. base is the byte offset of src in the text positions are reported in.
type lexer struct {
	src  string
	pos  int
	text string // the whole text, for columns
	base int
}

func (l *lexer) errAt(off int, format string, args ...any) *Error {
	return newError(l.text, l.base+off, fmt.Sprintf(format, args...))
}

func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) && strings.IndexByte(" \t\r\n", l.src[l.pos]) >= 0 {
		l.pos++
	}
	start := l.pos
	if start >= len(l.src) {
		return token{kind: tokEOF, off: l.base + start}, nil
	}
	c := l.src[start]
	tok := func(k tokenKind, n int) (token, error) {
		l.pos += n
		return token{kind: k, text: l.src[start:l.pos], off: l.base + start}, nil
	}
	switch {
	case isIdentStart(c):
		n := 1
		for start+n < len(l.src) && isIdentPart(l.src[start+n]) {
			n++
		}
		return tok(tokIdent, n)
	case isDigit(c) || (c == '-' && start+1 < len(l.src) && isDigit(l.src[start+1])):
		return l.number()
	case c == '"' || c == '\'':
		return l.str(c)
	case c == '(':
		return tok(tokLParen, 1)
	case c == ')':
		return tok(tokRParen, 1)
	case c == '[':
		return tok(tokLBrack, 1)
	case c == ']':
		return tok(tokRBrack, 1)
	case c == ',':
		return tok(tokComma, 1)
	case c == '=' || c == '!':
		if start+1 < len(l.src) && l.src[start+1] == '=' {
			return tok(tokOp, 2)
		}
		if c == '=' {
			return token{}, l.errAt(start, "'=' is not an operator; compare with '=='")
		}
		return token{}, l.errAt(start, "'!' is not an operator; negate with 'not' or compare with '!='")
	case c == '<' || c == '>':
		if start+1 < len(l.src) && l.src[start+1] == '=' {
			return tok(tokOp, 2)
		}
		return tok(tokOp, 1)
	case c == '&' || c == '|':
		word := map[byte]string{'&': "and", '|': "or"}[c]
		return token{}, l.errAt(start, "'%c' is not an operator; use '%s'", c, word)
	}
	r, _ := utf8.DecodeRuneInString(l.src[start:])
	return token{}, l.errAt(start, "unexpected character %q", r)
}

// number reads 12, -3 or 1.25 (no exponent: tags and names hold plain numbers).
func (l *lexer) number() (token, error) {
	start := l.pos
	i := start
	if l.src[i] == '-' {
		i++
	}
	for i < len(l.src) && isDigit(l.src[i]) {
		i++
	}
	if i < len(l.src) && l.src[i] == '.' {
		i++
		if i >= len(l.src) || !isDigit(l.src[i]) {
			return token{}, l.errAt(i, "expected a digit after the decimal point")
		}
		for i < len(l.src) && isDigit(l.src[i]) {
			i++
		}
	}
	if i < len(l.src) && isIdentStart(l.src[i]) {
		return token{}, l.errAt(start, "a name cannot start with a digit or '-'; quote it if it is a string")
	}
	l.pos = i
	return token{kind: tokNumber, text: l.src[start:i], off: l.base + start}, nil
}

// str reads a string quoted with q. A backslash escapes the quote and itself; before any other character it is
// kept as written, so regular expressions such as "^v\d+" read as people write them.
func (l *lexer) str(q byte) (token, error) {
	start := l.pos
	var b strings.Builder
	i := start + 1
	for {
		if i >= len(l.src) {
			return token{}, l.errAt(start, "this string is not closed with %c", q)
		}
		c := l.src[i]
		switch {
		case c == q:
			l.pos = i + 1
			return token{kind: tokString, text: b.String(), off: l.base + start}, nil
		case c == '\\' && i+1 < len(l.src) && (l.src[i+1] == q || l.src[i+1] == '\\'):
			b.WriteByte(l.src[i+1])
			i += 2
		default:
			b.WriteByte(c)
			i++
		}
	}
}
