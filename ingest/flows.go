package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"gopkg.in/yaml.v3"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// FlowView is a flow as the API shows it.
type FlowView struct {
	ID               string            `json:"id"`
	Name             string            `json:"name"`
	Description      string            `json:"description"`
	Visibility       string            `json:"visibility"`
	Org              string            `json:"org"`
	Template         string            `json:"template" doc:"The flow template YAML"`
	Tags             map[string]string `json:"tags"`
	RepoURL          *string           `json:"repo_url"`
	LastDeploymentAt *float64          `json:"last_deployment_at"`
	HTMLURL          string            `json:"html_url"`
}

func (a *API) flowView(org string, f store.Flow) FlowView {
	v := FlowView{ID: f.ID, Name: f.Name, Description: f.Description, Visibility: f.Visibility, Org: org,
		Template: f.Template, Tags: f.Tags, HTMLURL: a.cfg.BaseURL + "/" + org + "/flows/" + f.Name}
	if v.Tags == nil {
		v.Tags = map[string]string{}
	}
	if f.RepoURL != "" {
		v.RepoURL = &f.RepoURL
	}
	return v
}

// OrgPath, FlowPath and TrailPath are the path parameters operations embed (exported, so
// that Huma sees the embedded fields).
type OrgPath struct {
	Org string `path:"org" doc:"Organization name"`
}

type FlowPath struct {
	Org  string `path:"org" doc:"Organization name"`
	Flow string `path:"flow" doc:"Flow name"`
}

// FlowInput is the data_json of create flow.
type FlowInput struct {
	Name        string  `json:"name" pattern:"^[a-zA-Z0-9][a-zA-Z0-9\\.\\-_~]*$" maxLength:"256"`
	Description string  `json:"description"`
	Visibility  *string `json:"visibility,omitempty"`
}

// orgForm is the input of a multipart operation on an organization.
type orgForm struct {
	OrgPath
	FormBody
}

type stringOutput struct {
	Status int
	Body   string
}

func (a *API) registerFlows() {
	o := op(http.MethodPut, "/flows/{org}/template_file", "createFlowWithTemplate", PrivWrite,
		"Create or update a flow with a template file", "Flows")
	o.DefaultStatus = http.StatusCreated
	parts := formParts{json: "data_json", files: []filePart{{name: "template_file", doc: "The flow's template (YAML)", large: true}}}
	registerForm(a, o, parts, func(ctx context.Context, in *orgForm, f *Form[FlowInput]) (*stringOutput, error) {
		tmpl, _ := f.part("template_file")
		return a.upsertFlow(ctx, principalFrom(ctx), f.Payload, tmpl)
	})

	type legacyInput struct {
		OrgPath
		Body struct {
			FlowInput
			Template []string `json:"template,omitempty" doc:"Deprecated list of required evidence names"`
		}
	}
	o = op(http.MethodPut, "/flows/{org}", "createFlow", PrivWrite, "Create or update a flow (legacy JSON form)", "Flows")
	o.DefaultStatus = http.StatusCreated
	huma.Register(a.huma, o, func(ctx context.Context, in *legacyInput) (*stringOutput, error) {
		return a.upsertFlow(ctx, principalFrom(ctx), in.Body.FlowInput, legacyTemplate(in.Body.Template))
	})

	type getOutput struct{ Body FlowView }
	huma.Register(a.huma, op(http.MethodGet, "/flows/{org}/{flow}", "getFlow", PrivRead, "Get a flow", "Flows"),
		func(ctx context.Context, in *FlowPath) (*getOutput, error) {
			p := principalFrom(ctx)
			f, err := a.flowByName(ctx, p, in.Flow)
			if err != nil {
				return nil, err
			}
			return &getOutput{Body: a.flowView(p.Org.Name, f)}, nil
		})

	type listOutput struct {
		Body any `doc:"A bare array of flows, or {data, pagination} when page or per_page is given"`
	}
	huma.Register(a.huma, op(http.MethodGet, "/flows/{org}", "listFlows", PrivRead, "List flows", "Flows"),
		func(ctx context.Context, in *flowListInput) (*listOutput, error) {
			p := principalFrom(ctx)
			if in.emptySearch {
				return nil, apiError(http.StatusBadRequest, "Empty string is not allowed for flow names.")
			}
			pg, paged := optionalPage(in.Page, in.PerPage)
			flows, total, err := a.store.ListFlows(ctx, p.Org.ID, store.FlowFilter{NameContains: in.SearchByName, CaseSensitive: in.CaseSensitive, Page: pg})
			if err != nil {
				return nil, a.internal(ctx, "list flows", err)
			}
			views := make([]FlowView, 0, len(flows))
			for _, f := range flows {
				views = append(views, a.flowView(p.Org.Name, f))
			}
			if !paged {
				return &listOutput{Body: views}, nil
			}
			return &listOutput{Body: map[string]any{"data": views, "pagination": pagination(total, pg)}}, nil
		})

	type flowRenameInput struct {
		FlowPath
		Body struct {
			NewName string `json:"new_name" pattern:"^[a-zA-Z0-9][a-zA-Z0-9\\.\\-_~]*$" maxLength:"256"`
		}
	}
	huma.Register(a.huma, op(http.MethodPut, "/flows/{org}/{flow}/rename", "renameFlow", PrivWrite, "Rename a flow", "Flows"),
		func(ctx context.Context, in *flowRenameInput) (*stringOutput, error) {
			p := principalFrom(ctx)
			c := checker{}
			c.name("new_name", in.Body.NewName, flowNameRE, flowNamePattern)
			if err := c.err(); err != nil {
				return nil, err
			}
			f, err := a.flowByName(ctx, p, in.Flow)
			if err != nil {
				return nil, err
			}
			if _, err := a.store.FlowByName(ctx, p.Org.ID, in.Body.NewName); err == nil {
				return nil, fieldError("new_name", "A flow named '%s' already exists", in.Body.NewName)
			}
			env := &contract.Envelope{Kind: contract.KindFlowRenamed, FlowRename: &contract.FlowRename{FlowID: f.ID, NewName: in.Body.NewName}}
			if err := a.publish(ctx, p, env); err != nil {
				return nil, err
			}
			return &stringOutput{Status: http.StatusOK, Body: fmt.Sprintf("Flow '%s' was renamed to '%s'", in.Flow, in.Body.NewName)}, nil
		})

	huma.Register(a.huma, op(http.MethodPut, "/flows/{org}/{flow}/archive", "archiveFlow", PrivWrite, "Archive a flow", "Flows"),
		func(ctx context.Context, in *FlowPath) (*stringOutput, error) {
			p := principalFrom(ctx)
			f, err := a.flowByName(ctx, p, in.Flow)
			if err != nil {
				return nil, err
			}
			if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindFlowArchived, FlowArchive: &contract.FlowRef{FlowID: f.ID}}); err != nil {
				return nil, err
			}
			return &stringOutput{Status: http.StatusOK, Body: fmt.Sprintf("Flow '%s' was archived", in.Flow)}, nil
		})
}

