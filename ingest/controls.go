package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// ControlPostInput creates a control (the Kosli CLI's contract check reads this component).
type ControlPostInput struct {
	Identifier  string `json:"identifier" pattern:"^[a-zA-Z0-9\\-._~]+$" maxLength:"256" doc:"unique in the organization; decisions and policies name the control by it"`
	Name        string `json:"name" maxLength:"256"`
	Description string `json:"description,omitempty" required:"false"`
}

// ControlPutInput makes a new version of a control; an absent field keeps its value.
type ControlPutInput struct {
	Name        *string `json:"name,omitempty" required:"false" maxLength:"256"`
	Description *string `json:"description,omitempty" required:"false" doc:"an empty string clears it"`
	// Decoded by the handler, which words a value that is not an object as the hosted service does.
	Links json.RawMessage `json:"links,omitempty" required:"false" doc:"object {label: url}; replaces every link of the control ({} removes them)"`
}

// links decodes the links of an update: nil when absent, a field error when not an object of
// strings.
func (in ControlPutInput) links(c checker) *map[string]string {
	if isJSONNull(in.Links) {
		return nil
	}
	checkObject(c, "links", in.Links)
	if len(c) > 0 {
		return nil
	}
	var links map[string]string
	if err := json.Unmarshal(in.Links, &links); err != nil {
		c["links"] = "Input should be a valid dictionary of strings [input: " + inputEcho(in.Links) + "]"
		return nil
	}
	for label, url := range links {
		if url == "" {
			c["links."+label] = "String should have at least 1 character [input: ]"
		}
	}
	return &links
}

// ControlView is a control as the API shows it.
type ControlView struct {
	Identifier     string               `json:"identifier"`
	Name           string               `json:"name"`
	Description    string               `json:"description"`
	Version        int                  `json:"version"`
	Archived       bool                 `json:"archived"`
	Tags           map[string]string    `json:"tags"`
	Links          map[string]string    `json:"links" doc:"the current version's links, {} when none"`
	CreatedBy      string               `json:"created_by"`
	CreatedAt      float64              `json:"created_at"`
	LastModifiedAt float64              `json:"last_modified_at"`
	Versions       []ControlVersionView `json:"versions"`
	Org            string               `json:"org"`
	HTMLURL        string               `json:"html_url"`
}

