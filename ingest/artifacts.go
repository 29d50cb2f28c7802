package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// ArtifactReport is the body of report artifact (the spec's artifact report).
type ArtifactReport struct {
	Fingerprint           string            `json:"fingerprint" pattern:"^[a-f0-9]{64}$"`
	Filename              string            `json:"filename" minLength:"1"`
	BuildURL              string            `json:"build_url"`
	CommitURL             string            `json:"commit_url"`
	TrailName             *string           `json:"trail_name,omitempty" required:"false" nullable:"true" maxLength:"256"`
	TemplateReferenceName *string           `json:"template_reference_name,omitempty" required:"false" nullable:"true" maxLength:"256"`
	Description           *string           `json:"description,omitempty" required:"false" nullable:"true"`
	GitCommit             *string           `json:"git_commit,omitempty" required:"false" nullable:"true"`
	GitCommitInfo         json.RawMessage   `json:"git_commit_info,omitempty" required:"false"`
	RepoInfo              json.RawMessage   `json:"repo_info,omitempty" required:"false"`
	CommitsList           []json.RawMessage `json:"commits_list,omitempty" required:"false" nullable:"true"`
	RepoURL               string            `json:"repo_url,omitempty" required:"false"`
	IsCompliant           *bool             `json:"is_compliant,omitempty" required:"false" nullable:"true"`
	Template              string            `json:"template,omitempty" required:"false"`
	ExternalURLs          json.RawMessage   `json:"external_urls,omitempty" required:"false"`
	Annotations           json.RawMessage   `json:"annotations,omitempty" required:"false"`
	UserData              json.RawMessage   `json:"user_data,omitempty" required:"false"`
}

func (a *API) artifactURL(org, flow, fp, id string) string {
	u := a.cfg.BaseURL + "/" + org + "/flows/" + flow + "/artifacts/" + fp
	if id == "" {
		return u
	}
	return u + "?artifact_id=" + id
}

