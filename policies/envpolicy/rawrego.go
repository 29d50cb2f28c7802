package envpolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/veritrail/veritrail/policies/rego"
	"github.com/veritrail/veritrail/policies/yamlschema"
)

// A raw Rego policy is one module, in the package of its choice, whose rule_evaluations judges input.artifact. The
// engine evaluates a batch in one query through a wrapper module that binds input to each artifact in turn.

const (
	rawModuleFile   = "policy.rego"
	batchModuleFile = "veritrail_batch.rego"
	batchPackage    = "veritrail_batch"
	queryRawResults = "data." + batchPackage + ".results"
)

// batchModule wraps the raw policy in package pkg: one rule evaluation list per artifact, null where the policy
// leaves rule_evaluations undefined (reported as an error, never taken as a pass).
func batchModule(pkg string) string {
	return "package " + batchPackage + `

results := [evaluation(a) | some a in input.artifacts]

evaluation(a) := r if {
	r := ` + pkg + `.rule_evaluations with input as {"environment": input.environment, "artifact": a}
} else := null
`
}

// rawSpec is the query spec of a raw Rego policy.
func rawSpec(p *Policy) rego.QuerySpec {
	return rego.QuerySpec{Query: queryRawResults, Modules: map[string]string{
		rawModuleFile:   p.Module,
		batchModuleFile: batchModule(p.Package),
	}}
}

// checkRego parses and compiles a raw Rego module under the pinned capabilities and returns its package path.
func checkRego(src string) (string, error) {
	mods, err := rego.ParseModules(map[string]string{rawModuleFile: src})
	if err != nil {
		return "", regoProblems(err)
	}
	m := mods[rawModuleFile]
	pkg := m.Package.Path.String()
	if pkg == "data."+batchPackage {
		return "", fileError("the package "+batchPackage+" is reserved; choose another", m.Package.Location.Row, m.Package.Location.Col)
	}
	defined := false
	for _, r := range m.Rules {
		if r.Head.Ref().String() == "rule_evaluations" {
			defined = true
		}
	}
	if !defined {
		return "", fileError("a raw Rego policy defines rule_evaluations: the rule evaluations of input.artifact", 0, 0)
	}
	p := &Policy{Module: src, Package: pkg}
	if _, err := rego.Prepare(context.Background(), rawSpec(p)); err != nil {
		return "", regoProblems(err)
	}
	return pkg, nil
}

// regoProblems turns OPA's parse and compile errors into problems of policy_file at their line and column.
func regoProblems(err error) error {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return fileError(strings.TrimPrefix(err.Error(), "prepare "+queryRawResults+": "), 0, 0)
	}
	ve := &ValidationError{}
	for _, e := range errs {
		p := yamlschema.Problem{Field: FieldPolicyFile, Message: e.Message}
		if e.Location != nil {
			if e.Location.File != "" && e.Location.File != rawModuleFile {
				continue // the wrapper fails only because the policy did
			}
			p.Line, p.Column = e.Location.Row, e.Location.Col
		}
		ve.Problems = append(ve.Problems, p)
	}
	if len(ve.Problems) == 0 {
		return fileError(fmt.Sprint(err), 0, 0)
	}
	return ve
}
