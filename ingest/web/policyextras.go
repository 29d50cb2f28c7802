package web

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policyeval"
	"github.com/veritrail/veritrail/policies/policyquery"
)

// whatIf is the what-if form's answer: how a version of the policy would judge an environment's
// latest snapshot, without attaching it.
type whatIf struct {
	Env       string
	Version   int
	Result    policyquery.WhatIfResult
	Artifacts []whatIfArtifact
	Problem   string
}

type whatIfArtifact struct {
	policyquery.WhatIfArtifact
	Policies []policyView
}

// version is the policy's version numbered n, or its latest when n is 0 or unknown.
func version(p store.Policy, n int) store.PolicyVersion {
	for _, v := range p.Versions {
		if v.Version == n {
			return v
		}
	}
	return p.Latest()
}

// regoOf is the Rego a version of the policy runs: a YAML policy's compiled module, a Rego
// policy's own content. A version that no longer compiles says why instead.
func (s *Site) regoOf(p store.Policy, v store.PolicyVersion) string {
	if v.Format != store.PolicyYAML {
		return v.Content
	}
	parsed, err := s.query.Policy(store.Policy{Name: p.Name, Versions: []store.PolicyVersion{v}})
	if err != nil {
		return fmt.Sprintf("# version %d does not parse: %v", v.Version, err)
	}
	rego, err := envpolicy.Compile(parsed)
	if err != nil {
		return fmt.Sprintf("# version %d does not compile: %v", v.Version, err)
	}
	return rego
}

// policyExtras adds to d the version the query asks to show (by default the latest) with the
// Rego it runs, the diff between the two versions the form asks for (their source, and the
// Rego of YAML ones), and the what-if answer the form asks for (a read: the form is a GET).
func (s *Site) policyExtras(c *call, p store.Policy, d *policyData) error {
	q := c.r.URL.Query()
	n, _ := strconv.Atoi(q.Get("show"))
	d.Shown = version(p, n)
	d.Rego = s.regoOf(p, d.Shown)
	if len(p.Versions) > 1 {
		from, _ := strconv.Atoi(q.Get("from"))
		to, _ := strconv.Atoi(q.Get("to"))
		latest := p.Latest().Version
		if to == 0 {
			to = latest
		}
		if from == 0 {
			from = version(p, to-1).Version
		}
		a, b := version(p, from), version(p, to)
		d.DiffFrom, d.DiffTo = a.Version, b.Version
		d.Diff = foldDiff(lineDiff(a.Content, b.Content))
		if a.Format == store.PolicyYAML || b.Format == store.PolicyYAML {
			d.RegoDiff = foldDiff(lineDiff(s.regoOf(p, a), s.regoOf(p, b)))
		}
	}
	envName := q.Get("environment")
	if envName == "" {
		return nil
	}
	n, _ = strconv.Atoi(q.Get("version"))
	v := version(p, n)
	w := &whatIf{Env: envName, Version: v.Version}
	d.WhatIf = w
	e, err := s.store.EnvironmentByName(c.ctx(), c.p.Org.ID, envName)
	if errors.Is(err, store.ErrNotFound) {
		w.Problem = fmt.Sprintf("There is no environment named %q.", envName)
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up environment: %w", err)
	}
	parsed, err := s.query.Policy(store.Policy{Name: p.Name, Versions: []store.PolicyVersion{v}})
	if err != nil {
		return err
	}
	draft := *parsed // the parsed policy is shared by a cache: the query must not change it
	draft.Name = p.Name
	w.Result = policyquery.WhatIfResult{Environment: e.Name, Policy: p.Name, Format: v.Format, Compliant: true}
	if err := s.query.WhatIf(c.ctx(), c.p.Org.ID, e, &draft, &w.Result); err != nil {
		return fmt.Errorf("what-if: %w", err)
	}
	for _, a := range w.Result.Artifacts {
		w.Artifacts = append(w.Artifacts, whatIfArtifact{WhatIfArtifact: a, Policies: policyViews([]policyeval.Evaluation{a.Evaluation})})
	}
	return nil
}

// diffLine is a line of a diff: kept (" "), removed ("-") or added ("+"), or Skipped kept
// lines far from any change, folded into one.
type diffLine struct {
	Op, Text string
	Skipped  int
}

// diffContext is how many kept lines a folded diff shows around each change.
const diffContext = 3

// foldDiff folds the runs of kept lines farther than diffContext from any change: a compiled
// module is long, and its versions differ in a few places.
func foldDiff(lines []diffLine) []diffLine {
	near := make([]bool, len(lines))
	for i, l := range lines {
		if l.Op == " " {
			continue
		}
		for j := max(0, i-diffContext); j <= min(len(lines)-1, i+diffContext); j++ {
			near[j] = true
		}
	}
	var out []diffLine
	for i := 0; i < len(lines); {
		if near[i] {
			out = append(out, lines[i])
			i++
			continue
		}
		j := i
		for j < len(lines) && !near[j] {
			j++
		}
		out = append(out, diffLine{Op: " ", Skipped: j - i})
		i = j
	}
	return out
}

// maxDiffLines bounds the lines a diff compares (the table it builds is their product).
const maxDiffLines = 2000

// lineDiff is the line diff of a and b, by their longest common subsequence.
func lineDiff(a, b string) []diffLine {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(x) > maxDiffLines || len(y) > maxDiffLines {
		return []diffLine{{Op: " ", Text: "(too long to compare here)"}}
	}
	// lcs[i][j] is the length of the longest common subsequence of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []diffLine
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] == y[j]:
			out = append(out, diffLine{Op: " ", Text: x[i]})
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, diffLine{Op: "-", Text: x[i]})
			i++
		default:
			out = append(out, diffLine{Op: "+", Text: y[j]})
			j++
		}
	}
	for ; i < len(x); i++ {
		out = append(out, diffLine{Op: "-", Text: x[i]})
	}
	for ; j < len(y); j++ {
		out = append(out, diffLine{Op: "+", Text: y[j]})
	}
	return out
}
