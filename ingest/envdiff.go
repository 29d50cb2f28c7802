package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/ingest/snapexpr"
	"github.com/veritrail/veritrail/internal/snapshot"
)

// snapshotArtifact is what env-diff reads of a stored snapshot's artifacts (the document the
// evaluator writes; see evaluate.SnapshotArtifact).
type snapshotArtifact struct {
	Name              string    `json:"name"`
	Fingerprint       string    `json:"fingerprint"`
	Instances         int       `json:"instances"`
	CreationTimestamp []float64 `json:"creationTimestamp"`
	FlowName          *string   `json:"flow_name"`
	CommitURL         *string   `json:"commit_url"`
}

type provenanceKey struct{ name, fp string }

// resolveSnappish loads the snapshot a snappish (ENV, ENV#N, ENV~N, ENV@{...}) names.
func (a *API) resolveSnappish(ctx context.Context, p *Principal, field, s string) (string, []snapshot.Running, map[provenanceKey][2]string, error) {
	envName, expr, err := snapexpr.ParseSnappish(s)
	if err != nil {
		return "", nil, nil, exprError(field, err, p.Org.Name, envName)
	}
	e, err := a.environmentByName(ctx, p, envName)
	if err != nil {
		return "", nil, nil, err
	}
	ts, err := a.snapshotIndexes(ctx, e)
	if err != nil {
		return "", nil, nil, err
	}
	idx, err := expr.Resolve(len(ts), func(i int) float64 { return ts[i-1] }, time.Now())
	var re *snapexpr.RangeError
	if errors.As(err, &re) {
		// The snappish echoed exactly as typed, with no #-1 added.
		return "", nil, nil, apiError(http.StatusNotFound, "%s", re.MessageEchoing(p.Org.Name, s, e.Name))
	}
	if err != nil {
		return "", nil, nil, exprError(field, err, p.Org.Name, e.Name)
	}
	snap, err := a.store.SnapshotByIndex(ctx, e.ID, idx)
	if err != nil {
		return "", nil, nil, a.internal(ctx, "load snapshot", err)
	}
	var arts []snapshotArtifact
	if err := json.Unmarshal(snap.Artifacts, &arts); err != nil {
		return "", nil, nil, a.internal(ctx, "decode snapshot", err)
	}
	set := make([]snapshot.Running, len(arts))
	prov := map[provenanceKey][2]string{}
	for i, x := range arts {
		set[i] = snapshot.Running{Name: x.Name, Fingerprint: x.Fingerprint, Instances: x.Instances, CreationTimestamps: x.CreationTimestamp}
		prov[provenanceKey{x.Name, x.Fingerprint}] = [2]string{deref(x.FlowName), deref(x.CommitURL)}
	}
	return snapshot.SnapshotID(e.Name, idx), set, prov, nil
}

func (a *API) registerEnvDiff() {
	type diffInput struct {
		OrgPath
		// Not required for Huma: an empty or missing snappish is the hosted service's
		// "Bad snappish " (trailing space), a plain message without field errors.
		Snappish1 string `query:"snappish1" doc:"ENV, ENV#N, ENV~N or ENV@{time}; required"`
		Snappish2 string `query:"snappish2" doc:"required"`
	}
	type diffOutput struct{ Body snapshot.DiffResult }
	huma.Register(a.huma, op(http.MethodGet, "/env-diff/{org}", "diffSnapshots", PrivRead, "Compare two snapshots", "Snapshots"),
		func(ctx context.Context, in *diffInput) (*diffOutput, error) {
			p := principalFrom(ctx)
			for _, s := range []string{in.Snappish1, in.Snappish2} {
				if s == "" {
					return nil, apiError(http.StatusBadRequest, "Bad snappish %s", s)
				}
			}
			id1, set1, prov1, err := a.resolveSnappish(ctx, p, "snappish1", in.Snappish1)
			if err != nil {
				return nil, err
			}
			id2, set2, prov2, err := a.resolveSnappish(ctx, p, "snappish2", in.Snappish2)
			if err != nil {
				return nil, err
			}
			res := snapshot.Compare(set1, set2, snapshot.CompareOptions{Snapshot1: id1, Snapshot2: id2,
				Provenance: func(name, fp string) (string, string) {
					if v, ok := prov2[provenanceKey{name, fp}]; ok {
						return v[0], v[1]
					}
					v := prov1[provenanceKey{name, fp}]
					return v[0], v[1]
				}})
			return &diffOutput{Body: res}, nil
		})
}
