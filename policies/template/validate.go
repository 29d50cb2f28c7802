package template

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"
)

var printer = message.NewPrinter(language.English)

// fieldTemplateFile is the field that YAML syntax errors and whole-document problems are reported on: the name of
// the multipart part a template arrives in.
const fieldTemplateFile = "template_file"

// ValidationError lists every problem of a template with its location. Fields maps a path such as
// "trail.attestations[0].type" (or "template_file" for YAML syntax errors and problems of the whole document) to a
// human sentence, which ends with the line and column in the YAML where they are known.
type ValidationError struct {
	Fields map[string]string
}

// Error names every field and the count of errors:
// "template_file is invalid: 2 errors: trail.attestations[0].type: ...; trail.artifacts[1].name: ...".
func (e *ValidationError) Error() string {
	keys := slices.Sorted(maps.Keys(e.Fields))
	var b strings.Builder
	b.WriteString(fieldTemplateFile + " is invalid: ")
	if len(keys) == 1 {
		b.WriteString("1 error: ")
	} else {
		fmt.Fprintf(&b, "%d errors: ", len(keys))
	}
	for i, k := range keys {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(k + ": " + e.Fields[k])
	}
	return b.String()
}

func fieldError(field, msg string) *ValidationError {
	return &ValidationError{Fields: map[string]string{field: msg}}
}

//go:embed flow-template.schema.json
var schemaJSON []byte

// flowTemplateSchema is the compiled copy of /work/shared/reference/flow-template.schema.json.
var flowTemplateSchema = sync.OnceValue(func() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		panic("policies/template: embedded schema: " + err.Error())
	}
	c := jsonschema.NewCompiler()
	const url = "https://docs.kosli.com/schemas/flow-template/v1"
	if err := c.AddResource(url, doc); err != nil {
		panic("policies/template: embedded schema: " + err.Error())
	}
	s, err := c.Compile(url)
	if err != nil {
		panic("policies/template: embedded schema: " + err.Error())
	}
	return s
})

// attestationTypes is how the schema's allowed attestation types read in messages.
const attestationTypes = "generic, junit, snyk, pull_request, jira, sonar, decision, * or custom:<type-name>"

// validator collects every problem of one document.
type validator struct {
	root   *yaml.Node // nil for an empty document
	doc    any        // the document as JSON values
	fields map[string]string
}

func newValidator(root *yaml.Node, doc any) *validator {
	return &validator{root: root, doc: doc, fields: map[string]string{}}
}

func (v *validator) err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: v.fields}
}

// add records msg for the instance at path, with the position of its value in the YAML.
func (v *validator) add(path []string, msg string) { v.addAt(path, msg, v.nodeAt(path)) }

// addKey records msg for the property at path, with the position of its key in the YAML.
func (v *validator) addKey(path []string, msg string) {
	n := v.nodeAt(path[:len(path)-1])
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == path[len(path)-1] {
				n = n.Content[i]
				break
			}
		}
	}
	v.addAt(path, msg, n)
}

