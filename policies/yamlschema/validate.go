package yamlschema

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"
)

var printer = message.NewPrinter(language.English)

// CompileSchema compiles the JSON Schema document doc, known by url.
func CompileSchema(url string, doc []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, v); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// Problem is one thing wrong with a document.
type Problem struct {
	Path    []string // instance path: object keys and array indexes
	Field   string   // Path as people read it: artifacts.attestations[0].type; the Hints' Root for the whole document
	Message string   // a sentence without the position
	// Line and Column locate the value (or the key, for a field that is not allowed) in the YAML; 0 when unknown.
	Line, Column int
}

// Hints adapt the wording of a Validator to one kind of document.
type Hints struct {
	// Root names the whole document in Problem.Field (for example the multipart part it arrives in).
	Root string
	// KnownFields returns what an object at loc may hold, appended to "is not a known field"
	// (e.g. "; a template has version and trail"); "" for nothing.
	KnownFields func(loc []string) string
	// AnyOf words a failed anyOf at loc where no branch accepted the value's type or value; "" for the generic
	// "must be X or Y (got Z)".
	AnyOf func(loc []string, got any) string
}

// Validator collects every problem of one document.
type Validator struct {
	doc      *Document
	hints    Hints
	problems []Problem
}

// NewValidator returns a Validator of doc.
func NewValidator(doc *Document, h Hints) *Validator {
	if doc == nil {
		doc = &Document{}
	}
	return &Validator{doc: doc, hints: h}
}

// Problems returns what was recorded, in the order it was found, each (field, message, position) once.
func (v *Validator) Problems() []Problem { return v.problems }

// Add records msg for the instance at path, at the position of its value in the YAML.
func (v *Validator) Add(path []string, msg string) {
	n := v.NodeAt(path)
	if n == nil {
		v.AddAt(path, msg, 0, 0)
		return
	}
	v.AddAt(path, msg, n.Line, n.Column)
}

// AddKey records msg for the property at path, at the position of its key in the YAML.
func (v *Validator) AddKey(path []string, msg string) {
	n := v.NodeAt(path[:len(path)-1])
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == path[len(path)-1] {
				n = n.Content[i]
				break
			}
		}
	}
	if n == nil {
		v.AddAt(path, msg, 0, 0)
		return
	}
	v.AddAt(path, msg, n.Line, n.Column)
}

// AddAt records msg for the instance at path, at a position the caller knows better (0, 0: unknown).
func (v *Validator) AddAt(path []string, msg string, line, col int) {
	p := Problem{Path: slices.Clone(path), Field: v.FieldName(path), Message: msg, Line: line, Column: col}
	for _, q := range v.problems {
		if q.Field == p.Field && q.Message == p.Message && q.Line == p.Line && q.Column == p.Column {
			return
		}
	}
	v.problems = append(v.problems, p)
}

// Fields maps each field to its problems as one text, each message followed by " (line L, column C)" (or
// " (line L)") where known and joined by "; ": the errors object of an API response.
func Fields(problems []Problem) map[string]string {
	fields := make(map[string]string, len(problems))
	for _, p := range problems {
		msg := p.Message
		switch {
		case p.Line > 0 && p.Column > 0:
			msg += fmt.Sprintf(" (line %d, column %d)", p.Line, p.Column)
		case p.Line > 0:
			msg += fmt.Sprintf(" (line %d)", p.Line)
		}
		if prev, ok := fields[p.Field]; ok {
			if prev == msg || strings.Contains(prev, msg) {
				continue
			}
			msg = prev + "; " + msg
		}
		fields[p.Field] = msg
	}
	return fields
}

