package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/template"
)

// TrailInput is the data_json of begin trail. Keys beyond these are ignored.
type TrailInput struct {
	_             struct{}        `additionalProperties:"true"`
	Name          string          `json:"name"`
	Description   *string         `json:"description,omitempty"`
	GitCommitInfo json.RawMessage `json:"git_commit_info,omitempty" doc:"object: {sha1, message?, author?, branch?, timestamp? (a number), url?}"`
	RepoInfo      json.RawMessage `json:"repo_info,omitempty" doc:"object: {url, name, id, description?, provider?, namespace_path?, additional_info?}"`
	OriginURL     *string         `json:"origin_url,omitempty"`
	ExternalURLs  json.RawMessage `json:"external_urls,omitempty" doc:"object: {label: {href, fingerprint?}}"`
	UserData      json.RawMessage `json:"user_data,omitempty" doc:"any JSON the caller keeps with the trail"`
}

// check checks the trail's name and the objects it carries.
func (t *TrailInput) check(c checker, _ *form) {
	c.name("name", t.Name, trailNameRE, trailNamePattern)
	checkCommitInfo(c, "git_commit_info", t.GitCommitInfo)
	checkObject(c, "repo_info", t.RepoInfo)
	checkExternalURLs(c, "external_urls", t.ExternalURLs)
	checkOriginURL(c, "origin_url", t.OriginURL)
}

type TrailPath struct {
	Org   string `path:"org"`
	Flow  string `path:"flow"`
	Trail string `path:"trail"`
}

func (a *API) trailURL(org, flow, trail string) string {
	return a.cfg.BaseURL + "/" + org + "/flows/" + flow + "/trails/" + trail
}