func (v *validator) addAt(path []string, msg string, n *yaml.Node) {
	field := v.fieldName(path)
	if n != nil && n.Line > 0 {
		msg += fmt.Sprintf(" (line %d, column %d)", n.Line, n.Column)
	}
	if prev, ok := v.fields[field]; ok {
		if prev == msg || strings.Contains(prev, msg) {
			return
		}
		msg = prev + "; " + msg
	}
	v.fields[field] = msg
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// fieldName renders an instance path as trail.artifacts[0].attestations[1].name. An empty path is the whole
// document: template_file.
func (v *validator) fieldName(path []string) string {
	if len(path) == 0 {
		return fieldTemplateFile
	}
	var b strings.Builder
	cur := v.doc
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

// nodeAt finds the YAML node of the instance at path: the value node, the key node for a property that is not
// allowed, or the closest existing parent for a missing one.
func (v *validator) nodeAt(path []string) *yaml.Node {
	n := v.root
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

// valueAt returns the JSON value at path.
func (v *validator) valueAt(path []string) any {
	cur := v.doc
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

// checkSchema validates the document against the flow-template schema and records each error at its field.
func (v *validator) checkSchema() {
	err := flowTemplateSchema().Validate(v.doc)
	if err == nil {
		return
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		v.add(nil, err.Error())
		return
	}
	v.walk(ve)
}

func (v *validator) walk(e *jsonschema.ValidationError) {
	loc := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.AnyOf:
		v.anyOf(e)
	case *kind.Required:
		for _, m := range k.Missing {
			v.add(append(slices.Clone(loc), m), "is required")
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			v.addKey(append(slices.Clone(loc), p), "is not a known field"+knownFields(loc))
		}
	case *kind.Type:
		v.add(loc, "must be "+typeNames(k.Want)+" (got "+article(k.Got)+")")
	case *kind.Const:
		v.add(loc, "must be "+display(k.Want)+" (got "+display(k.Got)+")")
	default:
		if len(e.Causes) == 0 {
			v.add(loc, e.ErrorKind.LocalizedString(printer))
		}
	}
	if _, ok := e.ErrorKind.(*kind.AnyOf); ok {
		return
	}
	for _, c := range e.Causes {
		v.walk(c)
	}
}

// anyOf reports a failed anyOf. Branches whose type the value does not have are left out; when some branch had
// the value's type but failed deeper, its errors are the useful ones. When every branch failed at this very
// location, one sentence lists what is allowed.
func (v *validator) anyOf(e *jsonschema.ValidationError) {
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
	got := v.valueAt(loc)
	if n := len(loc); n >= 3 && loc[n-1] == "type" && loc[n-3] == "attestations" {
		if s, ok := got.(string); ok {
			v.add(loc, fmt.Sprintf("%q is not a supported attestation type; use one of %s", s, attestationTypes))
		} else {
			v.add(loc, "must be a string naming the attestation type: one of "+attestationTypes)
		}
		return
	}
	var want []string
	for _, c := range e.Causes {
		want = append(want, alternatives(c)...)
	}
	want = slices.Compact(want)
	v.add(loc, "must be "+orList(want)+" (got "+article(jsonType(got))+")")
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

func knownFields(loc []string) string {
	switch {
	case len(loc) == 0:
		return "; a template has version and trail"
	case len(loc) == 1 && loc[0] == "trail":
		return "; a trail has attestations and artifacts"
	case len(loc) >= 2 && loc[len(loc)-2] == "artifacts":
		return "; an artifact has name and attestations"
	case len(loc) >= 2 && loc[len(loc)-2] == "attestations":
		return "; an attestation has name and type"
	}
	return ""
}

func typeNames(want []string) string {
	out := make([]string, len(want))
	for i, w := range want {
		out[i] = article(w)
	}
	return orList(out)
}

func article(t string) string {
	switch t {
	case "object", "array", "integer":
		if t == "integer" {
			return "an integer"
		}
		return "an " + t
	case "null":
		return "null"
	case "":
		return "nothing"
	}
	return "a " + t
}

func orList(s []string) string {
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

func jsonType(v any) string {
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

// checkNames records the rules the schema cannot express: names are not empty, attestation names are unique
// within one level, artifact names are unique. It tolerates documents that failed the schema.
func (v *validator) checkNames() {
	doc, _ := v.doc.(map[string]any)
	trail, _ := doc["trail"].(map[string]any)
	v.uniqueNames(trail["attestations"], []string{"trail", "attestations"}, "attestation")
	v.uniqueNames(trail["artifacts"], []string{"trail", "artifacts"}, "artifact")
	arts, _ := trail["artifacts"].([]any)
	for i, a := range arts {
		m, _ := a.(map[string]any)
		v.uniqueNames(m["attestations"], []string{"trail", "artifacts", strconv.Itoa(i), "attestations"}, "attestation")
	}
}

func (v *validator) uniqueNames(list any, path []string, what string) {
	items, _ := list.([]any)
	first := map[string]int{}
	for i, it := range items {
		m, _ := it.(map[string]any)
		name, ok := m["name"].(string)
		if !ok {
			continue
		}
		at := append(slices.Clone(path), strconv.Itoa(i), "name")
		if strings.TrimSpace(name) == "" {
			v.add(at, "must not be empty")
			continue
		}
		if j, dup := first[name]; dup {
			v.add(at, fmt.Sprintf("duplicate %s name %q: already used by %s",
				what, name, v.fieldName(append(slices.Clone(path), strconv.Itoa(j)))))
			continue
		}
		first[name] = i
	}
}

// toJSONValue turns a value decoded from YAML into the JSON values the schema validator takes: maps with string
// keys, and timestamps, binary and non-finite numbers as strings.
func toJSONValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = toJSONValue(x)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[keyString(k)] = toJSONValue(x)
		}
		return m
	case []any:
		for i, x := range v {
			v[i] = toJSONValue(x)
		}
		return v
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return strconv.FormatFloat(v, 'g', -1, 64)
		}
		return v
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case []byte:
		return base64.StdEncoding.EncodeToString(v)
	case nil, bool, string, int, int64, uint64, int32, uint32, uint, float32:
		return v
	}
	return fmt.Sprint(v)
}

func keyString(k any) string {
	switch k := k.(type) {
	case string:
		return k
	case nil:
		return "null"
	case map[any]any, map[string]any, []any:
		return fmt.Sprintf("%v", k)
	}
	return fmt.Sprint(k)
}
