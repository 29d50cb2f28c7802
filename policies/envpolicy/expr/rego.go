package expr

import (
	"strings"

	"github.com/veritrail/veritrail/policies/rego"
)

// RegoHelpers are the Rego functions that compiled expressions call. A module holding compiled expressions
// includes them once. Every helper is total: a compiled expression is always true or false, never undefined and
// never an error, whatever the input holds.
const RegoHelpers = `# x as a number when it is a number or a string written as one ("3", "-1.5"), else null.
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

expr_matches(s, re) := regex.match(re, s) if is_string(s) else := false
`

// Rego returns e as a Rego term that is true or false, calling RegoHelpers and reading the context from two Rego
// variables: flow, an object {name, tags} whose name is null for an artifact of no flow (and tags then {}), and
// artifact, an object whose name and fingerprint are strings. A missing tag reads as null. Logic is written with
// builtins only (no calls of Rego functions), so a condition costs little inside a rule body.
func (e *Expression) Rego() string { return e.RegoWith("flow") }

// RegoWith is Rego reading the flow from the Rego reference flow (such as t.flow) instead of the variable flow.
func (e *Expression) RegoWith(flow string) string {
	b := regoWriter{flow: flow}
	b.node(e.Root)
	return b.String()
}

type regoWriter struct {
	strings.Builder
	flow string
}

// RegoParams is the parameter list of a Rego function whose value is Rego(): "flow, artifact", with _ for what the
// expression does not read (Rego's strict mode rejects unused arguments).
func (e *Expression) RegoParams() string {
	flow, artifact := "_", "_"
	if e.Reads("flow") {
		flow = "flow"
	}
	if e.Reads("artifact") {
		artifact = "artifact"
	}
	return flow + ", " + artifact
}

// Reads reports whether e reads the context root (flow or artifact).
func (e *Expression) Reads(root string) bool {
	reads := false
	walk(e.Root, func(n Node) {
		if p, ok := n.(*Path); ok && p.Root == root {
			reads = true
		}
	})
	return reads
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

func (b *regoWriter) node(n Node) {
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
		b.WriteString(rego.Quote(n.Value))
	case *Path:
		b.path(n)
	case *List:
		b.WriteByte('[')
		for i, x := range n.Elems {
			if i > 0 {
				b.WriteString(", ")
			}
			b.node(x)
		}
		b.WriteByte(']')
	case *Not:
		b.WriteByte('(')
		b.node(n.X)
		b.WriteString(") == false")
	case *Call:
		switch n.Func {
		case "exists":
			if p := n.Args[0].(*Path); p.Root == "flow" && p.Key == "" {
				b.WriteString(b.flow + ".name != null") // flow and flow.tags exist together, when there is a flow
				return
			}
			b.node(n.Args[0])
			b.WriteString(" != null")
		case "matches":
			if p, ok := n.Args[0].(*Path); ok && p.Root == "artifact" {
				// The artifact's name and fingerprint are always strings: the builtin needs no guard.
				b.WriteString("regex.match(")
				b.node(n.Args[1])
				b.WriteString(", ")
				b.node(n.Args[0])
				b.WriteByte(')')
				return
			}
			b.WriteString("expr_matches(")
			b.node(n.Args[0])
			b.WriteString(", ")
			b.node(n.Args[1])
			b.WriteByte(')')
		}
	case *Binary:
		b.binary(n)
	}
}

func (b *regoWriter) binary(n *Binary) {
	switch n.Op {
	case OpAnd, OpOr:
		// a and b and c is one test over a flat list: no false in it (and), or a true in it (or).
		if n.Op == OpAnd {
			b.WriteString("(false in [")
		} else {
			b.WriteString("(true in [")
		}
		for i, x := range flatten(n, n.Op, nil) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.node(x)
		}
		if n.Op == OpAnd {
			b.WriteString("]) == false")
		} else {
			b.WriteString("])")
		}
		return
	}
	x, y := n.X, n.Y
	numeric := x.Type() == TypeNumber || y.Type() == TypeNumber
	if n.Op == OpIn {
		l := y.(*List)
		numeric = x.Type() == TypeNumber || (len(l.Elems) > 0 && l.Elems[0].Type() == TypeNumber)
	}
	operand := func(m Node) {
		switch m := m.(type) {
		case *Path:
			if numeric {
				b.WriteString("expr_num(")
				b.node(m)
				b.WriteByte(')')
				return
			}
		case *Binary, *Not, *Call: // conditions written with an operator: (a == b) == true
			b.WriteByte('(')
			b.node(m)
			b.WriteByte(')')
			return
		}
		b.node(m)
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

func (b *regoWriter) path(n *Path) {
	switch {
	case n.Field == "" && n.Root == "flow":
		b.WriteString(b.flow)
	case n.Field == "":
		b.WriteString(n.Root)
	case n.Root == "flow" && n.Key != "":
		b.WriteString("object.get(" + b.flow + ".tags, " + rego.Quote(n.Key) + ", null)")
	case n.Root == "flow":
		b.WriteString(b.flow + "." + n.Field)
	default:
		b.WriteString(n.Root + "." + n.Field)
	}
}
