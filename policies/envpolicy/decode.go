package envpolicy

import (
	"encoding/json"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// decoder reads the rule evaluations a policy gives, the compiled ones and those of raw Rego alike, and checks
// their shape: a raw Rego policy that returns something else is an error, never a pass.
type decoder struct {
	// rules and evaluations hold what was decoded so far by hash: every artifact of a batch names the same few
	// rules, and a rule that holds gives the same evaluation for most of them.
	rules       map[int][]decoded[Rule]
	evaluations map[int][]decoded[RuleEvaluation]
	// arrays are whole results: most artifacts of a batch get one of a few.
	arrays map[int][]decoded[[]RuleEvaluation]
}

type decoded[T any] struct {
	v   ast.Value
	out T
}

func newDecoder() *decoder {
	return &decoder{rules: map[int][]decoded[Rule]{}, evaluations: map[int][]decoded[RuleEvaluation]{},
		arrays: map[int][]decoded[[]RuleEvaluation]{}}
}

// memo looks v up among what was decoded already: by identity first (OPA hands out a constant's value itself),
// then by value.
func memo[T any](m map[int][]decoded[T], v ast.Value) (T, int, bool) {
	h := v.Hash()
	for _, c := range m[h] {
		if c.v == v || c.v.Compare(v) == 0 {
			return c.out, h, true
		}
	}
	var zero T
	return zero, h, false
}

var (
	kRule        = ast.InternedTerm("rule")
	kSatisfied   = ast.InternedTerm("satisfied")
	kIgnored     = ast.InternedTerm("ignored")
	kResolutions = ast.InternedTerm("resolutions")
	kMessage     = ast.InternedTerm("message")
	kContext     = ast.InternedTerm("context")
	kDefinition  = ast.InternedTerm("definition")
)

// contextFields are the keys of a resolution's context the API shows.
var contextFields = []struct {
	key *ast.Term
	get func(*ResolutionContext) *string
}{
	{ast.InternedTerm("flow_name"), func(c *ResolutionContext) *string { return &c.FlowName }},
	{ast.InternedTerm("trail_name"), func(c *ResolutionContext) *string { return &c.TrailName }},
	{ast.InternedTerm("for_control"), func(c *ResolutionContext) *string { return &c.ForControl }},
	{ast.InternedTerm("attestation_name"), func(c *ResolutionContext) *string { return &c.AttestationName }},
	{ast.InternedTerm("attestation_type"), func(c *ResolutionContext) *string { return &c.AttestationType }},
}

// ruleEvaluations decodes an array (or set) of rule evaluations. Evaluations equal to one decoded before share its
// slices, and so does a whole result equal to one decoded before (the same slice): callers do not modify them, and
// may keep what they derive from a result by its first element's address. Errors start with the path below
// rule_evaluations ("[2].satisfied: want a boolean").
func (d *decoder) ruleEvaluations(t *ast.Term) ([]RuleEvaluation, error) {
	known, h, ok := memo(d.arrays, t.Value)
	if ok {
		return known, nil
	}
	out, err := d.decodeRuleEvaluations(t)
	if err != nil {
		return nil, err
	}
	d.arrays[h] = append(d.arrays[h], decoded[[]RuleEvaluation]{t.Value, out})
	return out, nil
}

func (d *decoder) decodeRuleEvaluations(t *ast.Term) ([]RuleEvaluation, error) {
	var elems []*ast.Term
	switch v := t.Value.(type) {
	case ast.Null:
		return nil, fmt.Errorf(" is undefined")
	case *ast.Array:
		elems = make([]*ast.Term, 0, v.Len())
		v.Foreach(func(e *ast.Term) { elems = append(elems, e) })
	case ast.Set:
		elems = make([]*ast.Term, 0, v.Len())
		v.Sorted().Foreach(func(e *ast.Term) { elems = append(elems, e) })
	default:
		return nil, fmt.Errorf(": want an array of rule evaluations, got %s", ast.ValueName(t.Value))
	}
	out := make([]RuleEvaluation, len(elems))
	for i, e := range elems {
		if err := d.ruleEvaluation(e, &out[i]); err != nil {
			return nil, fmt.Errorf("[%d]%w", i, err)
		}
	}
	return out, nil
}

func (d *decoder) ruleEvaluation(t *ast.Term, r *RuleEvaluation) error {
	known, h, ok := memo(d.evaluations, t.Value)
	if ok {
		*r = known
		return nil
	}
	if err := d.decodeRuleEvaluation(t, r); err != nil {
		return err
	}
	d.evaluations[h] = append(d.evaluations[h], decoded[RuleEvaluation]{t.Value, *r})
	return nil
}

func (d *decoder) decodeRuleEvaluation(t *ast.Term, r *RuleEvaluation) error {
	o, ok := t.Value.(ast.Object)
	if !ok {
		return fmt.Errorf(": want an object {rule, satisfied, ignored, resolutions}, got %s", ast.ValueName(t.Value))
	}
	var err error
	if r.Rule, err = d.rule(o.Get(kRule)); err != nil {
		return fmt.Errorf(".rule%w", err)
	}
	if r.Satisfied, err = boolField(o, kSatisfied, false, true); err != nil {
		return err
	}
	if r.Ignored, err = boolField(o, kIgnored, false, false); err != nil {
		return err
	}
	res := o.Get(kResolutions)
	if res == nil {
		r.Resolutions = []Resolution{}
		return nil
	}
	arr, ok := res.Value.(*ast.Array)
	if !ok {
		return fmt.Errorf(".resolutions: want an array, got %s", ast.ValueName(res.Value))
	}
	r.Resolutions = make([]Resolution, arr.Len())
	for i := range arr.Len() {
		if err := resolution(arr.Elem(i), &r.Resolutions[i]); err != nil {
			return fmt.Errorf(".resolutions[%d]%w", i, err)
		}
	}
	return nil
}

func (d *decoder) rule(t *ast.Term) (Rule, error) {
	if t == nil {
		return Rule{}, fmt.Errorf(": is required")
	}
	known, h, ok := memo(d.rules, t.Value)
	if ok {
		return known, nil
	}
	o, ok := t.Value.(ast.Object)
	if !ok {
		return Rule{}, fmt.Errorf(": want an object {type, id, definition}, got %s", ast.ValueName(t.Value))
	}
	var r Rule
	var err error
	if r.Type, err = stringField(o, kType, true); err != nil {
		return Rule{}, err
	}
	if r.ID, err = stringField(o, kID, false); err != nil {
		return Rule{}, err
	}
	r.Definition = json.RawMessage("{}")
	if def := o.Get(kDefinition); def != nil {
		v, err := ast.JSON(def.Value)
		if err != nil {
			return Rule{}, fmt.Errorf(".definition: %w", err)
		}
		if r.Definition, err = json.Marshal(v); err != nil {
			return Rule{}, fmt.Errorf(".definition: %w", err)
		}
	}
	d.rules[h] = append(d.rules[h], decoded[Rule]{t.Value, r})
	return r, nil
}

func resolution(t *ast.Term, r *Resolution) error {
	o, ok := t.Value.(ast.Object)
	if !ok {
		return fmt.Errorf(": want an object {type, message, context}, got %s", ast.ValueName(t.Value))
	}
	var err error
	if r.Type, err = stringField(o, kType, true); err != nil {
		return err
	}
	if r.Message, err = stringField(o, kMessage, false); err != nil {
		return err
	}
	c := o.Get(kContext)
	if c == nil {
		return nil
	}
	co, ok := c.Value.(ast.Object)
	if !ok {
		return fmt.Errorf(".context: want an object, got %s", ast.ValueName(c.Value))
	}
	for _, f := range contextFields {
		s, err := stringField(co, f.key, false)
		if err != nil {
			return fmt.Errorf(".context%w", err)
		}
		*f.get(&r.Context) = s
	}
	return nil
}

// stringField reads a string; null and absence are "" unless required.
func stringField(o ast.Object, k *ast.Term, required bool) (string, error) {
	t := o.Get(k)
	if _, null := termValue(t).(ast.Null); t == nil || null {
		if required {
			return "", fmt.Errorf(".%s: is required", string(k.Value.(ast.String)))
		}
		return "", nil
	}
	s, ok := t.Value.(ast.String)
	if !ok {
		return "", fmt.Errorf(".%s: want a string, got %s", string(k.Value.(ast.String)), ast.ValueName(t.Value))
	}
	return string(s), nil
}

func boolField(o ast.Object, k *ast.Term, def, required bool) (bool, error) {
	t := o.Get(k)
	if t == nil {
		if required {
			return false, fmt.Errorf(".%s: is required", string(k.Value.(ast.String)))
		}
		return def, nil
	}
	b, ok := t.Value.(ast.Boolean)
	if !ok {
		return false, fmt.Errorf(".%s: want a boolean, got %s", string(k.Value.(ast.String)), ast.ValueName(t.Value))
	}
	return bool(b), nil
}

func termValue(t *ast.Term) ast.Value {
	if t == nil {
		return nil
	}
	return t.Value
}
