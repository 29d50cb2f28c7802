package ingest

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/ingest/snapexpr"
	"github.com/veritrail/veritrail/internal/store"
)

// EventsInput are the parameters of list environment events.
type EventsInput struct {
	EnvPath
	Page     int      `query:"page" minimum:"1" default:"1"`
	PerPage  int      `query:"per_page" minimum:"1" maximum:"100" default:"15"`
	Reverse  bool     `query:"reverse" doc:"oldest first (default newest first)"`
	RepoName []string `query:"repo_name,explode" doc:"only artifacts built from these repositories (repeatable)"`
	StartTS  string   `query:"start_ts" doc:"start as a UNIX timestamp; takes precedence over start"`
	EndTS    string   `query:"end_ts" doc:"end as a UNIX timestamp; takes precedence over end"`
	Start    string   `query:"start" doc:"snapshot index (1-based, negative from the end) or time reference (NOW, 1hour, 2days, 30mins); default 1"`
	End      string   `query:"end" doc:"same forms as start; default NOW"`
	Interval string   `query:"interval" doc:"deprecated: START..END"`
	From     string   `query:"from" doc:"only events reported at or after this UNIX timestamp"`
	To       string   `query:"to" doc:"only events reported at or before this UNIX timestamp"`
	// startGiven and endGiven tell an empty start= or end= (refused, as the hosted service
	// does) from an absent one, which Huma's decoding makes look alike.
	startGiven, endGiven bool
}

// Resolve notes which of start and end the query names.
func (in *EventsInput) Resolve(ctx huma.Context) []error {
	u := ctx.URL()
	q := u.Query()
	in.startGiven, in.endGiven = q.Has("start"), q.Has("end")
	return nil
}

// EventsOutput is the events page and its pagination headers.
type EventsOutput struct {
	TotalCount int `header:"X-Total-Count" doc:"events matching the filters"`
	Page       int `header:"X-Page"`
	PerPage    int `header:"X-Per-Page"`
	TotalPages int `header:"X-Total-Pages"`
	Body       []map[string]any
}

func (a *API) registerEnvironmentEvents() {
	huma.Register(a.huma, op(http.MethodGet, "/environments/{org}/{env}/events", "listEnvironmentEvents", PrivRead,
		"Artifacts that started, changed or exited in an environment", "Environments"),
		func(ctx context.Context, in *EventsInput) (*EventsOutput, error) {
			p := principalFrom(ctx)
			e, err := a.environmentByName(ctx, p, in.Env)
			if err != nil {
				return nil, err
			}
			f, err := a.eventFilter(ctx, p, e, in)
			if err != nil {
				return nil, err
			}
			out := &EventsOutput{Page: in.Page, PerPage: in.PerPage, Body: []map[string]any{}}
			if f == nil { // the window holds no snapshot
				out.TotalPages = 1
				return out, nil
			}
			events, total, err := a.store.EnvEvents(ctx, e.ID, *f)
			if err != nil {
				return nil, a.internal(ctx, "list events", err)
			}
			out.TotalCount, out.TotalPages = total, max(1, (total+in.PerPage-1)/in.PerPage)
			for _, ev := range events {
				out.Body = append(out.Body, a.eventView(p, e, ev))
			}
			return out, nil
		})
}

// eventFilter turns the parameters into a store filter, or nil when the window is empty.
// Precedence: start_ts/end_ts over start/end over the deprecated interval.
func (a *API) eventFilter(ctx context.Context, p *Principal, e store.Environment, in *EventsInput) (*store.EventFilter, error) {
	start, end := snapexpr.DefaultStart(), snapexpr.DefaultEnd()
	var err error
	if in.Interval != "" {
		if start, end, err = snapexpr.ParseInterval(in.Interval); err != nil {
			return nil, exprError("interval", err, p.Org.Name, e.Name)
		}
	}
	// A bad start or end is the hosted service's plain message, without field errors.
	if in.startGiven {
		if start, err = snapexpr.ParseBoundary(in.Start); err != nil {
			return nil, apiError(http.StatusBadRequest, "Invalid interval value: %s", in.Start)
		}
	}
	if in.endGiven {
		if end, err = snapexpr.ParseBoundary(in.End); err != nil {
			return nil, apiError(http.StatusBadRequest, "Invalid interval value: %s", in.End)
		}
	}
	for _, b := range []struct {
		field, value string
		into         *snapexpr.Boundary
	}{{"start_ts", in.StartTS, &start}, {"end_ts", in.EndTS, &end}} {
		if b.value == "" {
			continue
		}
		ts, err := snapexpr.ParseTimestamp(b.value)
		if err != nil {
			return nil, exprError(b.field, err, p.Org.Name, e.Name)
		}
		*b.into = snapexpr.BoundaryAt(ts)
	}
	if err := a.knownRepos(ctx, p, in.RepoName...); err != nil {
		return nil, err
	}
	f := &store.EventFilter{RepoNames: in.RepoName, Reverse: in.Reverse, Page: store.Page{Page: in.Page, PerPage: in.PerPage}}
	for _, b := range []struct {
		field, value string
		into         *float64
	}{{"from", in.From, &f.FromTS}, {"to", in.To, &f.ToTS}} {
		if b.value == "" {
			continue
		}
		if *b.into, err = snapexpr.ParseTimestamp(b.value); err != nil {
			return nil, exprError(b.field, err, p.Org.Name, e.Name)
		}
	}
	ts, err := a.snapshotIndexes(ctx, e)
	if err != nil {
		return nil, err
	}
	w, err := snapexpr.ResolveWindow(start, end, len(ts), func(i int) float64 { return ts[i-1] }, time.Now())
	if err != nil {
		return nil, exprError("start", err, p.Org.Name, e.Name)
	}
	if w.Empty() {
		return nil, nil
	}
	f.FromIndex, f.ToIndex = w.From, w.To
	return f, nil
}

func (a *API) eventView(p *Principal, e store.Environment, ev store.EnvEvent) map[string]any {
	v := map[string]any{}
	_ = json.Unmarshal(ev.Doc, &v) // written by the evaluator as an object
	delete(v, "was")
	delete(v, "now")
	v["type"] = ev.Type
	v["environment_name"] = e.Name
	v["snapshot_index"] = ev.SnapshotIndex
	v["artifact_name"] = ev.ArtifactName
	v["sha256"] = ev.Fingerprint
	v["description"] = ev.Description
	v["reported_at"] = ev.ReportedAt
	v["code_diff"] = nil
	links := map[string]any{
		"environment": map[string]string{"self": a.cfg.BaseURL + "/api/v2/environments/" + p.Org.Name + "/" + e.Name,
			"html": a.envURL(p.Org.Name, e.Name)},
		"snapshot": map[string]string{"self": a.cfg.BaseURL + "/api/v2/snapshots/" + p.Org.Name + "/" + e.Name + "/" + itoa(ev.SnapshotIndex),
			"html": a.snapshotURL(p.Org.Name, e.Name, ev.SnapshotIndex)},
	}
	if flow, _ := v["pipeline"].(string); flow != "" {
		links["artifact"] = map[string]string{
			"self": a.cfg.BaseURL + "/api/v2/artifacts/" + p.Org.Name + "/" + flow + "/fingerprint/" + ev.Fingerprint,
			"html": a.cfg.BaseURL + "/" + p.Org.Name + "/flows/" + flow + "/artifacts/" + ev.Fingerprint,
		}
	}
	v["_links"] = links
	return v
}
