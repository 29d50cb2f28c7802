package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/ingest/snapexpr"
	"github.com/veritrail/veritrail/internal/store"
)

// snapshotIndexes loads an environment's snapshot timestamps for resolving expressions.
func (a *API) snapshotIndexes(ctx context.Context, e store.Environment) ([]float64, error) {
	ts, err := a.store.SnapshotTimestamps(ctx, e.ID)
	if err != nil {
		return nil, a.internal(ctx, "load snapshots", err)
	}
	return ts, nil
}

func exprError(field string, err error, org, env string) error {
	var se *snapexpr.SyntaxError
	if errors.As(err, &se) {
		return fieldError(field, "%s", se.Error())
	}
	var re *snapexpr.RangeError
	if errors.As(err, &re) {
		return apiError(http.StatusNotFound, "%s", re.Message(org, env))
	}
	return fieldError(field, "%v", err)
}

func (a *API) snapshotURL(org, env string, index int) string {
	return fmt.Sprintf("%s/%s/environments/%s/snapshots/%d", a.cfg.BaseURL, org, env, index)
}

// decided is a snapshot's compliance as the Kosli CLI reads it: a boolean, never null (the
// client type-asserts one and crashes on null). A snapshot no policy decides is not compliant,
// so `kosli assert snapshot` on an environment without policies prints NON-COMPLIANT.
func decided(c *bool) bool { return c != nil && *c }