// Summary is "N errors: field: text; field: text" over Fields(problems), fields sorted.
func Summary(problems []Problem) string {
	fields := Fields(problems)
	keys := slices.Sorted(maps.Keys(fields))
	var b strings.Builder
	if len(keys) == 1 {
		b.WriteString("1 error: ")
	} else {
		fmt.Fprintf(&b, "%d errors: ", len(keys))
	}
	for i, k := range keys {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(k + ": " + fields[k])
	}
	return b.String()
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// FieldName renders an instance path as trail.artifacts[0].attestations[1].name, quoting keys that are not plain
// (["a.b"]). An empty path is the whole document: the Hints' Root.
func (v *Validator) FieldName(path []string) string {
	if len(path) == 0 {
		return v.hints.Root
	}
	var b strings.Builder
	cur := v.doc.Value
	for _, seg := range path {
		switch c := cur.(type) {
		case []any:
			b.WriteString("[" + seg + "]")
			if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(c) {
				cur = c[i]
			} else {
				cur = nil
			}
			continue
		case map[string]any:
			cur = c[seg]
		default:
			cur = nil
		}
		switch {
		case !plainKey.MatchString(seg):
			b.WriteString("[" + strconv.Quote(seg) + "]")
		case b.Len() > 0:
			b.WriteString("." + seg)
		default:
			b.WriteString(seg)
		}
	}
	return b.String()
}

// NodeAt finds the YAML node of the instance at path: the value node, the key node of a key written without a
// value, or the closest existing parent for a missing one. nil for an empty document.
func (v *Validator) NodeAt(path []string) *yaml.Node {
	n := v.doc.Root
	for _, seg := range path {
		n = deref(n)
		if n == nil {
			return nil
		}
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg {
					next = n.Content[i+1]
					if next.Kind == yaml.ScalarNode && next.Tag == "!!null" && next.Line == n.Content[i].Line && next.Value == "" {
						next = n.Content[i] // `key:` with nothing after it: point at the key
					}
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		if next == nil {
			return n
		}
		n = next
	}
	return deref(n)
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// ValueAt returns the JSON value at path, nil when there is none.
func (v *Validator) ValueAt(path []string) any {
	cur := v.doc.Value
	for _, seg := range path {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// Schema validates the document's value (or value, when not nil: a normalized form of it with the same paths)
// against s and records each error at its field.
func (v *Validator) Schema(s *jsonschema.Schema, value any) {
	if value == nil {
		value = v.doc.Value
	}
	err := s.Validate(value)
	if err == nil {
		return
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		v.Add(nil, err.Error())
		return
	}
	v.walk(ve)
}

func (v *Validator) walk(e *jsonschema.ValidationError) {
	loc := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.AnyOf:
		v.anyOf(e)
		return
	case *kind.Required:
		for _, m := range k.Missing {
			v.Add(append(slices.Clone(loc), m), "is required")
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			hint := ""
			if v.hints.KnownFields != nil {
				hint = v.hints.KnownFields(loc)
			}
			v.AddKey(append(slices.Clone(loc), p), "is not a known field"+hint)
		}
	case *kind.Type:
		v.Add(loc, "must be "+typeNames(k.Want)+" (got "+article(k.Got)+")")
	case *kind.Const:
		v.Add(loc, "must be "+display(k.Want)+" (got "+display(k.Got)+")")
	default:
		if len(e.Causes) == 0 {
			v.Add(loc, e.ErrorKind.LocalizedString(printer))
		}
	}
	for _, c := range e.Causes {
		v.walk(c)
	}
}

// anyOf reports a failed anyOf. Branches whose type the value does not have are left out; when some branch had
// the value's type but failed deeper, its errors are the useful ones. When every branch failed at this very
// location, one sentence lists what is allowed.
func (v *Validator) anyOf(e *jsonschema.ValidationError) {
	loc := e.InstanceLocation
	var deeper []*jsonschema.ValidationError
	for _, c := range e.Causes {
		if !mismatchAt(c, loc) {
			deeper = append(deeper, c)
		}
	}
	if len(deeper) > 0 {
		for _, c := range deeper {
			v.walk(c)
		}
		return
	}
	got := v.ValueAt(loc)
	if v.hints.AnyOf != nil {
		if msg := v.hints.AnyOf(loc, got); msg != "" {
			v.Add(loc, msg)
			return
		}
	}
	var want []string
	for _, c := range e.Causes {
		want = append(want, alternatives(c)...)
	}
	want = slices.Compact(want)
	v.Add(loc, "must be "+OrList(want)+" (got "+article(JSONType(got))+")")
}

func unwrap(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) == 1 {
		switch e.ErrorKind.(type) {
		case *kind.Reference, *kind.Group, *kind.Schema:
			e = e.Causes[0]
			continue
		}
		break
	}
	return e
}

// mismatchAt reports whether the anyOf branch e failed only because the value at loc is not of the branch's type
// or not one of its values (as opposed to a structural error inside a value of the right type).
func mismatchAt(e *jsonschema.ValidationError, loc []string) bool {
	e = unwrap(e)
	if !slices.Equal(e.InstanceLocation, loc) {
		return false
	}
	switch e.ErrorKind.(type) {
	case *kind.Type, *kind.Const, *kind.Enum, *kind.Pattern:
		return true
	}
	return false
}

// alternatives describes what one failed anyOf branch would have accepted.
func alternatives(e *jsonschema.ValidationError) []string {
	e = unwrap(e)
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return []string{typeNames(k.Want)}
	case *kind.Const:
		return []string{display(k.Want)}
	case *kind.Enum:
		var out []string
		for _, w := range k.Want {
			out = append(out, display(w))
		}
		return out
	case *kind.Pattern:
		return []string{"a string matching " + k.Want}
	}
	var out []string
	for _, c := range e.Causes {
		out = append(out, alternatives(c)...)
	}
	return out
}

func typeNames(want []string) string {
	out := make([]string, len(want))
	for i, w := range want {
		out[i] = article(w)
	}
	return OrList(out)
}

func article(t string) string {
	switch t {
	case "object", "array":
		return "an " + t
	case "integer":
		return "an integer"
	case "null":
		return "null"
	case "":
		return "nothing"
	}
	return "a " + t
}

// OrList joins alternatives for a sentence: "a", "a or b", "a, b or c".
func OrList(s []string) string {
	switch len(s) {
	case 0:
		return "something else"
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

func display(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprint(v)
}

// JSONType names the JSON type of a decoded value: null, boolean, string, array, object or number.
func JSONType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "number"
}
