// Package customtype compiles user-defined custom attestation types (a JSON
// Schema plus jq rules) and applies them to the attestation_data of custom
// attestations.
package customtype

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/itchyny/gojq"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxRuleDuration caps each rule even when the caller's context has no
// deadline, so one pathological rule cannot hold a request or worker forever.
const maxRuleDuration = 2 * time.Second

// The schema is registered under an in-memory URL. It is
// never fetched: the loader refuses every URL that is not a bundled metaschema.
const (
	schemaBase = "mem:///"
	schemaURL  = schemaBase + "type_schema.json"
)

// Type is a compiled custom attestation type version; safe for concurrent use.
type Type struct {
	schema *jsonschema.Schema
	rules  []rule
}

type rule struct {
	text string
	code *gojq.Code
}

// RuleResult is the outcome of one jq rule.
type RuleResult struct {
	Rule   string `json:"rule"`
	Passed bool   `json:"passed"`
	// Error explains why the rule could not be evaluated to a boolean; empty
	// when the rule produced true or false.
	Error string `json:"error,omitempty"`
}

// DefinitionError reports an invalid type definition, keyed by request field
// ("type_schema", "evaluator.rules[1]") so the API can answer 400 naming it.
type DefinitionError struct {
	Fields map[string]string
}

func (e *DefinitionError) Error() string {
	return "invalid custom attestation type: " + joinFields(e.Fields)
}

// DataError reports attestation_data that does not satisfy the type schema,
// keyed by location, e.g. "attestation_data.age" or "attestation_data.items[0]".
type DataError struct {
	Fields map[string]string
}

func (e *DataError) Error() string {
	return "attestation_data does not match the type schema: " + joinFields(e.Fields)
}

func joinFields(fields map[string]string) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + fields[k]
	}
	return strings.Join(parts, "; ")
}

// Compile checks the schema (valid JSON and a valid JSON Schema; draft 2020-12
// unless $schema names another draft; no remote $ref loading) and parses and
// compiles each jq rule. All problems are reported together in a
// *DefinitionError.
func Compile(schema []byte, rules []string) (*Type, error) {
	fields := map[string]string{}
	sch, msg := compileSchema(schema)
	if msg != "" {
		fields["type_schema"] = msg
	}
	compiled := make([]rule, 0, len(rules))
	for i, text := range rules {
		code, msg := compileRule(text)
		if msg != "" {
			fields[fmt.Sprintf("evaluator.rules[%d]", i)] = msg
			continue
		}
		compiled = append(compiled, rule{text: text, code: code})
	}
	if len(fields) > 0 {
		return nil, &DefinitionError{Fields: fields}
	}
	return &Type{schema: sch, rules: compiled}, nil
}

// refuseLoader replaces the library default, which would read local files:
// a user-supplied schema must not make the server touch disk or network.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, errors.New("only references within type_schema are supported")
}

func compileSchema(b []byte) (*jsonschema.Schema, string) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, "is required"
	}
	// UnmarshalJSON keeps numbers as json.Number and rejects trailing data.
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, "is not valid JSON: " + err.Error()
	}
	c := jsonschema.NewCompiler()
	// Pin the default so a library upgrade cannot silently change semantics.
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, "is not a valid JSON Schema: " + err.Error()
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, "is not a valid JSON Schema: " + schemaErrorMessage(err)
	}
	return sch, ""
}

func schemaErrorMessage(err error) string {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			return metaschemaViolations(ve)
		}
	}
	var lue *jsonschema.LoadURLError
	if errors.As(err, &lue) {
		// Relative refs resolve against our internal URL; show them as written.
		return fmt.Sprintf("cannot resolve %q: only references within type_schema are supported",
			strings.TrimPrefix(lue.URL, schemaBase))
	}
	// Other library errors name our internal URL; name the field instead.
	return strings.ReplaceAll(err.Error(), schemaURL, "type_schema")
}

func compileRule(text string) (*gojq.Code, string) {
	if strings.TrimSpace(text) == "" {
		return nil, "must not be empty"
	}
	q, err := gojq.Parse(text)
	if err != nil {
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Sprintf("invalid jq syntax at offset %d: %s", pe.Offset, pe.Error())
		}
		return nil, "invalid jq syntax: " + err.Error()
	}
	// No environ, module or input options: rules see only attestation_data
	// ($ENV is empty, import and input are rejected at compile time).
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, "invalid jq rule: " + err.Error()
	}
	return code, ""
}

// Check validates data, as decoded by encoding/json with or without UseNumber,
// against the schema. A violation is returned as a *DataError.
func (t *Type) Check(data any) error {
	v, err := normalize(data, false)
	if err != nil {
		var ne *normalizeError
		if errors.As(err, &ne) {
			return &DataError{Fields: map[string]string{ne.path: ne.msg}}
		}
		return &DataError{Fields: map[string]string{rootPath: err.Error()}}
	}
	if err := t.schema.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return &DataError{Fields: dataViolations(ve, v)}
		}
		return &DataError{Fields: map[string]string{rootPath: err.Error()}}
	}
	return nil
}

// Evaluate runs every rule against data (which should have passed Check) and
// reports compliant only if every rule produced true. Rules that error, time
// out, or produce a non-boolean or no output fail rather than erroring the
// call, because they are user-authored. Only the first output of each rule is
// consumed.
func (t *Type) Evaluate(ctx context.Context, data any) (compliant bool, results []RuleResult) {
	results = make([]RuleResult, len(t.rules))
	v, nerr := normalize(data, true)
	compliant = true
	for i, r := range t.rules {
		res := RuleResult{Rule: r.text}
		if nerr != nil {
			res.Error = "attestation_data is not valid JSON: " + nerr.Error()
		} else {
			res.Passed, res.Error = r.run(ctx, v)
		}
		compliant = compliant && res.Passed
		results[i] = res
	}
	return compliant, results
}

func (r rule) run(ctx context.Context, v any) (passed bool, errText string) {
	ctx, cancel := context.WithTimeout(ctx, maxRuleDuration)
	defer cancel()
	// A gojq bug triggered by user input must fail the rule, not crash a
	// worker that has no HTTP recovery middleware around it.
	defer func() {
		if p := recover(); p != nil {
			passed, errText = false, fmt.Sprintf("rule evaluation failed: %v", p)
		}
	}()
	out, ok := r.code.RunWithContext(ctx, v).Next()
	if !ok {
		return false, "rule produced no output; it must produce true or false"
	}
	switch o := out.(type) {
	case bool:
		return o, ""
	case error:
		switch {
		case errors.Is(o, context.DeadlineExceeded):
			return false, "rule evaluation timed out"
		case errors.Is(o, context.Canceled):
			return false, "rule evaluation was cancelled"
		}
		return false, o.Error()
	default:
		return false, fmt.Sprintf("rule must produce true or false, got %s: %s", gojq.TypeOf(o), gojq.Preview(o))
	}
}
