package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policytest"
	"github.com/veritrail/veritrail/policies/template"
	"github.com/veritrail/veritrail/policies/yamlschema"
)

// lintOptions are the flags of "policy lint".
type lintOptions struct {
	controls func(string) bool // nil: for_control is not checked
	kind     policytest.Kind   // "": recognise each file by its shape
	quiet    bool              // print nothing for files without problems
	format   string            // text or json
}

// lintProblem is one problem as --format json prints it, for editors and CI annotations. Rule is the field of the
// document that breaks a rule (artifacts.attestations[0].type), or policy_file / template_file for the whole file
// (YAML syntax, a Rego compile error, a file that cannot be read).
type lintProblem struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Rule     string `json:"rule"`
}

// lintFiles checks each file as a policy or a flow template and prints its problems sorted by position (and, in
// text, "ok FILE" for a file without any unless quiet). It fails when a file has a problem.
func lintFiles(files []string, o lintOptions, stdout io.Writer) error {
	if o.format != "text" && o.format != "json" {
		return fmt.Errorf("--format %q: want text or json", o.format)
	}
	all := []lintProblem{}
	bad := 0
	for _, f := range files {
		if policytest.IsRegoTest(f) {
			continue // tests are checked by "policy test"
		}
		ps := lintFile(f, o)
		if len(ps) > 0 {
			bad++
		}
		all = append(all, ps...)
		if o.format != "text" {
			continue
		}
		if len(ps) == 0 && !o.quiet {
			fmt.Fprintf(stdout, "ok %s\n", f)
		}
		for _, p := range ps {
			fmt.Fprintln(stdout, policytest.ProblemLine(p.File, yamlschema.Problem{Field: p.Rule, Message: p.Message, Line: p.Line, Column: p.Column}))
		}
	}
	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(all); err != nil {
			return err
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d problem(s) in %d of %d file(s)", len(all), bad, len(files))
	}
	return nil
}

// lintFile returns the problems of one file, sorted by line and column.
func lintFile(file string, o lintOptions) []lintProblem {
	whole := envpolicy.FieldPolicyFile
	content, err := os.ReadFile(file)
	if err == nil {
		kind := o.kind
		if kind == "" {
			kind = policytest.KindOf(file, content)
		}
		if kind == policytest.KindTemplate {
			whole = template.FieldTemplateFile
			_, err = policytest.LoadTemplate(file)
		} else {
			_, err = policytest.LoadPolicy(file, o.controls)
		}
	}
	if err == nil {
		return nil
	}
	ps := policytest.Problems(err)
	if ps == nil {
		return []lintProblem{{File: file, Severity: "error", Message: err.Error(), Rule: whole}}
	}
	out := make([]lintProblem, 0, len(ps))
	for _, p := range policytest.SortProblems(ps) {
		out = append(out, lintProblem{File: file, Line: p.Line, Column: p.Column, Severity: "error", Message: p.Message, Rule: p.Field})
	}
	return out
}
