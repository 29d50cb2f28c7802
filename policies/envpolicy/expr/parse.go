package expr

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Limits that keep a hostile expression from costing more than a person's ever would.
const (
	MaxLength = 4096 // bytes of text
	maxDepth  = 64   // nesting of parentheses, lists, calls and not
)

// Error is a problem with an expression at a column of the text given to Parse.
type Error struct {
	Column  int // 1-based, counted in characters
	Offset  int // byte offset
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("column %d: %s", e.Column, e.Message) }

func newError(text string, off int, msg string) *Error {
	off = min(max(off, 0), len(text))
	return &Error{Column: utf8.RuneCountInString(text[:off]) + 1, Offset: off, Message: msg}
}

// Expression is a parsed and type-checked condition.
type Expression struct {
	Text string // as given to Parse
	Root Node   // a boolean node
}

// String is the canonical form, wrapped as policies write it: ${{ flow.name == "a" }}.
func (e *Expression) String() string { return "${{ " + Format(e.Root) + " }}" }

// Parse parses and checks a condition, written either bare (flow.name == "a") or wrapped as in policy YAML
// (${{ flow.name == "a" }}). Every problem is an *Error whose column points into text.
func Parse(text string) (*Expression, error) {
	if len(text) > MaxLength {
		return nil, newError(text, MaxLength, fmt.Sprintf("an expression may be at most %d bytes long", MaxLength))
	}
	if !utf8.ValidString(text) {
		bad := 0
		for bad < len(text) {
			r, size := utf8.DecodeRuneInString(text[bad:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			bad += size
		}
		return nil, newError(text, bad, "the expression is not valid UTF-8")
	}
	body, base, err := unwrap(text)
	if err != nil {
		return nil, err
	}
	p := &parser{lx: &lexer{src: body, text: text, base: base}, text: text}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokEOF {
		return nil, newError(text, p.tok.off, "the expression is empty")
	}
	root, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, p.errTok("expected an operator ('and', 'or', '==', ...) or the end of the expression, found %s", p.tok.describe())
	}
	if err := p.wantBool(root, "the expression"); err != nil {
		return nil, err
	}
	return &Expression{Text: text, Root: root}, nil
}

// unwrap returns the expression inside ${{ ... }} (or text itself when it is not wrapped) and its byte offset.
func unwrap(text string) (string, int, error) {
	trimmed := strings.TrimLeft(text, " \t\r\n")
	start := len(text) - len(trimmed)
	if !strings.HasPrefix(trimmed, "${{") {
		if strings.HasPrefix(trimmed, "${") || strings.HasPrefix(trimmed, "{{") {
			return "", 0, newError(text, start, "an expression is wrapped in ${{ and }}")
		}
		return text, 0, nil
	}
	end := strings.LastIndex(text, "}}")
	if end < start+3 || strings.TrimSpace(text[end+2:]) != "" {
		return "", 0, newError(text, len(strings.TrimRight(text, " \t\r\n")), "expected }} to close ${{")
	}
	return text[start+3 : end], start + 3, nil
}

type parser struct {
	lx    *lexer
	text  string
	tok   token
	depth int
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) errAt(off int, format string, args ...any) *Error {
	return newError(p.text, off, fmt.Sprintf(format, args...))
}

func (p *parser) errTok(format string, args ...any) *Error {
	return p.errAt(p.tok.off, format, args...)
}

func (p *parser) isWord(w string) bool { return p.tok.kind == tokIdent && p.tok.text == w }

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errTok("the expression nests deeper than %d levels", maxDepth)
	}
	return nil
}

// or := and ("or" and)*
func (p *parser) parseOr() (Node, error) {
	return p.parseChain(OpOr, p.parseAnd)
}

// and := not ("and" not)*
func (p *parser) parseAnd() (Node, error) {
	return p.parseChain(OpAnd, p.parseNot)
}

func (p *parser) parseChain(op Op, operand func() (Node, error)) (Node, error) {
	x, err := operand()
	if err != nil {
		return nil, err
	}
	for p.isWord(string(op)) {
		off := p.tok.off
		if err := p.advance(); err != nil {
			return nil, err
		}
		y, err := operand()
		if err != nil {
			return nil, err
		}
		if err := p.wantBool(x, "the left side of '"+string(op)+"'"); err != nil {
			return nil, err
		}
		if err := p.wantBool(y, "the right side of '"+string(op)+"'"); err != nil {
			return nil, err
		}
		x = &Binary{Op: op, X: x, Y: y, OpOff: off}
	}
	return x, nil
}

// not := "not" not | comparison
func (p *parser) parseNot() (Node, error) {
	if !p.isWord("not") {
		return p.parseComparison()
	}
	off := p.tok.off
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if err := p.advance(); err != nil {
		return nil, err
	}
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	if err := p.wantBool(x, "the operand of 'not'"); err != nil {
		return nil, err
	}
	return &Not{X: x, Off: off}, nil
}