func (a *API) registerTrails() {
	type beginInput struct {
		FlowPath
		FormBody
	}
	o := op(http.MethodPut, "/trails/{org}/{flow}", "beginTrail", PrivWrite,
		"Begin (201) or update (200) a trail", "Trails")
	o.DefaultStatus = http.StatusCreated
	parts := formParts{json: "data_json", files: []filePart{{name: "template_file", doc: "The trail's template (YAML)", large: true}}}
	registerForm(a, o, parts, func(ctx context.Context, in *beginInput, f *Form[TrailInput]) (*stringOutput, error) {
		p := principalFrom(ctx)
		body := f.Payload
		flow, err := a.flowByName(ctx, p, in.Flow)
		if err != nil {
			return nil, err
		}
		begin := &contract.TrailBegin{
			ID: newID(), FlowID: flow.ID, Name: body.Name, Description: body.Description, GitCommitInfo: body.GitCommitInfo,
			RepoInfo: body.RepoInfo, OriginURL: body.OriginURL, ExternalURLs: body.ExternalURLs, UserData: body.UserData,
		}
		if tf, ok := f.part("template_file"); ok {
			t, err := parseTemplate("template_file", tf, true)
			if err != nil {
				return nil, err
			}
			begin.Template, begin.TemplateID = t.Content, t.ID
		}
		_, err = lookup(ctx, a, p, func() (store.Trail, error) { return a.store.TrailByName(ctx, flow.ID, body.Name) })
		created := errors.Is(err, store.ErrNotFound)
		if err != nil && !created {
			return nil, a.internal(ctx, "look up trail", err)
		}
		if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindTrailBegun, Trail: begin}); err != nil {
			return nil, err
		}
		if created {
			return &stringOutput{Status: http.StatusCreated, Body: fmt.Sprintf("Trail '%s' was begun", body.Name)}, nil
		}
		return &stringOutput{Status: http.StatusOK, Body: fmt.Sprintf("Trail '%s' was updated", body.Name)}, nil
	})

	type getOutput struct{ Body TrailView }
	huma.Register(a.huma, op(http.MethodGet, "/trails/{org}/{flow}/{trail}", "getTrail", PrivRead, "Get a trail", "Trails"),
		func(ctx context.Context, in *TrailPath) (*getOutput, error) {
			p := principalFrom(ctx)
			flow, tr, err := a.flowAndTrail(ctx, p, in.Flow, in.Trail)
			if err != nil {
				return nil, err
			}
			v, err := a.trailView(ctx, p, flow, tr)
			if err != nil {
				return nil, err
			}
			return &getOutput{Body: v}, nil
		})

	type listInput struct {
		OrgPath
		Page        int    `query:"page" minimum:"0"`
		PerPage     int    `query:"per_page" minimum:"0" maximum:"100" doc:"default 20"`
		Flow        string `query:"flow" doc:"Only trails of this flow"`
		Fingerprint string `query:"fingerprint" doc:"Only trails holding an artifact with this fingerprint"`
		FlowTag     string `query:"flow_tag" doc:"Only trails of flows with this tag, as key=value"`
	}
	type listItem struct {
		Name            string  `json:"name"`
		Description     *string `json:"description"`
		ComplianceState string  `json:"compliance_state"`
		Flow            string  `json:"flow"`
		CreatedAt       float64 `json:"created_at"`
		HTMLURL         string  `json:"html_url"`
	}
	type listOutput struct {
		Body struct {
			Data       []listItem `json:"data"`
			Pagination Pagination `json:"pagination"`
		}
	}
	huma.Register(a.huma, op(http.MethodGet, "/trails/{org}", "listTrails", PrivRead, "List trails, newest first", "Trails"),
		func(ctx context.Context, in *listInput) (*listOutput, error) {
			p := principalFrom(ctx)
			pg := pageOf(in.Page, in.PerPage, 20)
			flt := store.TrailFilter{Fingerprint: in.Fingerprint, Page: pg}
			flows, _, err := a.store.ListFlows(ctx, p.Org.ID, store.FlowFilter{})
			if err != nil {
				return nil, a.internal(ctx, "list flows", err)
			}
			names := map[string]string{}
			for _, f := range flows {
				names[f.ID] = f.Name
			}
			if in.Flow != "" {
				f, err := a.flowByName(ctx, p, in.Flow)
				if err != nil {
					return nil, err
				}
				flt.FlowIDs = []string{f.ID}
			}
			if in.FlowTag != "" {
				k, v, ok := strings.Cut(in.FlowTag, "=")
				if !ok || k == "" {
					return nil, fieldError("flow_tag", "Expected key=value [input: %s]", in.FlowTag)
				}
				ids := []string{}
				for _, f := range flows {
					if tv, ok := f.Tags[k]; ok && tv == v && (flt.FlowIDs == nil || f.ID == flt.FlowIDs[0]) {
						ids = append(ids, f.ID)
					}
				}
				flt.FlowIDs = ids
			}
			trails, total, err := a.store.ListTrails(ctx, p.Org.ID, flt)
			if err != nil {
				return nil, a.internal(ctx, "list trails", err)
			}
			out := &listOutput{}
			out.Body.Data = make([]listItem, 0, len(trails))
			for _, t := range trails {
				out.Body.Data = append(out.Body.Data, listItem{Name: t.Name, Description: t.Description, ComplianceState: t.State,
					Flow: names[t.FlowID], CreatedAt: t.CreatedAt, HTMLURL: a.trailURL(p.Org.Name, names[t.FlowID], t.Name)})
			}
			out.Body.Pagination = pagination(total, pg)
			return out, nil
		})
}

// TrailView is a trail as the API shows it.
type TrailView struct {
	Name             string            `json:"name"`
	Description      *string           `json:"description"`
	GitCommitInfo    json.RawMessage   `json:"git_commit_info,omitempty"`
	OriginURL        *string           `json:"origin_url"`
	UserData         json.RawMessage   `json:"user_data"`
	RepoIDs          []string          `json:"repo_ids"`
	LastModifiedAt   float64           `json:"last_modified_at"`
	CreatedAt        float64           `json:"created_at"`
	ComplianceStatus json.RawMessage   `json:"compliance_status"`
	Template         TemplateView      `json:"template"`
	ComplianceState  string            `json:"compliance_state"`
	IsCompliant      bool              `json:"is_compliant"`
	Events           []json.RawMessage `json:"events"`
	CreatedBy        string            `json:"created_by"`
	Flow             struct {
		Name string            `json:"name"`
		Tags map[string]string `json:"tags"`
	} `json:"flow"`
	ExternalURLs json.RawMessage `json:"external_urls"`
	HTMLURL      string          `json:"html_url"`
}

