package evaluate

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/veritrail/veritrail/internal/store"
)

// inApply is what evaluateIn did in a batch's transaction: the evaluations it wrote, and the
// trails it left to be marked dirty for the evaluation loop.
type inApply struct {
	saved []trailResult
	left  []string
}

// evaluateIn evaluates trails, which the batch of tx has just added to, in tx itself and writes
// the results there (Config.EvaluateInApply). On a store with one writer nothing else changes
// a trail before tx commits, so the evaluation needs no dirt mark and no second transaction
// with its lock and commit, and it reads what the batch wrote through the writer's own page
// cache. Messages and their evaluations become visible in the same commit. A trail it cannot
// evaluate here (gone, or reading or evaluating it failed) is left for the loop, which retries it as
// before. What it keeps in memory of the trails (facts, folds) is kept only if tx commits.
func (e *Evaluator) evaluateIn(ctx context.Context, tx store.Tx, trails []string, traces map[string]trace.SpanContext) (inApply, error) {
	var out inApply
	if len(trails) == 0 {
		return out, nil
	}
	tx.OnRollback(func() { e.folds.forget(trails) })
	results, errs, gone := e.evaluateFrom(ctx, tx, func(ctx context.Context, trails []string) (map[string][]store.AttestationFact, error) {
		return e.facts.readIn(ctx, tx, trails)
	}, trails, traces)
	out.left = gone
	for id, err := range errs {
		e.d.Log.Warn("evaluate: trail evaluation in the batch failed; leaving it to the evaluation loop", "trail", id, "err", err)
		out.left = append(out.left, id)
	}
	saves := make([]store.ComplianceSave, 0, len(results))
	var generations map[string]int64 // the dirt the trails had before this batch, which this evaluation covers
	for _, r := range results {
		saves = append(saves, r.complianceSave())
		if r.gen != 0 {
			if generations == nil {
				generations = map[string]int64{}
			}
			generations[r.trailID] = r.gen
		}
	}
	out.saved = results
	if err := e.writeResults(ctx, tx, saves, generations, out.saved); err != nil {
		return out, err
	}
	tx.OnCommit(func() { e.evaluations.Add(int64(len(saves))) })
	return out, nil
}
