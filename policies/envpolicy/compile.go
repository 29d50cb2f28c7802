package envpolicy

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	texttemplate "text/template"

	"github.com/veritrail/veritrail/policies/envpolicy/expr"
	"github.com/veritrail/veritrail/policies/rego"
)

// Package and query of a compiled YAML policy.
const (
	RegoPackage  = "veritrail.envpolicy"
	queryResults = "data." + RegoPackage + ".results"
	// queryArtifactConditions is what the conditions that read the artifact say of each artifact in each of its
	// contexts (see evaluate).
	queryArtifactConditions = "data." + RegoPackage + ".artifact_conditions"
)

// Rule types as they appear in rule evaluations.
const (
	RuleProvenance      = "provenance"
	RuleTrailCompliance = "trail-compliance"
	RuleAttestation     = "attestation"
)

//go:embed envpolicy.rego.tmpl
var moduleSource string

var moduleTemplate = texttemplate.Must(texttemplate.New("envpolicy.rego").Parse(moduleSource))

// Compile returns the Rego module a policy runs as. For a YAML policy that is its rules compiled, each to its
// definition, its conditions and a check specialized to it, followed by the judges shared by every policy; for a
// raw Rego policy it is its own module.
func Compile(p *Policy) (string, error) { return compile(p, true) }

// compile is Compile with or without the fast paths: without them every rule goes to its judge, the reference the
// tests hold the fast paths to.
func compile(p *Policy, fast bool) (string, error) {
	if p == nil {
		return "", fmt.Errorf("compile: no policy")
	}
	if p.Kind == KindRego {
		return p.Module, nil
	}
	var funcs, sections, conds []string
	for _, d := range p.Rules.definitions() {
		if d.Type != RuleAttestation && !d.bool.Required {
			continue // a rule that is not required asks nothing
		}
		s, err := d.section(fast)
		if err != nil {
			return "", fmt.Errorf("compile %s: %w", d.ID, err)
		}
		funcs, sections = append(funcs, d.funcName()), append(sections, s)
		for _, c := range d.conditions() {
			if c.Reads("artifact") {
				conds = append(conds, c.RegoWith("t.flow"))
			}
		}
	}
	var b bytes.Buffer
	err := moduleTemplate.Execute(&b, map[string]any{"ID": p.ID, "Rules": funcs, "Sections": sections, "Helpers": expr.RegoHelpers,
		"ArtifactConditions": strings.Join(conds, ", ")})
	if err != nil {
		return "", fmt.Errorf("compile: %w", err)
	}
	return b.String(), nil
}