// TemplateView is the parsed template of a trail.
type TemplateView struct {
	Version int `json:"version"`
	Trail   struct {
		Attestations []template.Expected         `json:"attestations"`
		Artifacts    []template.ExpectedArtifact `json:"artifacts"`
	} `json:"trail"`
	Content string `json:"content"`
}

func (a *API) trailView(ctx context.Context, p *Principal, flow store.Flow, t store.Trail) (TrailView, error) {
	v := TrailView{Name: t.Name, Description: t.Description, GitCommitInfo: reduceCommit(t.GitCommitInfo), OriginURL: t.OriginURL,
		UserData: orJSON(t.UserData, "{}"), RepoIDs: []string{}, LastModifiedAt: t.LastModifiedAt, CreatedAt: t.CreatedAt,
		ComplianceStatus: t.Compliance, ComplianceState: t.State, IsCompliant: t.State == "COMPLIANT", CreatedBy: t.CreatedBy,
		ExternalURLs: orJSON(t.ExternalURLs, "null"), HTMLURL: a.trailURL(p.Org.Name, flow.Name, t.Name)}
	v.Flow.Name, v.Flow.Tags = flow.Name, flow.Tags
	if len(v.ComplianceStatus) == 0 {
		v.ComplianceStatus = json.RawMessage(`{"status":"INCOMPLETE","is_compliant":false,"attestations_statuses":[],"artifacts_statuses":{}}`)
	}
	if len(t.RepoInfo) > 0 {
		var ri struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(t.RepoInfo, &ri) == nil && ri.ID != "" {
			v.RepoIDs = append(v.RepoIDs, ri.ID)
		}
	}
	content, err := a.store.Template(ctx, t.TemplateID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return v, a.internal(ctx, "load template", err)
	}
	v.Template.Version, v.Template.Content = 1, content
	if tmpl, err := template.Parse([]byte(content)); err == nil {
		v.Template.Version = tmpl.Version
		v.Template.Trail.Attestations, v.Template.Trail.Artifacts = tmpl.Trail.Attestations, tmpl.Trail.Artifacts
	}
	if v.Template.Trail.Attestations == nil {
		v.Template.Trail.Attestations = []template.Expected{}
	}
	if v.Template.Trail.Artifacts == nil {
		v.Template.Trail.Artifacts = []template.ExpectedArtifact{}
	}
	events, err := a.store.TrailEvents(ctx, t.ID)
	if err != nil {
		return v, a.internal(ctx, "load trail events", err)
	}
	v.Events = make([]json.RawMessage, 0, len(events))
	for _, e := range events {
		v.Events = append(v.Events, e.Doc)
	}
	return v, nil
}

// reduceCommit keeps the fields the trail shows of a git commit.
func reduceCommit(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var c map[string]any
	if json.Unmarshal(raw, &c) != nil {
		return raw
	}
	out := map[string]any{}
	for _, k := range []string{"sha1", "message", "author", "branch", "timestamp", "url"} {
		out[k] = c[k]
	}
	b, _ := json.Marshal(out) // decoded JSON always re-encodes
	return b
}

func orJSON(raw json.RawMessage, fallback string) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(fallback)
	}
	return raw
}

// templateErrors is pydantic's text for a template's problems: "<N> validation errors for
// Template", then each field and, indented, its problem. "errors" is plural whatever N, as the
// hosted service's (one bad attestation type fails several union members there).
func templateErrors(fields map[string]string) string {
	keys := slices.Sorted(maps.Keys(fields))
	var b strings.Builder
	fmt.Fprintf(&b, "%d validation errors for Template", len(keys))
	for _, k := range keys {
		fmt.Fprintf(&b, "\n%s\n  %s", k, fields[k])
	}
	return b.String()
}
