package envpolicy

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/veritrail/veritrail/policies/envpolicy/expr"
	"github.com/veritrail/veritrail/policies/yamlschema"
)

// MaxContentSize is the largest policy Parse and ParseRego accept.
const MaxContentSize = 1 << 20

// FieldPolicyFile is the field that YAML syntax errors and whole-document problems are reported on: the multipart
// part a policy arrives in.
const FieldPolicyFile = "policy_file"

// Kind says how a policy is written.
type Kind string

const (
	KindYAML Kind = "yaml" // the declarative rules of environment-policy.schema.json
	KindRego Kind = "rego" // a raw Rego module (see the package documentation)
)

// Policy is a parsed, validated environment policy. It does not change after Parse: its ID names its compiled
// query.
type Policy struct {
	// Name and Version label the evaluations of this policy; the caller sets them (Parse leaves them empty).
	Name    string
	Version int
	// ID identifies what the policy means: the first 32 hex characters of the SHA-256 of its canonical form (the
	// rules with defaults filled in and expressions in canonical text, or the Rego source), so versions that
	// differ only in layout share one prepared query.
	ID      string
	Kind    Kind
	Content string // as given to Parse or ParseRego

	// YAML policies.
	Schema string // _schema as written
	Rules  Rules

	// Rego policies.
	Module  string // the Rego source
	Package string // its package path, e.g. data.veritrail.envpolicy
}

// Rules are the rules of a YAML policy, defaults filled in.
type Rules struct {
	Provenance      BoolRule
	TrailCompliance BoolRule
	Attestations    []AttestationRule
}

// BoolRule is provenance or trail-compliance: a requirement that is on or off, with exceptions.
type BoolRule struct {
	Required   bool
	Exceptions []*expr.Expression // the if of each exception: the rule is ignored where one holds
}

// AttestationRule requires an attestation of the artifact (or its trail).
type AttestationRule struct {
	Name            string           // "*" matches any name
	Type            string           // generic, junit, snyk, pull_request, jira, sonar, custom:<name>, decision or *
	If              *expr.Expression // nil: the rule always applies
	MustBeCompliant bool
	ForControl      string // decisions only: the control the decision must be for; "" for none
}

// ValidationError lists every problem of a policy. Each Problem has the field (artifacts.attestations[0].if, or
// policy_file for the whole document), a sentence, and the line and column in the file where they are known (for
// an expression, the column of the problem inside it).
type ValidationError struct {
	Problems []yamlschema.Problem
}

// Error is "policy_file is invalid: 2 errors: artifacts.attestations[0].if: column 12: ... (line 9, column 21); ...".
func (e *ValidationError) Error() string {
	return FieldPolicyFile + " is invalid: " + yamlschema.Summary(e.Problems)
}

// Fields maps each field to its problems, positions included: the errors object of an API response.
func (e *ValidationError) Fields() map[string]string { return yamlschema.Fields(e.Problems) }

func fileError(msg string, line, col int) *ValidationError {
	return &ValidationError{Problems: []yamlschema.Problem{{Field: FieldPolicyFile, Message: msg, Line: line, Column: col}}}
}

// ParseOptions are what Parse needs to know about the policy's organization.
type ParseOptions struct {
	// ControlExists reports whether a control exists, for rules with for_control; nil skips the check.
	ControlExists func(id string) bool
}

//go:embed environment-policy.schema.json
var schemaJSON []byte

// policySchema is the compiled copy of /work/shared/reference/environment-policy.schema.json.
var policySchema = sync.OnceValue(func() *jsonschema.Schema {
	s, err := yamlschema.CompileSchema("https://docs.kosli.com/schemas/policy/v1", schemaJSON)
	if err != nil {
		panic("policies/envpolicy: embedded schema: " + err.Error())
	}
	return s
})

const attestationTypes = "generic, junit, snyk, pull_request, jira, sonar, decision, * or custom:<type-name>"