// section is the Rego of one rule. The evaluations of a rule that holds, or does not apply, are constants. The
// rule's function returns one of them when a fast path over the artifact's trails shows it applies (conditions
// written inline, attestations read from the trails' indexes): ignored when no trail is left by the conditions,
// satisfied when every trail meets the rule whatever its conditions say. Anything else (an artifact of no flow, a
// trail that falls short) goes to the judge of the rule's kind, which evaluates the conditions per context and
// lists what is wrong.
func (d ruleDef) section(fast bool) (string, error) {
	f := d.funcName()
	def, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# artifacts.%s: %s\n", d.ID, d.comment())
	w("%s_rule := %s\n\n", f, def)
	w("%s_ok := %s\n", f, constEvaluation(f, false, ResolutionRuleSatisfied, d.holds()))

	// conds are the conditions that leave a context out: the if that does not hold, or any exception that does.
	var conds []*expr.Expression
	var leaves func(flow string) string
	meets := "true"
	switch d.Type {
	case RuleAttestation:
		meets = d.check("t")
		if d.cond != nil {
			conds = []*expr.Expression{d.cond}
			leaves = func(flow string) string { return "(" + d.cond.RegoWith(flow) + ") == false" }
		}
	case RuleTrailCompliance:
		meets = "t.compliant"
		fallthrough
	default:
		conds = d.exceptions
		leaves = func(flow string) string {
			if len(conds) == 1 {
				return conds[0].RegoWith(flow)
			}
			terms := make([]string, len(conds))
			for i, c := range conds {
				terms[i] = c.RegoWith(flow)
			}
			return "true in [" + strings.Join(terms, ", ") + "]"
		}
	}

	// The list the judge takes: per context, whether the rule applies there.
	applies := "[true | some _ in contexts(artifact)]"
	ignored := "null"
	if len(conds) > 0 {
		ignored = f + "_ignored"
		msg := "an exception holds wherever the artifact was reported"
		if d.Type == RuleAttestation {
			msg = "the rule's if condition is false wherever the artifact was reported"
		}
		w("\n%s_ignored := %s\n", f, constEvaluation(f, true, ResolutionRuleNotApplicable, msg))
		params := [2]string{"_", "_"}
		for _, c := range conds {
			if c.Reads("flow") {
				params[0] = "flow"
			}
			if c.Reads("artifact") {
				params[1] = "artifact"
			}
		}
		appliesTerm := "(" + leaves("flow") + ") == false"
		if d.Type == RuleAttestation {
			appliesTerm = d.cond.Rego()
		}
		w("\n# Whether the rule applies in a context.\n%s_applies(%s, %s) := %s\n", f, params[0], params[1], appliesTerm)
		applies = "[" + f + "_applies(t.flow, artifact) | some t in contexts(artifact)]"
	}

	judge := fmt.Sprintf("judged(%s_ok, %s, judge_%s(artifact, %s))", f, ignored, f, applies)
	if d.Type == RuleAttestation {
		judge = fmt.Sprintf("judged(%s_ok, %s, judge_attestation(%s_rule.definition, %s, artifact, %s))",
			f, ignored, f, rego.Quote(d.wanted()), applies)
	}
	w("\n%s(artifact) := ", f)
	if fast {
		// "Every trail" is written as "no trail where not": OPA evaluates a count over a comprehension several
		// times faster than every.
		if len(conds) > 0 {
			w("%s if {\n\tcount(artifact.trails) > 0\n", ignored)
			if slices.ContainsFunc(conds, func(c *expr.Expression) bool { return c.Reads("flow") }) {
				w("\tcount([t | some t in artifact.trails; not %s]) == 0\n", leaves("t.flow"))
			} else { // the same in every context
				w("\t%s\n", leaves("null"))
			}
			w("} else := ")
		}
		w("%s_ok if {\n\tcount(artifact.trails) > 0\n", f)
		if meets != "true" {
			w("\tcount([t | some t in artifact.trails; not %s]) == 0\n", meets)
		}
		w("} else := ")
	}
	w("%s\n", judge)
	return b.String(), nil
}

// conditions are the rule's conditions: its if, or its exceptions' ifs.
func (d ruleDef) conditions() []*expr.Expression {
	if d.cond != nil {
		return []*expr.Expression{d.cond}
	}
	return d.exceptions
}

// constEvaluation is the evaluation of a rule that holds (ignored or not) with one resolution saying why.
func constEvaluation(f string, ignored bool, typ, msg string) string {
	return fmt.Sprintf(`{"rule": %s_rule, "satisfied": true, "ignored": %t, "resolutions": [{"type": %q, "message": %s, "context": {}}]}`,
		f, ignored, typ, rego.Quote(msg))
}

// check is the Rego expression that trail t has what an attestation rule asks for, read from the trail's index.
// Presence is tested with object.get, which is always defined: OPA takes "not x != null" to hold nowhere when x is
// undefined.
func (d ruleDef) check(t string) string {
	a := d.Definition.(attestationDef)
	if a.ForControl != nil {
		if a.MustBeCompliant {
			return fmt.Sprintf("%s.index.decisions[%s][%s].compliant == true", t, rego.Quote(*a.ForControl), rego.Quote(a.Name))
		}
		return fmt.Sprintf("object.get(%s.index.decisions, [%s, %s], null) != null", t, rego.Quote(*a.ForControl), rego.Quote(a.Name))
	}
	if a.MustBeCompliant {
		return fmt.Sprintf("%s.index.attestations[%s][%s] == true", t, rego.Quote(a.Name), rego.Quote(a.Type))
	}
	return fmt.Sprintf("object.get(%s.index.attestations, [%s, %s], null) != null", t, rego.Quote(a.Name), rego.Quote(a.Type))
}

