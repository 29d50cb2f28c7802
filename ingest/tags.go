package ingest

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/contract"
)

func (a *API) registerTags() {
	type tagsInput struct {
		OrgPath
		Kind string `path:"kind" enum:"flow,flows,env,environment,environments,control,controls,repo,repos" doc:"what is tagged, as the user typed it: flow(s), env, environment(s), control(s) or repo(s) (by inner id)"`
		Name string `path:"name"`
		Body struct {
			SetTags    map[string]string `json:"set_tags,omitempty" required:"false"`
			RemoveTags []string          `json:"remove_tags,omitempty" required:"false" nullable:"true"`
		}
	}
	huma.Register(a.huma, op(http.MethodPatch, "/tags/{org}/{kind}/{name}", "updateTags", PrivWrite, "Set and remove tags of a flow, an environment or a control", "Tags"),
		func(ctx context.Context, in *tagsInput) (*stringOutput, error) {
			p := principalFrom(ctx)
			c := checker{}
			for k := range in.Body.SetTags {
				if k == "" {
					c["set_tags"] = "Tag keys cannot be empty"
				}
			}
			if err := c.err(); err != nil {
				return nil, err
			}
			switch in.Kind {
			case "flow", "flows":
				f, err := a.flowByName(ctx, p, in.Name)
				if err != nil {
					return nil, err
				}
				env := &contract.Envelope{Kind: contract.KindFlowTagged, FlowTags: &contract.FlowTags{FlowID: f.ID,
					SetTags: in.Body.SetTags, RemoveTags: in.Body.RemoveTags}}
				if err := a.publish(ctx, p, env); err != nil {
					return nil, err
				}
			case "control", "controls":
				if _, err := a.controlByID(ctx, p, in.Name); err != nil {
					var e *Error
					if errors.As(err, &e) && e.Status == http.StatusNotFound {
						// The hosted service's text for kosli tag begins with a quote.
						return nil, apiError(http.StatusNotFound, "\"%s", e.Message)
					}
					return nil, err
				}
				if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindControlChanged, Control: &contract.ControlChange{
					Identifier: in.Name, Op: contract.ControlTag, SetTags: in.Body.SetTags, RemoveTags: in.Body.RemoveTags}}); err != nil {
					return nil, err
				}
			case "repo", "repos":
				r, err := a.repoByID(ctx, p, in.Name)
				if err != nil {
					return nil, err
				}
				if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindRepoTagged, RepoTags: &contract.RepoTags{
					RepoID: r.ID, SetTags: in.Body.SetTags, RemoveTags: in.Body.RemoveTags}}); err != nil {
					return nil, err
				}
			default:
				if _, err := a.changeEnvironment(ctx, in.Name, "tagged", func(c *contract.EnvironmentChange) error {
					c.SetTags, c.RemoveTags = in.Body.SetTags, in.Body.RemoveTags
					return nil
				}); err != nil {
					return nil, err
				}
			}
			return &stringOutput{Status: http.StatusOK, Body: "OK"}, nil
		})
}