func (a *API) upsertFlow(ctx context.Context, p *Principal, in FlowInput, tmplFile []byte) (*stringOutput, error) {
	c := checker{}
	c.name("name", in.Name, flowNameRE, flowNamePattern)
	visibility := "private"
	if in.Visibility != nil && *in.Visibility != "" {
		visibility = *in.Visibility
		if visibility != "private" && visibility != "public" {
			c["visibility"] = fmt.Sprintf("Input should be 'private' or 'public' [input: %s]", visibility)
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	tmpl, err := parseTemplate("template_file", tmplFile, false)
	if err != nil {
		return nil, err
	}
	existing, err := lookup(ctx, a, p, func() (store.Flow, error) { return a.store.FlowByName(ctx, p.Org.ID, in.Name) })
	created := errors.Is(err, store.ErrNotFound)
	if err != nil && !created {
		return nil, a.internal(ctx, "look up flow", err)
	}
	id := existing.ID
	if created {
		id = newID()
	}
	env := &contract.Envelope{Kind: contract.KindFlowUpserted, Flow: &contract.FlowUpsert{
		ID: id, Name: in.Name, Description: in.Description, Visibility: visibility, Template: tmpl.Content, TemplateID: tmpl.ID,
	}}
	if err := a.publish(ctx, p, env); err != nil {
		return nil, err
	}
	// The hosted service's body, "OK", either way; the status tells created from updated.
	if created {
		return &stringOutput{Status: http.StatusCreated, Body: "OK"}, nil
	}
	return &stringOutput{Status: http.StatusOK, Body: "OK"}, nil
}

// legacyTemplate turns the deprecated list form (["artifact", "unit-test", ...]) into a
// template: every name but "artifact" becomes a trail attestation of any type.
func legacyTemplate(names []string) []byte {
	type att struct {
		Name string `yaml:"name"`
		Type string `yaml:"type"`
	}
	doc := struct {
		Version int `yaml:"version"`
		Trail   struct {
			Attestations []att `yaml:"attestations,omitempty"`
		} `yaml:"trail"`
	}{Version: 1}
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" && n != "artifact" {
			doc.Trail.Attestations = append(doc.Trail.Attestations, att{Name: n, Type: "*"})
		}
	}
	b, _ := yaml.Marshal(doc) // a struct of strings always marshals
	return b
}

// Pagination is the pagination object of paged lists.
type Pagination struct {
	Total     int `json:"total"`
	Page      int `json:"page"`
	PerPage   int `json:"per_page"`
	PageCount int `json:"page_count"`
}

// pageOf is the requested page, with perPage defaulting to def.
// flowListInput is list flows' query. search_by_name is case-sensitive unless case_sensitive
// is false, as the hosted service's.
type flowListInput struct {
	OrgPath
	Page          int    `query:"page" minimum:"0" doc:"Page number; with per_page the answer is paged"`
	PerPage       int    `query:"per_page" minimum:"0" maximum:"100"`
	SearchByName  string `query:"search_by_name" doc:"Only flows whose name contains this; not empty"`
	CaseSensitive bool   `query:"case_sensitive" default:"true" doc:"false: search_by_name matches in any case"`
	// emptySearch is a search_by_name sent empty, which Huma cannot tell from one not sent.
	emptySearch bool
}

// Resolve notes an empty search_by_name (huma.Resolver).
func (in *flowListInput) Resolve(ctx huma.Context) []error {
	u := ctx.URL()
	q := u.Query()
	in.emptySearch = q.Has("search_by_name") && q.Get("search_by_name") == ""
	return nil
}

func pageOf(page, perPage, def int) store.Page {
	if perPage == 0 {
		perPage = def
	}
	return store.Page{Page: max(page, 1), PerPage: perPage}
}

// optionalPage is the page of a list that is a bare array unless paging is asked for.
func optionalPage(page, perPage int) (store.Page, bool) {
	if page == 0 && perPage == 0 {
		return store.Page{}, false
	}
	return pageOf(page, perPage, 20), true
}

func pagination(total int, p store.Page) Pagination {
	pages := 1
	if p.PerPage > 0 {
		pages = (total + p.PerPage - 1) / p.PerPage
	}
	return Pagination{Total: total, Page: max(p.Page, 1), PerPage: p.PerPage, PageCount: pages}
}