var hints = yamlschema.Hints{
	Root: FieldPolicyFile,
	KnownFields: func(loc []string) string {
		n := len(loc)
		switch {
		case n == 0:
			return "; a policy has _schema and artifacts"
		case n == 1 && loc[0] == "artifacts":
			return "; artifacts has provenance, trail-compliance and attestations"
		case n == 2 && loc[0] == "artifacts":
			return "; " + loc[1] + " has required and exceptions"
		case n == 3 && loc[1] == "attestations":
			return "; an attestation rule has name, type, if, must_be_compliant and for_control"
		case n == 4 && loc[2] == "exceptions":
			return "; an exception has if"
		}
		return ""
	},
	AnyOf: func(loc []string, got any) string {
		switch n := len(loc); {
		case n == 4 && loc[1] == "attestations" && loc[3] == "type":
			if s, ok := got.(string); ok {
				return fmt.Sprintf("%q is not a supported attestation type; use one of %s", s, attestationTypes)
			}
			return "must be a string naming the attestation type: one of " + attestationTypes
		case n > 0 && loc[n-1] == "if":
			return `must be an expression such as ${{ flow.name == "backend" }}, not ` + yamlschema.JSONType(got)
		}
		return ""
	},
}

// Parse validates a YAML policy against the environment-policy JSON Schema and the rules it cannot express, and
// returns the policy. Every problem is reported at once in a *ValidationError:
//   - YAML syntax, and anything the schema rejects, at its field;
//   - _schema must end with /v1, the only version;
//   - each if must be an expression that parses and is a condition (see package expr), reported at the column;
//   - an exception must have an if;
//   - for_control only with type decision, not empty, and naming a control opts.ControlExists knows.
func Parse(content []byte, opts ParseOptions) (*Policy, error) {
	if len(content) > MaxContentSize {
		return nil, fileError(fmt.Sprintf("is %d bytes; a policy may be at most %d bytes", len(content), MaxContentSize), 0, 0)
	}
	doc, err := yamlschema.Decode(content)
	if err != nil {
		var se *yamlschema.SyntaxError
		switch {
		case !errors.As(err, &se):
			return nil, fileError(err.Error(), 0, 0)
		case se.Documents:
			return nil, fileError(se.Error(), se.Line, 0)
		}
		return nil, fileError("is not valid YAML: "+se.Message, se.Line, se.Column)
	}
	if doc.Value == nil {
		doc.Value = map[string]any{}
	}
	p := &parser{v: yamlschema.NewValidator(doc, hints), lines: strings.Split(string(content), "\n"), opts: opts}
	p.v.Schema(policySchema(), wrapConditions(doc.Value))
	pol := &Policy{Kind: KindYAML, Content: string(content)}
	if root, ok := doc.Value.(map[string]any); ok {
		pol.Schema = p.schemaVersion(root["_schema"])
		pol.Rules = p.rules(root["artifacts"])
	}
	if len(p.v.Problems()) > 0 {
		return nil, &ValidationError{Problems: p.v.Problems()}
	}
	pol.ID = pol.Rules.id()
	return pol, nil
}

// wrapConditions returns a copy of a policy document in which each if written as a string (as people write
// ${{ ... }} in YAML) is the {text: ...} object of the schema's PolicyExpression, so the schema can check the rest.
func wrapConditions(doc any) any {
	root, ok := doc.(map[string]any)
	if !ok {
		return doc
	}
	arts, ok := root["artifacts"].(map[string]any)
	if !ok {
		return doc
	}
	wrap := func(item any) any {
		m, ok := item.(map[string]any)
		if !ok {
			return item
		}
		s, ok := m["if"].(string)
		if !ok {
			return item
		}
		c := maps.Clone(m)
		c["if"] = map[string]any{"text": s}
		return c
	}
	outArts := maps.Clone(arts)
	for _, k := range []string{"provenance", "trail-compliance"} {
		r, ok := arts[k].(map[string]any)
		if !ok {
			continue
		}
		exc, ok := r["exceptions"].([]any)
		if !ok {
			continue
		}
		r = maps.Clone(r)
		r["exceptions"] = mapSlice(exc, wrap)
		outArts[k] = r
	}
	if atts, ok := arts["attestations"].([]any); ok {
		outArts["attestations"] = mapSlice(atts, wrap)
	}
	out := maps.Clone(root)
	out["artifacts"] = outArts
	return out
}

func mapSlice(s []any, f func(any) any) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}