func (a *API) registerSnapshots() {
	type getInput struct {
		EnvPath
		Expr string `path:"expr" doc:"-1 (latest), N, -N, #N, ~N, @{2024-01-01T10:00:00}, @{2.hours.ago}, @{now}"`
	}
	type getOutput struct{ Body map[string]any }
	huma.Register(a.huma, op(http.MethodGet, "/snapshots/{org}/{env}/{expr}", "getSnapshot", PrivRead, "Get a snapshot of an environment", "Snapshots"),
		func(ctx context.Context, in *getInput) (*getOutput, error) {
			p := principalFrom(ctx)
			e, err := a.environmentByName(ctx, p, in.Env)
			if err != nil {
				return nil, err
			}
			expr, err := snapexpr.ParseSnapshot(in.Expr)
			if err != nil {
				return nil, exprError("expr", err, p.Org.Name, e.Name)
			}
			ts, err := a.snapshotIndexes(ctx, e)
			if err != nil {
				return nil, err
			}
			idx, err := expr.Resolve(len(ts), func(i int) float64 { return ts[i-1] }, time.Now())
			if err != nil {
				return nil, exprError("expr", err, p.Org.Name, e.Name)
			}
			s, err := a.store.SnapshotByIndex(ctx, e.ID, idx)
			if err != nil {
				return nil, a.internal(ctx, "load snapshot", err)
			}
			var arts []map[string]any
			if err := json.Unmarshal(s.Artifacts, &arts); err != nil {
				return nil, a.internal(ctx, "decode snapshot", err)
			}
			if err := a.snapshotDecisions(ctx, p, e, s, idx == len(ts), arts); err != nil {
				return nil, err
			}
			counts := map[string]int{"true": 0, "false": 0, "null": 0}
			for _, art := range arts {
				switch c := art["compliant"].(type) {
				case bool:
					counts[strconv.FormatBool(c)]++
				default:
					counts["null"]++
				}
				if fp, _ := art["fingerprint"].(string); fp != "" {
					if flow, ok := art["flow_name"].(string); ok {
						art["html_url"] = a.artifactURL(p.Org.Name, flow, fp, provenanceArtifactID(art["flows"], flow))
					}
				}
			}
			var next any
			if idx < len(ts) {
				next = ts[idx]
			}
			return &getOutput{Body: map[string]any{
				"index": s.Index, "timestamp": s.Timestamp, "type": s.Type, "compliant": decided(s.Compliant), "is_latest": idx == len(ts),
				"next_snapshot_timestamp": next, "artifact_compliance_count": counts, "html_url": a.snapshotURL(p.Org.Name, e.Name, idx),
				"artifacts": arts,
			}}, nil
		})

	type listInput struct {
		EnvPath
		Page     int    `query:"page" minimum:"1" default:"1"`
		PerPage  int    `query:"per_page" minimum:"1" maximum:"100" default:"15"`
		Interval string `query:"interval" doc:"two snapshot expressions joined by '..'"`
		Reverse  bool   `query:"reverse" doc:"oldest first"`
	}
	type snapshotSummary struct {
		Index     int     `json:"index"`
		From      float64 `json:"from"`
		To        float64 `json:"to" doc:"0 while it is the current snapshot"`
		Compliant bool    `json:"compliant" doc:"false also when no policy decides the environment"`
		Duration  float64 `json:"duration"`
	}
	type listOutput struct{ Body []snapshotSummary }
	huma.Register(a.huma, op(http.MethodGet, "/snapshots/{org}/{env}", "listSnapshots", PrivRead, "List snapshots, newest first", "Snapshots"),
		func(ctx context.Context, in *listInput) (*listOutput, error) {
			p := principalFrom(ctx)
			e, err := a.environmentByName(ctx, p, in.Env)
			if err != nil {
				return nil, err
			}
			ts, err := a.snapshotIndexes(ctx, e)
			if err != nil {
				return nil, err
			}
			from, to := 1, len(ts)
			if in.Interval != "" {
				start, end, err := snapexpr.ParseInterval(in.Interval)
				if err != nil {
					return nil, exprError("interval", err, p.Org.Name, e.Name)
				}
				w, err := snapexpr.ResolveWindow(start, end, len(ts), func(i int) float64 { return ts[i-1] }, time.Now())
				if err != nil {
					return nil, exprError("interval", err, p.Org.Name, e.Name)
				}
				from, to = w.From, w.To
			}
			snaps, err := a.store.ListSnapshots(ctx, e.ID, from, to)
			if err != nil {
				return nil, a.internal(ctx, "list snapshots", err)
			}
			now := float64(time.Now().UnixMicro()) / 1e6
			items := make([]snapshotSummary, 0, len(snaps))
			for _, s := range snaps {
				it := snapshotSummary{Index: s.Index, From: s.Timestamp, Compliant: decided(s.Compliant)}
				end := now
				if s.Index < len(ts) {
					it.To, end = ts[s.Index], ts[s.Index]
				}
				it.Duration = math.Max(0, end-s.Timestamp)
				items = append(items, it)
			}
			if in.Reverse {
				for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
					items[i], items[j] = items[j], items[i]
				}
			}
			lo := min((in.Page-1)*in.PerPage, len(items))
			return &listOutput{Body: items[lo:min(lo+in.PerPage, len(items))]}, nil
		})

	a.registerEnvironmentEvents()
	a.registerEnvDiff()

	type searchInput struct {
		OrgPath
		Value string `path:"value" doc:"a fingerprint or git commit prefix of at least 5 characters"`
	}
	type searchOutput struct {
		Body struct {
			ResolvedTo struct {
				FullMatch string `json:"full_match"`
				Type      string `json:"type"`
			} `json:"resolved_to"`
			Artifacts []ArtifactView `json:"artifacts"`
		}
	}
	huma.Register(a.huma, op(http.MethodGet, "/search/{org}/sha/{value}", "searchSha", PrivRead,
		"Find artifacts by fingerprint or git commit prefix", "Search"),
		func(ctx context.Context, in *searchInput) (*searchOutput, error) {
			p := principalFrom(ctx)
			if len(in.Value) < 5 || !shortHexRE.MatchString(in.Value) {
				return nil, fieldError("value", "%s", patternError(shortHexPattern, in.Value))
			}
			arts, err := a.store.SearchArtifacts(ctx, p.Org.ID, in.Value, 100)
			if err != nil {
				return nil, a.internal(ctx, "search", err)
			}
			if len(arts) == 0 {
				return nil, apiError(http.StatusNotFound, "No matches for '%s'.", in.Value)
			}
			views, err := a.artifactViews(ctx, p, nil, arts)
			if err != nil {
				return nil, err
			}
			out := &searchOutput{}
			out.Body.Artifacts = views.Body
			for i := range out.Body.Artifacts {
				// A search result links the artifact's page without a query string, as the hosted
				// service's does (CLIENT-2.md section 6); its id is in the result beside it.
				link := &out.Body.Artifacts[i].HTMLURL
				*link, _, _ = strings.Cut(*link, "?")
			}
			first := arts[0]
			if len(first.Fingerprint) >= len(in.Value) && first.Fingerprint[:len(in.Value)] == in.Value {
				out.Body.ResolvedTo.FullMatch, out.Body.ResolvedTo.Type = first.Fingerprint, "fingerprint"
			} else {
				out.Body.ResolvedTo.FullMatch, out.Body.ResolvedTo.Type = first.GitCommit, "commit"
			}
			return out, nil
		})
}

// provenanceArtifactID is the artifact id of a snapshot artifact's provenance in flow (its "flows"
// entries, each {flow_name, artifact_id, ...}), so that its html_url names the artifact as every
// other artifact link does; "" when no entry of that flow has one.
func provenanceArtifactID(flows any, flow string) string {
	list, _ := flows.([]any)
	for _, f := range list {
		m, _ := f.(map[string]any)
		if name, _ := m["flow_name"].(string); name != flow {
			continue
		}
		if id, _ := m["artifact_id"].(string); id != "" {
			return id
		}
	}
	return ""
}