// comparison := primary (("==" | "!=" | "<" | ">" | "<=" | ">=" | "in") primary)?
func (p *parser) parseComparison() (Node, error) {
	x, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	var op Op
	switch {
	case p.tok.kind == tokOp:
		op = Op(p.tok.text)
	case p.isWord("in"):
		op = OpIn
	default:
		return x, nil
	}
	off := p.tok.off
	if err := p.advance(); err != nil {
		return nil, err
	}
	y, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	n := &Binary{Op: op, X: x, Y: y, OpOff: off}
	if err := p.checkComparison(n); err != nil {
		return nil, err
	}
	if p.tok.kind == tokOp || p.isWord("in") {
		return nil, p.errTok("comparisons do not chain; join them with 'and'")
	}
	return n, nil
}

// primary := path | call | string | number | true | false | list | "(" or ")"
func (p *parser) parsePrimary() (Node, error) {
	t := p.tok
	switch t.kind {
	case tokString:
		return &String{Value: t.text, Off: t.off}, p.advance()
	case tokNumber:
		return &Number{Text: canonicalNumber(t.text), Off: t.off}, p.advance()
	case tokLParen:
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tokRParen {
			return nil, p.errTok("expected ')' to close the '(' at column %d, found %s", newError(p.text, t.off, "").Column, p.tok.describe())
		}
		return x, p.advance()
	case tokLBrack:
		return p.parseList()
	case tokIdent:
		switch t.text {
		case "true", "false":
			return &Bool{Value: t.text == "true", Off: t.off}, p.advance()
		case "and", "or", "not", "in":
			return nil, p.errTok("expected a value before '%s'", t.text)
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind == tokLParen {
			return p.parseCall(t)
		}
		return p.parsePath(t)
	case tokEOF:
		return nil, p.errTok("the expression ends where a value was expected")
	}
	return nil, p.errTok("expected a value, found %s", t.describe())
}

// list := "[" (or ("," or)* ","?)? "]"
func (p *parser) parseList() (Node, error) {
	l := &List{Off: p.tok.off}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if err := p.advance(); err != nil {
		return nil, err
	}
	for p.tok.kind != tokRBrack {
		e, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		l.Elems = append(l.Elems, e)
		switch p.tok.kind {
		case tokComma:
			if err := p.advance(); err != nil {
				return nil, err
			}
		case tokRBrack:
		default:
			return nil, p.errTok("expected ',' or ']' in the list, found %s", p.tok.describe())
		}
	}
	if err := p.checkList(l); err != nil {
		return nil, err
	}
	return l, p.advance()
}

const paths = "flow.name, flow.tags.<key>, artifact.name and artifact.fingerprint"

// parsePath checks a name such as flow.tags.risk-level; a tag key may also be given as flow.tags["any key"].
func (p *parser) parsePath(t token) (Node, error) {
	parts := strings.Split(t.text, ".")
	n := &Path{Root: parts[0], Off: t.off}
	switch {
	case parts[0] == "flow" && len(parts) == 1:
	case parts[0] == "flow" && parts[1] == "name" && len(parts) == 2:
		n.Field = "name"
	case parts[0] == "flow" && parts[1] == "tags":
		n.Field = "tags"
		if len(parts) > 2 {
			n.Key = strings.Join(parts[2:], ".")
			if !plainTagKey(n.Key) {
				return nil, p.errAt(t.off, "'%s' has an empty part in its tag key; write flow.tags[\"...\"] for a key with other characters", t.text)
			}
		}
	case parts[0] == "artifact" && len(parts) == 1:
	case parts[0] == "artifact" && len(parts) == 2 && (parts[1] == "name" || parts[1] == "fingerprint"):
		n.Field = parts[1]
	case parts[0] == "flow" || parts[0] == "artifact":
		return nil, p.errAt(t.off, "unknown field '%s'; an expression can read %s", t.text, paths)
	case t.text == "exists" || t.text == "matches":
		return nil, p.errAt(t.off, "%s is a function: write %s(...)", t.text, t.text)
	default:
		return nil, p.errAt(t.off, "unknown name '%s'; an expression can read %s", t.text, paths)
	}
	if p.tok.kind != tokLBrack {
		return n, nil
	}
	if n.Field != "tags" || n.Key != "" {
		return nil, p.errTok("only flow.tags can be indexed: flow.tags[\"key\"]")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tokString || p.tok.text == "" {
		return nil, p.errTok("expected a tag key in quotes, found %s", p.tok.describe())
	}
	n.Key = p.tok.text
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tokRBrack {
		return nil, p.errTok("expected ']' after the tag key, found %s", p.tok.describe())
	}
	return n, p.advance()
}

// call := ("exists" | "matches") "(" (or ("," or)*)? ")"
func (p *parser) parseCall(name token) (Node, error) {
	if name.text != "exists" && name.text != "matches" {
		return nil, p.errAt(name.off, "unknown function '%s'; the functions are exists(value) and matches(value, \"regex\")", name.text)
	}
	c := &Call{Func: name.text, Off: name.off}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if err := p.advance(); err != nil { // (
		return nil, err
	}
	for p.tok.kind != tokRParen {
		a, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		c.Args = append(c.Args, a)
		switch p.tok.kind {
		case tokComma:
			if err := p.advance(); err != nil {
				return nil, err
			}
		case tokRParen:
		default:
			return nil, p.errTok("expected ',' or ')' after an argument of %s, found %s", c.Func, p.tok.describe())
		}
	}
	closing := p.tok.off
	if err := p.checkCall(c, closing); err != nil {
		return nil, err
	}
	return c, p.advance()
}

// canonicalNumber drops leading zeros of the integer part ("007" is 7), which Rego would not read.
func canonicalNumber(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	s = strings.TrimLeft(s, "0")
	if s == "" || s[0] == '.' {
		s = "0" + s
	}
	return sign + s
}

// Type checks. Expressions are checked when a policy is created so that a policy never fails at evaluation time.

func (p *parser) wantBool(n Node, what string) error {
	if n.Type() == TypeBool {
		return nil
	}
	if path, ok := n.(*Path); ok && path.Type() == TypeString {
		f := Format(path)
		return p.errAt(n.Offset(), "%s is %s, not a condition: compare it (%s == \"...\") or test it with exists(%s)", f, TypeString, f, f)
	}
	return p.errAt(n.Offset(), "%s must be a condition, not %s", what, n.Type())
}

// comparable reports whether x and y can be compared for equality or order: the same type, or a context value
// (a string) against a number, which compares the value as a number.
func comparable(x, y Node) bool {
	tx, ty := x.Type(), y.Type()
	if tx == ty {
		return tx == TypeString || tx == TypeNumber || tx == TypeBool
	}
	_, xPath := x.(*Path)
	_, yPath := y.(*Path)
	return (xPath && tx == TypeString && ty == TypeNumber) || (yPath && ty == TypeString && tx == TypeNumber)
}

func (p *parser) checkComparison(n *Binary) error {
	x, y := n.X, n.Y
	if n.Op == OpIn {
		l, ok := y.(*List)
		if !ok {
			return p.errAt(y.Offset(), "the right side of 'in' must be a list such as [\"a\", \"b\"], not %s", y.Type())
		}
		if t := x.Type(); t != TypeString && t != TypeNumber && t != TypeBool {
			return p.errAt(x.Offset(), "the left side of 'in' must be a single value, not %s", t)
		}
		for _, e := range l.Elems {
			if !comparable(x, e) {
				return p.errAt(e.Offset(), "this list holds %s, which %s is never equal to", e.Type(), Format(x))
			}
		}
		return nil
	}
	for _, side := range []Node{x, y} {
		switch t := side.Type(); t {
		case TypeList:
			return p.errAt(side.Offset(), "a list cannot be compared with '%s'; test membership with 'in'", n.Op)
		case TypeObject:
			return p.errAt(side.Offset(), "%s is an object and cannot be compared; test it with exists(%s)", Format(side), Format(side))
		}
	}
	if !comparable(x, y) {
		for _, pair := range [][2]Node{{x, y}, {y, x}} {
			if path, ok := pair[0].(*Path); ok && pair[1].Type() == TypeBool {
				return p.errAt(pair[1].Offset(), "%s is a string: compare it with \"%s\"", Format(path), Format(pair[1]))
			}
		}
		return p.errAt(n.OpOff, "'%s' compares %s with %s", n.Op, x.Type(), y.Type())
	}
	if n.Op != OpEq && n.Op != OpNe && (x.Type() == TypeBool || y.Type() == TypeBool) {
		return p.errAt(n.OpOff, "booleans have no order: '%s' takes strings or numbers", n.Op)
	}
	return nil
}

// checkList requires lists of plain values of one type, so membership means one thing.
func (p *parser) checkList(l *List) error {
	for i, e := range l.Elems {
		switch t := e.Type(); t {
		case TypeString, TypeNumber, TypeBool:
			if t != l.Elems[0].Type() {
				return p.errAt(e.Offset(), "a list holds values of one type: this is %s, the first is %s", t, l.Elems[0].Type())
			}
		default:
			return p.errAt(e.Offset(), "element %d of the list is %s; a list holds strings, numbers or booleans", i+1, t)
		}
	}
	return nil
}

func (p *parser) checkCall(c *Call, closing int) error {
	switch c.Func {
	case "exists":
		if len(c.Args) != 1 {
			return p.errAt(closing, "exists takes one argument, got %d", len(c.Args))
		}
		if _, ok := c.Args[0].(*Path); !ok {
			return p.errAt(c.Args[0].Offset(), "exists takes a value of the context such as flow.tags.team")
		}
	case "matches":
		if len(c.Args) != 2 {
			return p.errAt(closing, "matches takes a value and a regular expression, got %d arguments", len(c.Args))
		}
		if t := c.Args[0].Type(); t != TypeString {
			return p.errAt(c.Args[0].Offset(), "matches works on strings, not %s", t)
		}
		re, ok := c.Args[1].(*String)
		if !ok {
			return p.errAt(c.Args[1].Offset(), "the regular expression of matches must be a string in quotes")
		}
		if _, err := regexp.Compile(re.Value); err != nil {
			msg := strings.TrimPrefix(err.Error(), "error parsing regexp: ")
			return p.errAt(re.Off, "invalid regular expression: %s", msg)
		}
	}
	return nil
}
