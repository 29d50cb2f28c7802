package expr

import (
	"bytes"
	"encoding/json"
	"strings"
)

// RegoHelpers are the Rego functions that compiled expressions call. A module holding compiled expressions
// includes them once. Every helper is total: a compiled expression is always true or false, never undefined and
// never an error, whatever the input holds.
const RegoHelpers = `# The value of key k in x; null when x is not an object or has no k (an artifact of no flow has flow = null).
expr_get(x, k) := object.get(x, k, null) if is_object(x) else := null

# x as a number when it is a number or a string written as one ("3", "-1.5"), else null.
expr_num(x) := x if {
	is_number(x)
} else := to_number(x) if {
	is_string(x)
	regex.match(` + "`^-?[0-9]+(\\.[0-9]+)?$`" + `, x)
} else := null

# Order holds only between two strings or two numbers; anything else (null included) is not ordered.
expr_ordered(a, b) if type_name(a) == type_name(b)

expr_lt(a, b) := a < b if expr_ordered(a, b) else := false

expr_gt(a, b) := a > b if expr_ordered(a, b) else := false

expr_le(a, b) := a <= b if expr_ordered(a, b) else := false

expr_ge(a, b) := a >= b if expr_ordered(a, b) else := false

expr_all(xs) := (false in xs) == false

expr_any(xs) := true in xs

expr_not(x) := x == false

expr_matches(s, re) := regex.match(re, s) if is_string(s) else := false
`

// Rego returns e as a Rego term that is true or false, reading the context from the Rego variables flow (an
// object, or null for an artifact of no flow) and artifact, and calling RegoHelpers.
func (e *Expression) Rego() string {
	var b strings.Builder
	regoNode(&b, e.Root)
	return b.String()
}

// RegoParams is the parameter list of a Rego function whose value is Rego(): "flow, artifact", with _ for what the
// expression does not read (Rego's strict mode rejects unused arguments).
func (e *Expression) RegoParams() string {
	flow, artifact := "_", "_"
	walk(e.Root, func(n Node) {
		if p, ok := n.(*Path); ok {
			if p.Root == "flow" {
				flow = "flow"
			} else {
				artifact = "artifact"
			}
		}
	})
	return flow + ", " + artifact
}

// walk calls f for n and every node below it.
func walk(n Node, f func(Node)) {
	f(n)
	switch n := n.(type) {
	case *Binary:
		walk(n.X, f)
		walk(n.Y, f)
	case *Not:
		walk(n.X, f)
	case *List:
		for _, e := range n.Elems {
			walk(e, f)
		}
	case *Call:
		for _, a := range n.Args {
			walk(a, f)
		}
	}
}

func regoNode(b *strings.Builder, n Node) {
	switch n := n.(type) {
	case *Bool:
		if n.Value {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case *Number:
		b.WriteString(n.Text)
	case *String:
		b.WriteString(regoString(n.Value))
	case *Path:
		regoPath(b, n)
	case *List:
		b.WriteByte('[')
		for i, x := range n.Elems {
			if i > 0 {
				b.WriteString(", ")
			}
			regoNode(b, x)
		}
		b.WriteByte(']')
	case *Not:
		b.WriteString("expr_not(")
		regoNode(b, n.X)
		b.WriteByte(')')
	case *Call:
		switch n.Func {
		case "exists":
			regoNode(b, n.Args[0])
			b.WriteString(" != null")
		case "matches":
			b.WriteString("expr_matches(")
			regoNode(b, n.Args[0])
			b.WriteString(", ")
			regoNode(b, n.Args[1])
			b.WriteByte(')')
		}
	case *Binary:
		regoBinary(b, n)
	}
}

func regoBinary(b *strings.Builder, n *Binary) {
	switch n.Op {
	case OpAnd, OpOr:
		// a and b and c is one call over a flat list: the Rego reads like the expression.
		if n.Op == OpAnd {
			b.WriteString("expr_all([")
		} else {
			b.WriteString("expr_any([")
		}
		for i, x := range flatten(n, n.Op, nil) {
			if i > 0 {
				b.WriteString(", ")
			}
			regoNode(b, x)
		}
		b.WriteString("])")
		return
	}
	x, y := n.X, n.Y
	numeric := x.Type() == TypeNumber || y.Type() == TypeNumber
	if n.Op == OpIn {
		l := y.(*List)
		numeric = x.Type() == TypeNumber || (len(l.Elems) > 0 && l.Elems[0].Type() == TypeNumber)
	}
	operand := func(m Node) {
		if _, ok := m.(*Path); ok && numeric {
			b.WriteString("expr_num(")
			regoNode(b, m)
			b.WriteByte(')')
			return
		}
		regoNode(b, m)
	}
	switch n.Op {
	case OpEq, OpNe, OpIn:
		operand(x)
		b.WriteString(" " + map[Op]string{OpEq: "==", OpNe: "!=", OpIn: "in"}[n.Op] + " ")
		if n.Op == OpIn {
			b.WriteByte('[')
			for i, e := range y.(*List).Elems {
				if i > 0 {
					b.WriteString(", ")
				}
				operand(e)
			}
			b.WriteByte(']')
			return
		}
		operand(y)
	default:
		b.WriteString(map[Op]string{OpLt: "expr_lt(", OpGt: "expr_gt(", OpLe: "expr_le(", OpGe: "expr_ge("}[n.Op])
		operand(x)
		b.WriteString(", ")
		operand(y)
		b.WriteByte(')')
	}
}

// flatten lists the operands of a chain of op: (a and b) and c gives a, b, c.
func flatten(n Node, op Op, out []Node) []Node {
	if bin, ok := n.(*Binary); ok && bin.Op == op {
		return flatten(bin.Y, op, flatten(bin.X, op, out))
	}
	return append(out, n)
}

func regoPath(b *strings.Builder, n *Path) {
	switch {
	case n.Field == "":
		b.WriteString(n.Root)
	case n.Key != "":
		b.WriteString(`expr_get(expr_get(flow, "tags"), ` + regoString(n.Key) + ")")
	default:
		b.WriteString("expr_get(" + n.Root + ", " + regoString(n.Field) + ")")
	}
}

// regoString quotes s as a Rego string literal (JSON string syntax).
func regoString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