// parser builds the rules of a document, recording what the schema cannot check. It tolerates documents the
// schema rejected (their problems are recorded already) and then builds nothing that matters.
type parser struct {
	v     *yamlschema.Validator
	lines []string
	opts  ParseOptions
}

var schemaVersion = regexp.MustCompile(`/v([0-9]+)$`)

func (p *parser) schemaVersion(v any) string {
	s, ok := v.(string)
	if !ok {
		return "" // the schema said so
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		p.v.Add([]string{"_schema"}, "must be the URL of the policy schema, such as https://kosli.com/schemas/policy/environment/v1")
		return s
	}
	m := schemaVersion.FindStringSubmatch(strings.TrimSuffix(u.Path, "/"))
	switch {
	case m == nil:
		p.v.Add([]string{"_schema"}, "must end with /v{n}, the major version of the policy format, such as .../v1")
	case m[1] != "1":
		p.v.Add([]string{"_schema"}, fmt.Sprintf("version v%s is not supported; the only version is v1", m[1]))
	}
	return s
}

func (p *parser) rules(v any) Rules {
	arts, _ := v.(map[string]any)
	r := Rules{
		Provenance:      p.boolRule(arts["provenance"], "provenance"),
		TrailCompliance: p.boolRule(arts["trail-compliance"], "trail-compliance"),
		Attestations:    []AttestationRule{},
	}
	items, _ := arts["attestations"].([]any)
	for i, it := range items {
		r.Attestations = append(r.Attestations, p.attestationRule(it, []string{"artifacts", "attestations", strconv.Itoa(i)}))
	}
	return r
}

func (p *parser) boolRule(v any, key string) BoolRule {
	m, _ := v.(map[string]any)
	r := BoolRule{Exceptions: []*expr.Expression{}}
	r.Required, _ = m["required"].(bool)
	items, _ := m["exceptions"].([]any)
	for i, it := range items {
		path := []string{"artifacts", key, "exceptions", strconv.Itoa(i)}
		e, _ := it.(map[string]any)
		if e == nil || e["if"] == nil {
			if e != nil { // not an object: the schema said so
				p.v.Add(path, "an exception needs an if: the condition under which the rule does not apply")
			}
			continue
		}
		if c := p.condition(append(path, "if"), e["if"]); c != nil {
			r.Exceptions = append(r.Exceptions, c)
		}
	}
	return r
}

func (p *parser) attestationRule(v any, path []string) AttestationRule {
	m, _ := v.(map[string]any)
	r := AttestationRule{Name: "*", MustBeCompliant: true}
	if s, ok := m["name"].(string); ok {
		r.Name = s
		if strings.TrimSpace(s) == "" {
			p.v.Add(append(slices.Clone(path), "name"), `must not be empty; "*" matches any name`)
		}
	}
	r.Type, _ = m["type"].(string)
	if b, ok := m["must_be_compliant"].(bool); ok {
		r.MustBeCompliant = b
	}
	if m["if"] != nil {
		r.If = p.condition(append(slices.Clone(path), "if"), m["if"])
	}
	if c, ok := m["for_control"].(string); ok {
		at := append(slices.Clone(path), "for_control")
		switch {
		case r.Type != "decision":
			p.v.Add(at, fmt.Sprintf("is only valid with type: decision (this rule has type %q)", r.Type))
		case strings.TrimSpace(c) == "":
			p.v.Add(at, "must name a control")
		case p.opts.ControlExists != nil && !p.opts.ControlExists(c):
			p.v.Add(at, fmt.Sprintf("control '%s' does not exist", c))
		}
		r.ForControl = c
	}
	return r
}

// condition parses an if, given as a string or as {text: ...}. A problem with the expression is recorded at the
// line and column of the problem inside the YAML where that can be worked out.
func (p *parser) condition(path []string, v any) *expr.Expression {
	text, ok := v.(string)
	node := p.v.NodeAt(path)
	if !ok {
		m, isMap := v.(map[string]any)
		if text, ok = m["text"].(string); !isMap || !ok {
			return nil // the schema said so
		}
		node = p.v.NodeAt(append(slices.Clone(path), "text"))
	}
	e, err := expr.Parse(text)
	if err == nil {
		return e
	}
	var pe *expr.Error
	if !errors.As(err, &pe) {
		p.v.Add(path, err.Error())
		return nil
	}
	line, col := p.position(node, text, pe.Offset)
	p.v.AddAt(path, err.Error(), line, col)
	return nil
}