func (a *API) registerArtifacts() {
	type reportInput struct {
		FlowPath
		Body ArtifactReport
	}
	// The hosted service answers {"message": "OK"}; the CLI ignores it but needs a body.
	type reportOutput struct {
		Body struct {
			Message string `json:"message"`
		}
	}
	o := op(http.MethodPost, "/artifacts/{org}/{flow}", "reportArtifact", PrivWrite, "Report an artifact", "Artifacts")
	o.DefaultStatus = http.StatusCreated
	huma.Register(a.huma, o, func(ctx context.Context, in *reportInput) (*reportOutput, error) {
		p := principalFrom(ctx)
		b := in.Body
		c := checker{}
		c.optionalName("trail_name", b.TrailName, trailNameRE, trailNamePattern)
		c.optionalName("template_reference_name", b.TemplateReferenceName, templateRefRE, templateRefPattern)
		c.matchOptional("git_commit", b.GitCommit, gitCommitRE, gitCommitPattern)
		checkCommitInfo(c, "git_commit_info", b.GitCommitInfo)
		checkObject(c, "repo_info", b.RepoInfo)
		checkExternalURLs(c, "external_urls", b.ExternalURLs)
		checkObject(c, "annotations", b.Annotations)
		for i, cm := range b.CommitsList {
			checkCommitInfo(c, fmt.Sprintf("commits_list[%d]", i), cm)
		}
		if err := c.err(); err != nil {
			return nil, err
		}
		flow, err := a.flowByName(ctx, p, in.Flow)
		if err != nil {
			return nil, err
		}
		trail := deref(b.TrailName)
		if trail == "" {
			// Legacy reports name no trail: the commit is the trail, as pipelines used it.
			trail = deref(b.GitCommit)
			if trail == "" {
				trail = b.Fingerprint
			}
		}
		report, err := json.Marshal(b)
		if err != nil {
			return nil, a.internal(ctx, "encode report", err)
		}
		env := &contract.Envelope{Kind: contract.KindArtifactReported, Artifact: &contract.ArtifactReport{
			ID: newID(), FlowID: flow.ID, TrailName: trail, Fingerprint: b.Fingerprint,
			TemplateName: deref(b.TemplateReferenceName), Report: report,
		}}
		if err := a.publish(ctx, p, env); err != nil {
			return nil, err
		}
		out := &reportOutput{}
		out.Body.Message = "OK"
		return out, nil
	})

	type fpInput struct {
		FlowPath
		Fingerprint string `path:"fingerprint" doc:"A fingerprint or a prefix of 5 to 64 characters"`
		Trail       string `query:"trail" doc:"Only in this trail"`
	}
	type artifactOutput struct{ Body ArtifactView }
	huma.Register(a.huma, op(http.MethodGet, "/artifacts/{org}/{flow}/fingerprint/{fingerprint}", "getArtifact", PrivRead,
		"Get an artifact by fingerprint or prefix", "Artifacts"),
		func(ctx context.Context, in *fpInput) (*artifactOutput, error) {
			p := principalFrom(ctx)
			flow, err := a.flowByName(ctx, p, in.Flow)
			if err != nil {
				return nil, err
			}
			art, err := a.artifactByPrefix(ctx, p, flow, in.Fingerprint, in.Trail)
			if err != nil {
				return nil, err
			}
			v, err := a.artifactView(ctx, p, flow, art)
			if err != nil {
				return nil, err
			}
			return &artifactOutput{Body: v}, nil
		})

	type commitInput struct {
		FlowPath
		Sha string `path:"sha"`
	}
	huma.Register(a.huma, op(http.MethodGet, "/artifacts/{org}/{flow}/commit_sha/{sha}", "getArtifactsByCommit", PrivRead,
		"Artifacts built from a commit", "Artifacts"),
		func(ctx context.Context, in *commitInput) (*listOutput[ArtifactView], error) {
			p := principalFrom(ctx)
			flow, err := a.flowByName(ctx, p, in.Flow)
			if err != nil {
				return nil, err
			}
			arts, err := a.store.ArtifactsByCommit(ctx, p.Org.ID, flow.ID, in.Sha)
			if err != nil {
				return nil, a.internal(ctx, "list artifacts", err)
			}
			return a.artifactViews(ctx, p, map[string]store.Flow{flow.ID: flow}, arts)
		})

	type latestInput struct {
		FlowPath
		Fingerprint string `path:"fingerprint"`
		Branch      string `query:"branch"`
	}
	type latestOutput struct {
		Body struct {
			LatestCommit *string `json:"latest_commit"`
		}
	}
	huma.Register(a.huma, op(http.MethodGet, "/artifacts/{org}/{flow}/{fingerprint}/latest_commit", "latestCommit", PrivRead,
		"The newest commit reported for the flow before this artifact (for commits_list)", "Artifacts"),
		func(ctx context.Context, in *latestInput) (*latestOutput, error) {
			p := principalFrom(ctx)
			flow, err := a.flowByName(ctx, p, in.Flow)
			if err != nil {
				return nil, err
			}
			arts, _, err := a.store.ListArtifacts(ctx, p.Org.ID, store.ArtifactFilter{FlowID: flow.ID})
			if err != nil {
				return nil, a.internal(ctx, "list artifacts", err)
			}
			out := &latestOutput{}
			for _, art := range arts { // newest first
				if art.Fingerprint == in.Fingerprint || art.GitCommit == "" {
					continue
				}
				if in.Branch != "" && commitBranch(art.Report) != in.Branch {
					continue
				}
				c := art.GitCommit
				out.Body.LatestCommit = &c
				break
			}
			return out, nil
		})

	type listInput struct {
		OrgPath
		Page     int    `query:"page" minimum:"0"`
		PerPage  int    `query:"per_page" minimum:"0" maximum:"100" doc:"default 15"`
		FlowName string `query:"flow_name"`
		RepoName string `query:"repo_name"`
	}
	huma.Register(a.huma, op(http.MethodGet, "/artifacts/{org}", "listArtifacts", PrivRead, "List artifacts, newest first", "Artifacts"),
		func(ctx context.Context, in *listInput) (*listOutput[ArtifactView], error) {
			p := principalFrom(ctx)
			pg := pageOf(in.Page, in.PerPage, 15)
			flt := store.ArtifactFilter{RepoName: in.RepoName, Page: pg}
			if in.RepoName != "" && in.FlowName == "" {
				if err := a.knownRepos(ctx, p, in.RepoName); err != nil {
					return nil, err
				}
			}
			if in.FlowName != "" {
				f, err := a.flowByName(ctx, p, in.FlowName)
				if err != nil {
					return nil, err
				}
				flt.FlowID = f.ID
			}
			arts, _, err := a.store.ListArtifacts(ctx, p.Org.ID, flt)
			if err != nil {
				return nil, a.internal(ctx, "list artifacts", err)
			}
			return a.artifactViews(ctx, p, nil, arts)
		})
}

type listOutput[T any] struct{ Body []T }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func commitBranch(report json.RawMessage) string {
	var r struct {
		GitCommitInfo struct {
			Branch string `json:"branch"`
		} `json:"git_commit_info"`
	}
	_ = json.Unmarshal(report, &r)
	return r.GitCommitInfo.Branch
}

