package expr

import (
	"strconv"
	"strings"
)

// Node is a node of an expression's syntax tree. Offset is the byte offset of the node's first character in the
// text given to Parse.
type Node interface {
	Offset() int
	// Type is the node's static type: expressions are checked when they are parsed, not when they run.
	Type() Type
	write(b *strings.Builder, min int)
}

// Type is the static type of a node.
type Type int

const (
	TypeBool   Type = iota + 1
	TypeString      // names, fingerprints and tag values: strings, or null when absent
	TypeNumber
	TypeList
	TypeObject // flow, flow.tags, artifact: only exists() takes them
)

func (t Type) String() string {
	switch t {
	case TypeBool:
		return "a boolean"
	case TypeString:
		return "a string"
	case TypeNumber:
		return "a number"
	case TypeList:
		return "a list"
	case TypeObject:
		return "an object"
	}
	return "nothing"
}

// Op is a binary operator.
type Op string

const (
	OpOr  Op = "or"
	OpAnd Op = "and"
	OpEq  Op = "=="
	OpNe  Op = "!="
	OpLt  Op = "<"
	OpGt  Op = ">"
	OpLe  Op = "<="
	OpGe  Op = ">="
	OpIn  Op = "in"
)

// Precedence, loosest first: or, and, not, comparisons and in. Comparisons do not chain.
const (
	precOr = iota + 1
	precAnd
	precNot
	precCmp
	precPrimary
)

func (o Op) prec() int {
	switch o {
	case OpOr:
		return precOr
	case OpAnd:
		return precAnd
	}
	return precCmp
}

// Binary is X Op Y.
type Binary struct {
	Op    Op
	X, Y  Node
	OpOff int // offset of the operator
}

// Not is not X.
type Not struct {
	X   Node
	Off int
}

// Path reads a value of the context: flow, flow.name, flow.tags, flow.tags.<key>, artifact, artifact.name or
// artifact.fingerprint. Key is set for a tag.
type Path struct {
	Root  string // flow or artifact
	Field string // name, tags, fingerprint, or "" for the root itself
	Key   string // the tag key of flow.tags.<key>
	Off   int
}

// String is a string literal.
type String struct {
	Value string
	Off   int
}

// Number is a number literal, kept as written.
type Number struct {
	Text string
	Off  int
}

// Bool is true or false.
type Bool struct {
	Value bool
	Off   int
}

// List is a list literal: [a, b].
type List struct {
	Elems []Node
	Off   int
}

// Call is exists(path) or matches(value, "regex").
type Call struct {
	Func string
	Args []Node
	Off  int
}

func (n *Binary) Offset() int { return n.X.Offset() }
func (n *Not) Offset() int    { return n.Off }
func (n *Path) Offset() int   { return n.Off }
func (n *String) Offset() int { return n.Off }
func (n *Number) Offset() int { return n.Off }
func (n *Bool) Offset() int   { return n.Off }
func (n *List) Offset() int   { return n.Off }
func (n *Call) Offset() int   { return n.Off }

func (n *Binary) Type() Type { return TypeBool }
func (n *Not) Type() Type    { return TypeBool }
func (n *String) Type() Type { return TypeString }
func (n *Number) Type() Type { return TypeNumber }
func (n *Bool) Type() Type   { return TypeBool }
func (n *List) Type() Type   { return TypeList }
func (n *Call) Type() Type   { return TypeBool }
func (n *Path) Type() Type {
	if n.Field == "" || (n.Field == "tags" && !n.hasKey()) {
		return TypeObject
	}
	return TypeString
}

func (n *Path) hasKey() bool { return n.Field == "tags" && n.Key != "" }

// Format returns the canonical text of n: single spaces around operators, double-quoted strings, parentheses only
// where precedence needs them. Parsing it gives the same tree.
func Format(n Node) string {
	var b strings.Builder
	n.write(&b, 0)
	return b.String()
}

// write appends the text of a node that needs parentheses when its precedence is below min.
func (n *Binary) write(b *strings.Builder, min int) {
	p := n.Op.prec()
	open := p < min
	if open {
		b.WriteByte('(')
	}
	// and/or associate to the left: the same operator on the right keeps its parentheses. Comparisons take
	// primaries only.
	left, right := p, p+1
	if p == precCmp {
		left, right = precPrimary, precPrimary
	}
	n.X.write(b, left)
	b.WriteString(" " + string(n.Op) + " ")
	n.Y.write(b, right)
	if open {
		b.WriteByte(')')
	}
}

func (n *Not) write(b *strings.Builder, min int) {
	open := precNot < min
	if open {
		b.WriteByte('(')
	}
	b.WriteString("not ")
	n.X.write(b, precNot)
	if open {
		b.WriteByte(')')
	}
}

func (n *Path) write(b *strings.Builder, _ int) {
	b.WriteString(n.Root)
	if n.Field != "" {
		b.WriteString("." + n.Field)
	}
	if n.hasKey() {
		if plainTagKey(n.Key) {
			b.WriteString("." + n.Key)
		} else {
			b.WriteString("[" + quote(n.Key) + "]")
		}
	}
}

// plainTagKey reports whether key can be written after flow.tags. as it is.
func plainTagKey(key string) bool {
	if key == "" || !isIdentPart(key[0]) {
		return false
	}
	for i := 0; i < len(key); i++ {
		if !isIdentPart(key[i]) {
			return false
		}
	}
	return !strings.HasPrefix(key, ".") && !strings.HasSuffix(key, ".") && !strings.Contains(key, "..")
}

func (n *String) write(b *strings.Builder, _ int) { b.WriteString(quote(n.Value)) }
func (n *Number) write(b *strings.Builder, _ int) { b.WriteString(n.Text) }
func (n *Bool) write(b *strings.Builder, _ int)   { b.WriteString(strconv.FormatBool(n.Value)) }

func (n *List) write(b *strings.Builder, _ int) {
	b.WriteByte('[')
	for i, e := range n.Elems {
		if i > 0 {
			b.WriteString(", ")
		}
		e.write(b, 0)
	}
	b.WriteByte(']')
}

func (n *Call) write(b *strings.Builder, _ int) {
	b.WriteString(n.Func + "(")
	for i, a := range n.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		a.write(b, 0)
	}
	b.WriteByte(')')
}

// quote writes s in double quotes, escaping only the quote and the backslash (the language's only escapes).
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