// ruleDef is one rule as the API shows it: {type, id, definition}.
type ruleDef struct {
	Type       string `json:"type"`
	ID         string `json:"id"`
	Definition any    `json:"definition"`

	bool       BoolRule
	exceptions []*expr.Expression
	cond       *expr.Expression
}

type boolDef struct {
	Required   bool        `json:"required"`
	Exceptions []condition `json:"exceptions"`
}

type condition struct {
	If string `json:"if" yaml:"if"`
}

type attestationDef struct {
	Name            string  `json:"name"`
	Type            string  `json:"type"`
	If              *string `json:"if"`
	MustBeCompliant bool    `json:"must_be_compliant"`
	ForControl      *string `json:"for_control"`
}

// definitions lists every rule in policy order, with defaults filled in and expressions in canonical text.
func (r Rules) definitions() []ruleDef {
	boolRule := func(typ string, b BoolRule) ruleDef {
		d := boolDef{Required: b.Required, Exceptions: []condition{}}
		for _, e := range b.Exceptions {
			d.Exceptions = append(d.Exceptions, condition{If: e.String()})
		}
		return ruleDef{Type: typ, ID: typ, Definition: d, bool: b, exceptions: b.Exceptions}
	}
	out := []ruleDef{boolRule(RuleProvenance, r.Provenance), boolRule(RuleTrailCompliance, r.TrailCompliance)}
	for i, a := range r.Attestations {
		d := attestationDef{Name: a.Name, Type: a.Type, MustBeCompliant: a.MustBeCompliant}
		if a.If != nil {
			s := a.If.String()
			d.If = &s
		}
		if a.ForControl != "" {
			c := a.ForControl
			d.ForControl = &c
		}
		out = append(out, ruleDef{Type: RuleAttestation, ID: fmt.Sprintf("attestations[%d]", i), Definition: d, cond: a.If})
	}
	return out
}

func (d ruleDef) funcName() string {
	switch d.Type {
	case RuleProvenance:
		return "provenance"
	case RuleTrailCompliance:
		return "trail_compliance"
	}
	return "attestation_" + strings.TrimSuffix(strings.TrimPrefix(d.ID, "attestations["), "]")
}

func (d ruleDef) comment() string {
	switch def := d.Definition.(type) {
	case boolDef:
		return fmt.Sprintf("required, with %d exception(s).", len(def.Exceptions))
	case attestationDef:
		s := d.wanted()
		if def.MustBeCompliant {
			s += ", compliant."
		} else {
			s += ", compliant or not."
		}
		if def.If != nil {
			s += " Only if " + *def.If + "."
		}
		return s
	}
	return ""
}

// holds is the message of a rule that holds.
func (d ruleDef) holds() string {
	switch d.Type {
	case RuleProvenance:
		return "the artifact was reported in a flow"
	case RuleTrailCompliance:
		return "every trail that reported the artifact is compliant"
	}
	if d.Definition.(attestationDef).MustBeCompliant {
		return d.wanted() + " is there and compliant wherever the rule applies"
	}
	return d.wanted() + " is there wherever the rule applies"
}

// wanted names what an attestation rule asks for, for messages.
func (d ruleDef) wanted() string {
	a := d.Definition.(attestationDef)
	switch {
	case a.ForControl != nil && a.Name == "*":
		return fmt.Sprintf("decision for control '%s'", *a.ForControl)
	case a.ForControl != nil:
		return fmt.Sprintf("decision '%s' for control '%s'", a.Name, *a.ForControl)
	case a.Name == "*" && a.Type == "*":
		return "attestation of any name and type"
	case a.Name == "*":
		return "attestation of type " + a.Type
	case a.Type == "*":
		return fmt.Sprintf("attestation '%s' of any type", a.Name)
	}
	return fmt.Sprintf("attestation '%s' of type %s", a.Name, a.Type)
}
