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
// evaluate here (gone, or its evaluation failed) is left for the loop, which retries it as
// before. What it keeps in memory of the trails (facts, folds) is kept only if tx commits.
func (e *Evaluator) evaluateIn(ctx context.Context, tx store.Tx, trails []string, traces map[string]trace.SpanContext) (inApply, error) {
	var out inApply
	if len(trails) == 0 {
		return out, nil
	}
	starts, err := tx.TrailsToEvaluate(ctx, trails)
	if err != nil {
		return out, err
	}
	present := make([]string, 0, len(trails))
	for _, id := range trails {
		if _, ok := starts[id]; ok {
			present = append(present, id)
		} else {
			out.left = append(out.left, id)
		}
	}
	if len(present) == 0 {
		return out, nil
	}
	tx.OnRollback(func() { e.folds.forget(present) })
	facts, err := e.facts.readIn(ctx, tx, present)
	if err != nil {
		return out, err
	}
	arts, err := tx.TrailArtifactsByIDs(ctx, present)
	if err != nil {
		return out, err
	}
	saves := make([]store.ComplianceSave, 0, len(present))
	var generations map[string]int64 // the dirt the trails had before this batch, which this evaluation covers
	for _, id := range present {
		r, err := e.evaluateTraced(ctx, tx, traces[id], id, starts[id], facts[id], arts[id])
		if err != nil {
			e.d.Log.Warn("evaluate: trail evaluation in the batch failed; leaving it to the evaluation loop", "trail", id, "err", err)
			out.left = append(out.left, id)
			continue
		}
		saves = append(saves, store.ComplianceSave{TrailID: r.trailID, State: r.state, Doc: r.doc, At: r.at,
			ArtifactStates: r.states, ModifiedAt: r.modifiedAt})
		if r.gen != 0 {
			if generations == nil {
				generations = map[string]int64{}
			}
			generations[id] = r.gen
		}
		out.saved = append(out.saved, r)
	}
	if err := e.writeResults(ctx, tx, saves, generations, out.saved); err != nil {
		return out, err
	}
	tx.OnCommit(func() { e.evaluations.Add(int64(len(saves))) })
	return out, nil
}
