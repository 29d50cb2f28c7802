// Package yamlschema reads YAML documents written by people and checks them against a JSON Schema, reporting every
// problem at its field (trail.attestations[0].type) with the line and column in the YAML where they are known.
// Flow templates and environment policies share it; what is particular to each (wording hints, rules the schema
// cannot express) stays with them.
package yamlschema

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Document is one YAML document: its node tree, for positions, and its value as JSON values, for validation.
type Document struct {
	Root  *yaml.Node // nil for an empty document (no content, comments only)
	Value any        // nil for an empty or null document; maps have string keys
}

// SyntaxError is content that is not YAML, or holds more than one document. Line and Column are 1-based, 0 when
// the YAML library gives no position.
type SyntaxError struct {
	Line, Column int
	Message      string
	// Documents is set when the content holds a second document (starting at Line), not a syntax error as such.
	Documents bool
}

// Error is the message with its position in front ("line 3: mapping values are not allowed in this context"),
// or, for a second document, "must hold a single YAML document; another one starts at line N".
func (e *SyntaxError) Error() string {
	switch {
	case e.Documents:
		return fmt.Sprintf("must hold a single YAML document; another one starts at line %d", e.Line)
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Message)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Message)
	}
	return e.Message
}

// Decode parses the single YAML document in content. Problems are a *SyntaxError.
func Decode(content []byte) (*Document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Document{}, nil
		}
		return nil, syntaxError(err, content)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxError(err, content)
	default:
		return nil, &SyntaxError{Line: extra.Line, Documents: true}
	}
	if len(doc.Content) == 0 {
		return &Document{}, nil
	}
	root := doc.Content[0]
	var v any
	if err := root.Decode(&v); err != nil {
		return nil, syntaxError(err, content)
	}
	return &Document{Root: root, Value: toJSONValue(v)}, nil
}

var linePrefix = regexp.MustCompile(`^line (\d+)(?:, column (\d+))?: `)

// syntaxError turns a YAML library error into a SyntaxError: without its "yaml: " prefix, on one line, with a line
// number wherever one can be found. (gopkg.in/yaml.v3 reports lines, not columns, and leaves out "line 1".)
func syntaxError(err error, content []byte) *SyntaxError {
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) {
		msg = strings.Join(te.Errors, "; ")
	}
	msg = strings.ReplaceAll(strings.TrimPrefix(msg, "yaml: "), "\n", " ")
	if m := linePrefix.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		col, _ := strconv.Atoi(m[2]) // 0 when absent
		return &SyntaxError{Line: line, Column: col, Message: msg[len(m[0]):]}
	}
	if strings.HasPrefix(msg, "line ") { // a position in a form we do not read: keep it in the text
		return &SyntaxError{Message: msg}
	}
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		line, col, _ := findAlias(content, m[1])
		return &SyntaxError{Line: line, Column: col, Message: msg}
	}
	for _, s := range positionless {
		if strings.Contains(msg, s) {
			return &SyntaxError{Message: msg}
		}
	}
	// The scanner and parser only leave the line out when it is the first one.
	return &SyntaxError{Line: 1, Message: msg}
}

var unknownAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// positionless are the YAML errors that carry no position at all.
var positionless = []string{"exceeded max depth", "excessive aliasing", "contains itself", "already defined"}

// findAlias returns the 1-based line and column of the first "*name" alias in content.
func findAlias(content []byte, name string) (line, col int, ok bool) {
	re := regexp.MustCompile(`\*` + regexp.QuoteMeta(name) + `(?:[\s,\]}]|$)`)
	loc := re.FindIndex(content)
	if loc == nil {
		return 0, 0, false
	}
	before := content[:loc[0]]
	line = bytes.Count(before, []byte("\n")) + 1
	col = loc[0] - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col, true
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
