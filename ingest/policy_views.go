package ingest

import (
	"context"
	"encoding/json"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/policyeval"
)

// storedVerdict is the verdict a snapshot artifact keeps (evaluate.SnapshotVerdict).
type storedVerdict struct {
	InputHash string `json:"input_hash"`
	Compliant bool   `json:"compliant"`
}

// snapshotDecisions fills each artifact's policy_decisions, and its compliant with the policies' verdict: the
// current verdicts for the latest snapshot of an environment whose policies decide (its state is not null), the
// verdicts recorded with the snapshot for an earlier one. Without policies an artifact keeps the compliance of its
// trails and no decisions.
func (a *API) snapshotDecisions(ctx context.Context, p *Principal, e store.Environment, s store.Snapshot, latest bool,
	arts []map[string]any) error {
	type verdict struct {
		hash      string
		compliant bool
		refs      []store.VerdictPolicy
	}
	byKey := map[store.VerdictKey]verdict{}
	var hashes []string
	var recorded []store.SnapshotPolicy
	switch {
	case latest && e.State != nil:
		vs, err := a.store.Verdicts(ctx, e.ID, nil)
		if err != nil {
			return a.internal(ctx, "load verdicts", err)
		}
		for _, v := range vs {
			byKey[v.Key()] = verdict{v.InputHash, v.Compliant, v.Policies}
			hashes = append(hashes, v.InputHash)
		}
	case !latest:
		var err error
		if recorded, err = a.store.SnapshotPolicies(ctx, e.ID, s.Index); err != nil {
			return a.internal(ctx, "load snapshot policies", err)
		}
	}
	for _, art := range arts {
		raw, ok := art["policy_verdict"]
		delete(art, "policy_verdict")
		if !ok || recorded == nil {
			continue
		}
		var sv storedVerdict
		if b, err := json.Marshal(raw); err != nil || json.Unmarshal(b, &sv) != nil {
			continue // written by the evaluator: it always decodes
		}
		name, _ := art["name"].(string)
		fp, _ := art["fingerprint"].(string)
		byKey[store.VerdictKey{Name: name, Fingerprint: fp}] = verdict{hash: sv.InputHash, compliant: sv.Compliant}
		hashes = append(hashes, sv.InputHash)
	}
	if len(byKey) == 0 {
		return nil
	}
	evals, err := a.store.PolicyEvaluations(ctx, p.Org.ID, hashes)
	if err != nil {
		return a.internal(ctx, "load policy evaluations", err)
	}
	compliant := make(map[policyeval.EvaluationKey]bool, len(evals))
	for _, ev := range evals {
		compliant[policyeval.EvaluationKey{PolicyID: ev.PolicyID, InputHash: ev.InputHash}] = ev.Compliant
	}
	index := policyeval.Index(evals)
	for _, art := range arts {
		name, _ := art["name"].(string)
		fp, _ := art["fingerprint"].(string)
		v, ok := byKey[store.VerdictKey{Name: name, Fingerprint: fp}]
		if !ok {
			continue
		}
		refs := v.refs
		if refs == nil { // recorded with the snapshot: the versions once, each outcome with its evaluation
			refs = make([]store.VerdictPolicy, len(recorded))
			for i, r := range recorded {
				refs[i] = store.VerdictPolicy{Name: r.Name, Version: r.Version, ID: r.ID,
					Compliant: compliant[policyeval.EvaluationKey{PolicyID: r.ID, InputHash: v.hash}]}
			}
		}
		art["policy_decisions"] = policyeval.Expand(refs, v.hash, index)
		art["compliant"] = v.compliant
	}
	return nil
}