// ControlVersionView is one version of a control, oldest first in ControlView.Versions.
type ControlVersionView struct {
	Version     int               `json:"version"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Links       map[string]string `json:"links"`
	CreatedBy   string            `json:"created_by"`
	CreatedAt   float64           `json:"created_at"`
}

func nonNilLinks(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func (a *API) controlView(org string, c store.Control) ControlView {
	cur := c.Current()
	v := ControlView{Identifier: c.Identifier, Name: cur.Name, Description: cur.Description, Version: cur.Version,
		Archived: c.Archived, Tags: c.Tags, Links: nonNilLinks(cur.Links), LastModifiedAt: cur.CreatedAt, Org: org,
		HTMLURL: a.cfg.BaseURL + "/" + org + "/controls/" + c.Identifier, Versions: make([]ControlVersionView, 0, len(c.Versions))}
	if v.Tags == nil {
		v.Tags = map[string]string{}
	}
	if len(c.Versions) > 0 {
		v.CreatedBy, v.CreatedAt = c.Versions[0].CreatedBy, c.Versions[0].CreatedAt
	}
	for _, ver := range c.Versions {
		v.Versions = append(v.Versions, ControlVersionView{Version: ver.Version, Name: ver.Name, Description: ver.Description,
			Links: nonNilLinks(ver.Links), CreatedBy: ver.CreatedBy, CreatedAt: ver.CreatedAt})
	}
	return v
}

// controlByID finds a control of the caller's organization, archived or not.
func (a *API) controlByID(ctx context.Context, p *Principal, id string) (store.Control, error) {
	c, err := lookup(ctx, a, p, func() (store.Control, error) { return a.store.Control(ctx, p.Org.ID, id) })
	if errors.Is(err, store.ErrNotFound) {
		return c, apiError(http.StatusNotFound, "Control '%s' does not exist in organization '%s'", id, p.Org.Name)
	}
	if err != nil {
		return c, a.internal(ctx, "look up control", err)
	}
	return c, nil
}

// ControlPath names one control.
type ControlPath struct {
	OrgPath
	Control string `path:"control" doc:"control identifier"`
}

func (a *API) registerControls() {
	type createInput struct {
		OrgPath
		Body ControlPostInput
	}
	o := op(http.MethodPost, "/controls/{org}", "createControl", PrivWrite, "Create a control", "Controls")
	o.DefaultStatus = http.StatusCreated
	o.Errors = append(o.Errors, http.StatusConflict) // an identifier taken (the CLI does not retry this 409)
	huma.Register(a.huma, o, func(ctx context.Context, in *createInput) (*stringOutput, error) {
		p := principalFrom(ctx)
		b := in.Body
		c := checker{}
		c.name("identifier", b.Identifier, controlIDRE, controlIDPattern)
		c.name("name", b.Name, nil, "")
		if err := c.err(); err != nil {
			return nil, err
		}
		// Identifiers stay taken after archiving: decisions recorded against one keep their meaning.
		// lookup waits for the organization's writes in flight on a miss, so a create right after a create conflicts.
		switch _, err := lookup(ctx, a, p, func() (store.Control, error) { return a.store.Control(ctx, p.Org.ID, b.Identifier) }); {
		case err == nil:
			return nil, apiError(http.StatusConflict, "A control with identifier '%s' already exists in organization '%s'", b.Identifier, p.Org.Name)
		case !errors.Is(err, store.ErrNotFound):
			return nil, a.internal(ctx, "look up control", err)
		}
		if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindControlChanged, Control: &contract.ControlChange{
			Identifier: b.Identifier, Op: contract.ControlCreate, Name: &b.Name, Description: &b.Description}}); err != nil {
			return nil, err
		}
		return &stringOutput{Status: http.StatusCreated, Body: fmt.Sprintf("Control '%s' was created", b.Identifier)}, nil
	})

	type updateInput struct {
		ControlPath
		Body ControlPutInput
	}
	huma.Register(a.huma, op(http.MethodPut, "/controls/{org}/{control}", "updateControl", PrivWrite,
		"Make a new version of a control", "Controls"),
		func(ctx context.Context, in *updateInput) (*stringOutput, error) {
			p := principalFrom(ctx)
			if in.Body.Name != nil && *in.Body.Name == "" {
				return nil, fieldError("name", "Name cannot be empty")
			}
			c := checker{}
			c.optionalName("name", in.Body.Name, nil, "")
			links := in.Body.links(c)
			if err := c.err(); err != nil {
				return nil, err
			}
			if _, err := a.controlByID(ctx, p, in.Control); err != nil {
				return nil, err
			}
			if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindControlChanged, Control: &contract.ControlChange{
				Identifier: in.Control, Op: contract.ControlUpdate, Name: in.Body.Name, Description: in.Body.Description,
				Links: links}}); err != nil {
				return nil, err
			}
			return &stringOutput{Status: http.StatusOK, Body: fmt.Sprintf("Control '%s' was updated", in.Control)}, nil
		})

	type getOutput struct{ Body ControlView }
	huma.Register(a.huma, op(http.MethodGet, "/controls/{org}/{control}", "getControl", PrivRead, "Get a control with its versions", "Controls"),
		func(ctx context.Context, in *ControlPath) (*getOutput, error) {
			p := principalFrom(ctx)
			c, err := a.controlByID(ctx, p, in.Control)
			if err != nil {
				return nil, err
			}
			return &getOutput{Body: a.controlView(p.Org.Name, c)}, nil
		})

	type listInput struct {
		OrgPath
		Page          int      `query:"page" minimum:"0"`
		PerPage       int      `query:"per_page" minimum:"0" maximum:"100"`
		Archived      bool     `query:"archived" doc:"list the archived controls instead of the active ones"`
		Search        string   `query:"search" doc:"a part of the identifier or the name, any case"`
		Tags          []string `query:"tag,explode" doc:"key (the tag is set) or key:value; repeat for all of several"`
		SortDirection string   `query:"sort_direction" doc:"by identifier: asc (default) or desc"`
	}
	type listBody struct {
		Controls   []ControlView `json:"controls"`
		Page       int           `json:"page"`
		PerPage    int           `json:"per_page"`
		TotalPages int           `json:"total_pages"`
		TotalCount int           `json:"total_count"`
	}
	type listOutput struct{ Body listBody }
	huma.Register(a.huma, op(http.MethodGet, "/controls/{org}", "listControls", PrivRead, "List controls", "Controls"),
		func(ctx context.Context, in *listInput) (*listOutput, error) {
			p := principalFrom(ctx)
			c := checker{}
			checkChoice(c, "sort_direction", in.SortDirection, sortDirections)
			if len(c) > 0 {
				return nil, validationFailed(c)
			}
			pg := pageOf(in.Page, in.PerPage, 20)
			all, _, err := a.store.ListControls(ctx, p.Org.ID, store.ControlFilter{Archived: in.Archived})
			if err != nil {
				return nil, a.internal(ctx, "list controls", err)
			}
			search := strings.ToLower(in.Search)
			cs := make([]store.Control, 0, len(all))
			for _, ctl := range all {
				if (strings.Contains(strings.ToLower(ctl.Identifier), search) || strings.Contains(strings.ToLower(ctl.Current().Name), search)) &&
					tagsMatch(ctl.Tags, in.Tags) {
					cs = append(cs, ctl)
				}
			}
			if in.SortDirection == "desc" {
				slices.Reverse(cs) // the store lists by identifier
			}
			lo, hi := window(len(cs), pg)
			views := make([]ControlView, 0, hi-lo)
			for _, ctl := range cs[lo:hi] {
				views = append(views, a.controlView(p.Org.Name, ctl))
			}
			pages := pagination(len(cs), pg)
			return &listOutput{Body: listBody{Controls: views, Page: pages.Page, PerPage: pg.PerPage, TotalPages: pages.PageCount,
				TotalCount: len(cs)}}, nil
		})

	for _, change := range []struct {
		op   contract.ControlOp
		verb string
	}{{contract.ControlArchive, "archived"}, {contract.ControlUnarchive, "unarchived"}} {
		huma.Register(a.huma, op(http.MethodPost, "/controls/{org}/{control}/"+string(change.op), string(change.op)+"Control", PrivWrite,
			"Control: "+string(change.op), "Controls"),
			func(ctx context.Context, in *ControlPath) (*stringOutput, error) {
				p := principalFrom(ctx)
				if _, err := a.controlByID(ctx, p, in.Control); err != nil {
					return nil, err
				}
				if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindControlChanged, Control: &contract.ControlChange{
					Identifier: in.Control, Op: change.op}}); err != nil {
					return nil, err
				}
				return &stringOutput{Status: http.StatusOK, Body: fmt.Sprintf("Control '%s' was %s", in.Control, change.verb)}, nil
			})
	}
}