// artifactByPrefix resolves a fingerprint prefix; an ambiguous prefix is a 400 that says so.
func (a *API) artifactByPrefix(ctx context.Context, p *Principal, flow store.Flow, prefix, trail string) (store.Artifact, error) {
	if !shortFPRE.MatchString(prefix) {
		return store.Artifact{}, fieldError("fingerprint", "%s", patternError(shortFPPattern, prefix))
	}
	notFound := apiError(http.StatusNotFound, "Artifact with fingerprint '%s' does not exist in flow '%s' belonging to organization '%s'", prefix, flow.Name, p.Org.Name)
	arts, err := lookup(ctx, a, p, func() ([]store.Artifact, error) {
		arts, err := a.store.ArtifactsByPrefix(ctx, p.Org.ID, flow.ID, prefix, 50)
		if err == nil && len(arts) == 0 {
			err = store.ErrNotFound
		}
		return arts, err
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Artifact{}, notFound
	}
	if err != nil {
		return store.Artifact{}, a.internal(ctx, "look up artifact", err)
	}
	if trail != "" {
		t, err := a.store.TrailByName(ctx, flow.ID, trail)
		if err != nil {
			return store.Artifact{}, notFound
		}
		kept := arts[:0]
		for _, art := range arts {
			if art.TrailID == t.ID {
				kept = append(kept, art)
			}
		}
		arts = kept
		if len(arts) == 0 {
			return store.Artifact{}, notFound
		}
	}
	fps := map[string]bool{}
	for _, art := range arts {
		fps[art.Fingerprint] = true
	}
	if len(fps) > 1 {
		list := make([]string, 0, len(fps))
		for fp := range fps {
			list = append(list, fp)
		}
		sort.Strings(list)
		return store.Artifact{}, &Error{Status: http.StatusBadRequest,
			Message: fmt.Sprintf("Fingerprint prefix '%s' is ambiguous: it matches %d artifacts; give more characters", prefix, len(fps)),
			Errors:  map[string]string{"fingerprint": fmt.Sprintf("matches %v", list)}}
	}
	return arts[0], nil // newest report of that fingerprint
}

// ArtifactView is an artifact as the API shows it.
type ArtifactView struct {
	ID                    string            `json:"id"`
	Filename              string            `json:"filename"`
	FlowName              string            `json:"flow_name"`
	TrailName             string            `json:"trail_name"`
	TemplateReferenceName *string           `json:"template_reference_name"`
	Fingerprint           string            `json:"fingerprint"`
	GitCommit             *string           `json:"git_commit"`
	GitCommitInfo         json.RawMessage   `json:"git_commit_info"`
	CommitURL             string            `json:"commit_url"`
	BuildURL              string            `json:"build_url"`
	RepoURL               string            `json:"repo_url"`
	Description           *string           `json:"description"`
	HTMLURL               string            `json:"html_url"`
	APIURL                string            `json:"api_url"`
	CreatedAt             float64           `json:"created_at"`
	ReportedBy            string            `json:"reported_by"`
	State                 string            `json:"state"`
	IsCompliant           bool              `json:"is_compliant"`
	Running               []json.RawMessage `json:"running"`
	Exited                []json.RawMessage `json:"exited"`
	History               []HistoryEvent    `json:"history"`
	ExternalURLs          json.RawMessage   `json:"external_urls"`
	Annotations           json.RawMessage   `json:"annotations"`
	UserData              json.RawMessage   `json:"user_data"`
}

// HistoryEvent is an entry of an artifact's history.
type HistoryEvent struct {
	Event     string  `json:"event"`
	Type      string  `json:"type"`
	Timestamp float64 `json:"timestamp"`
}

// creationEvent is the history text of an artifact's report, the hosted service's: "<template
// name> reported" (`build reported` for --name build); "Artifact created" for a report that
// names no template artifact (the legacy report artifact).
func creationEvent(templateName *string) string {
	if n := deref(templateName); n != "" {
		return n + " reported"
	}
	return "Artifact created"
}

func (a *API) artifactViews(ctx context.Context, p *Principal, flows map[string]store.Flow, arts []store.Artifact) (*listOutput[ArtifactView], error) {
	out := &listOutput[ArtifactView]{Body: make([]ArtifactView, 0, len(arts))}
	if flows == nil {
		flows = map[string]store.Flow{}
	}
	for _, art := range arts {
		f, ok := flows[art.FlowID]
		if !ok {
			var err error
			if f, err = a.store.FlowByID(ctx, p.Org.ID, art.FlowID); err != nil {
				return nil, a.internal(ctx, "look up flow", err)
			}
			flows[art.FlowID] = f
		}
		v, err := a.artifactView(ctx, p, f, art)
		if err != nil {
			return nil, err
		}
		out.Body = append(out.Body, v)
	}
	return out, nil
}

func (a *API) artifactView(ctx context.Context, p *Principal, flow store.Flow, art store.Artifact) (ArtifactView, error) {
	var rep ArtifactReport
	if err := json.Unmarshal(art.Report, &rep); err != nil {
		return ArtifactView{}, a.internal(ctx, "decode stored artifact", err)
	}
	tr, err := a.store.TrailByID(ctx, art.TrailID)
	if err != nil {
		return ArtifactView{}, a.internal(ctx, "look up trail", err)
	}
	v := ArtifactView{
		ID: art.ID, Filename: rep.Filename, FlowName: flow.Name, TrailName: tr.Name, TemplateReferenceName: rep.TemplateReferenceName,
		Fingerprint: art.Fingerprint, GitCommit: rep.GitCommit, GitCommitInfo: orJSON(rep.GitCommitInfo, "null"),
		CommitURL: rep.CommitURL, BuildURL: rep.BuildURL, RepoURL: rep.RepoURL, Description: rep.Description,
		HTMLURL:   a.artifactURL(p.Org.Name, flow.Name, art.Fingerprint, art.ID),
		APIURL:    a.cfg.BaseURL + "/api/v2/artifacts/" + p.Org.Name + "/" + flow.Name + "/fingerprint/" + art.Fingerprint,
		CreatedAt: art.CreatedAt, ReportedBy: art.ReportedBy, State: art.State, IsCompliant: art.State == "COMPLIANT",
		Running: []json.RawMessage{}, Exited: []json.RawMessage{},
		History:      []HistoryEvent{{Event: creationEvent(rep.TemplateReferenceName), Type: "artifact_creation_reported", Timestamp: art.CreatedAt}},
		ExternalURLs: orJSON(rep.ExternalURLs, "{}"), Annotations: orJSON(rep.Annotations, "{}"), UserData: orJSON(rep.UserData, "{}"),
	}
	if err := a.whereItRuns(ctx, p, art.Fingerprint, &v); err != nil {
		return ArtifactView{}, err
	}
	return v, nil
}

// whereItRuns fills an artifact's running and exited lists and its history from the
// environments' snapshots.
func (a *API) whereItRuns(ctx context.Context, p *Principal, fp string, v *ArtifactView) error {
	envNames := map[string]string{}
	envName := func(id string) string {
		if n, ok := envNames[id]; ok {
			return n
		}
		n := ""
		if env, err := a.store.EnvironmentByID(ctx, p.Org.ID, id); err == nil && !env.Archived {
			n = env.Name
		}
		envNames[id] = n
		return n
	}
	// Events first: they give the snapshot an artifact started running in, and left.
	events, err := a.store.FingerprintEvents(ctx, p.Org.ID, fp)
	if err != nil {
		return a.internal(ctx, "look up environment events", err)
	}
	started := map[string]int{}
	exited := map[string]float64{}
	exitedIn := map[string]int{}
	for _, ev := range events {
		name := envName(ev.EnvID)
		if name == "" {
			continue
		}
		v.History = append(v.History, HistoryEvent{Event: fmt.Sprintf("%s in environment '%s' (snapshot %d)", ev.Description, name, ev.SnapshotIndex),
			Type: "artifact_" + ev.Type, Timestamp: ev.ReportedAt})
		switch ev.Type {
		case "exited":
			exited[name], exitedIn[name] = ev.ReportedAt, ev.SnapshotIndex
		case "started":
			started[name] = ev.SnapshotIndex
		}
	}
	running, err := a.store.RunningIn(ctx, p.Org.ID, fp)
	if err != nil {
		return a.internal(ctx, "look up running", err)
	}
	runs := map[string]bool{}
	for _, r := range running {
		if name := envName(r.EnvID); name != "" {
			runs[name] = true
			entry, _ := json.Marshal(map[string]any{"environment_name": name, "snapshot_index": started[name], "artifact_name": r.Name,
				"since": r.Since}) // plain values always marshal
			v.Running = append(v.Running, entry)
		}
	}
	for name, at := range exited {
		if !runs[name] {
			entry, _ := json.Marshal(map[string]any{"environment_name": name, "snapshot_index": exitedIn[name], "exited_at": at}) // plain values always marshal
			v.Exited = append(v.Exited, entry)
		}
	}
	return nil
}