// position is the line and column in the file of byte off of a scalar's value: exact when the scalar is on one
// line and its source text holds the value as written up to off (no escapes before it), else the scalar's own.
func (p *parser) position(n *yaml.Node, value string, off int) (int, int) {
	if n == nil || n.Line <= 0 {
		return 0, 0
	}
	if n.Kind != yaml.ScalarNode || strings.Contains(value, "\n") || n.Line > len(p.lines) {
		return n.Line, n.Column
	}
	line := []rune(p.lines[n.Line-1])
	start := n.Column - 1 // yaml.v3 counts columns in characters
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		start++
	}
	prefix := []rune(value[:off])
	if start < 0 || start+len(prefix) > len(line) || string(line[start:start+len(prefix)]) != value[:off] {
		return n.Line, n.Column
	}
	return n.Line, start + len(prefix) + 1
}

// ParseRego validates a raw Rego policy: one Rego v1 module that compiles under the pinned capabilities (no
// network, runtime, clock or randomness) and defines rule_evaluations. Problems are a *ValidationError on
// policy_file with the line and column OPA gives.
func ParseRego(content []byte) (*Policy, error) {
	if len(content) > MaxContentSize {
		return nil, fileError(fmt.Sprintf("is %d bytes; a policy may be at most %d bytes", len(content), MaxContentSize), 0, 0)
	}
	if !utf8.Valid(content) {
		return nil, fileError("is not valid UTF-8", 0, 0)
	}
	src := string(content)
	pkg, err := checkRego(src)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte("rego\x00" + src))
	return &Policy{ID: hex.EncodeToString(sum[:])[:32], Kind: KindRego, Content: src, Module: src, Package: pkg}, nil
}

// id is the hex SHA-256 (first 32 characters) of the canonical JSON of the rules.
func (r Rules) id() string {
	b, err := json.Marshal(struct {
		Kind  Kind `json:"kind"`
		Rules any  `json:"rules"`
	}{KindYAML, r.definitions()})
	if err != nil { // cannot happen: strings, booleans and slices
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:32]
}

// Canonical returns the policy in its canonical form: for a YAML policy, YAML with every default written out,
// expressions in canonical text and nothing else (parsing it gives a policy with the same ID); for a raw Rego
// policy, its module.
func (p *Policy) Canonical() []byte {
	if p.Kind == KindRego {
		return []byte(p.Module)
	}
	type boolRule struct {
		Required   bool        `yaml:"required"`
		Exceptions []condition `yaml:"exceptions"`
	}
	type attestationRule struct {
		Name            string  `yaml:"name"`
		Type            string  `yaml:"type"`
		If              *string `yaml:"if,omitempty"`
		MustBeCompliant bool    `yaml:"must_be_compliant"`
		ForControl      *string `yaml:"for_control,omitempty"`
	}
	doc := struct {
		Schema    string `yaml:"_schema"`
		Artifacts struct {
			Provenance      boolRule          `yaml:"provenance"`
			TrailCompliance boolRule          `yaml:"trail-compliance"`
			Attestations    []attestationRule `yaml:"attestations"`
		} `yaml:"artifacts"`
	}{Schema: p.Schema}
	for _, d := range p.Rules.definitions() {
		switch def := d.Definition.(type) {
		case boolDef:
			r := boolRule{def.Required, def.Exceptions}
			if d.Type == RuleProvenance {
				doc.Artifacts.Provenance = r
			} else {
				doc.Artifacts.TrailCompliance = r
			}
		case attestationDef:
			doc.Artifacts.Attestations = append(doc.Artifacts.Attestations, attestationRule(def))
		}
	}
	if doc.Artifacts.Attestations == nil {
		doc.Artifacts.Attestations = []attestationRule{}
	}
	out, err := yaml.Marshal(doc)
	if err != nil { // cannot happen: strings, booleans and slices
		panic(err)
	}
	return out
}
