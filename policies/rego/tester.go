package rego

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestResult is the outcome of one Rego unit test (a rule whose name starts with test_).
type TestResult struct {
	Package  string // e.g. data.veritrail.envpolicy_test
	Name     string // e.g. test_missing_scan_fails
	File     string // where the rule is
	Row, Col int
	Pass     bool
	Skipped  bool   // named todo_test_...
	Error    string // set when the test raised an error (a builtin error, the time limit), "" otherwise
	Output   string // what print() wrote
	Duration time.Duration
}

// ParseModules parses Rego v1 sources (file name -> source) under the pinned capabilities, so a builtin that is
// not allowed is reported with its location before anything runs.
func ParseModules(sources map[string]string) (map[string]*ast.Module, error) {
	mods := make(map[string]*ast.Module, len(sources))
	var errs ast.Errors
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		m, err := ast.ParseModuleWithOpts(name, sources[name], ast.ParserOptions{
			RegoVersion: ast.RegoV1, Capabilities: Capabilities(), ProcessAnnotation: true,
		})
		if err != nil {
			if e, ok := err.(ast.Errors); ok {
				errs = append(errs, e...)
				continue
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		mods[name] = m
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return mods, nil
}

// RunTests runs the test_ rules of sources (policies and their tests together) with OPA's test runner under the
// pinned capabilities. Each test gets at most timeout (5s when <= 0). filter, when not empty, is a regular
// expression on the test names to run. Results are sorted by file and line. The error is for sources that do not
// compile, not for failing tests.
func RunTests(ctx context.Context, sources map[string]string, filter string, timeout time.Duration) ([]TestResult, error) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	mods, err := ParseModules(sources)
	if err != nil {
		return nil, err
	}
	compiler := ast.NewCompiler().
		WithCapabilities(Capabilities()).
		WithEnablePrintStatements(true).
		WithDefaultRegoVersion(ast.RegoV1)
	runner := tester.NewRunner().
		SetCompiler(compiler).
		SetModules(mods).
		SetTimeout(timeout).
		RaiseBuiltinErrors(true).
		CapturePrintOutput(true).
		SetParallel(1). // the machines are shared; tests of one policy are small
		Filter(filter)
	ch, err := runner.RunTests(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []TestResult
	for r := range ch {
		tr := TestResult{
			Package: r.Package, Name: r.Name, Pass: r.Pass(), Skipped: r.Skip,
			Output: string(r.Output), Duration: r.Duration,
		}
		if r.Location != nil {
			tr.File, tr.Row, tr.Col = r.Location.File, r.Location.Row, r.Location.Col
		}
		if r.Error != nil {
			tr.Error = strings.TrimSpace(r.Error.Error())
		}
		out = append(out, tr)
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	slices.SortFunc(out, func(a, b TestResult) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Row, b.Row), cmp.Compare(a.Col, b.Col),
			strings.Compare(a.Name, b.Name))
	})
	return out, nil
}
