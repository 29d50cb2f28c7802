package ingest

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/store"
)

// inDefaultOrgKey marks an operation that names no organization: the caller acts in its
// default one (auth.Authenticator.InDefaultOrg).
const inDefaultOrgKey = "in-default-org"

// The user's default organization (`kosli update default-org`, `kosli get default-org`) and
// the organization's experimental features (`kosli enable beta`).
func (a *API) registerUsers() {
	const tag = "Users"
	type setOutput struct{ Body string }
	huma.Register(a.huma, op(http.MethodPut, "/user/{org}", "setDefaultOrg", PrivRead,
		"Make the organization the caller's default (the body is null)", tag),
		func(ctx context.Context, in *OrgPath) (*setOutput, error) {
			p := principalFrom(ctx)
			// A service account's key works in its own organization only, which is therefore
			// its default already: only a person's choice is kept.
			if p.UserID != "" {
				err := a.changeIdentities(ctx, p, func(tx store.IdentityTx) error { return tx.SetDefaultOrg(ctx, p.UserID, p.Org.ID) })
				if err != nil {
					return nil, a.identityError(ctx, "set default organization", err)
				}
			}
			return &setOutput{Body: "OK"}, nil
		})

	type defaultOutput struct {
		Body struct {
			DefaultOrgName string `json:"default_org_name"`
		}
	}
	o := op(http.MethodGet, "/user/default-org", "getDefaultOrg", PrivRead, "The caller's default organization", tag)
	o.Metadata[inDefaultOrgKey] = true
	huma.Register(a.huma, o, func(ctx context.Context, _ *struct{}) (*defaultOutput, error) {
		out := &defaultOutput{}
		out.Body.DefaultOrgName = principalFrom(ctx).Org.Name
		return out, nil
	})

	type featuresInput struct {
		OrgPath
		Body struct {
			Enabled bool `json:"experimental_features_enabled"`
		}
	}
	huma.Register(a.huma, op(http.MethodPut, "/organizations/{org}/experimental_features", "setExperimentalFeatures", PrivAdmin,
		"Enable or disable the organization's beta features (Veritrail has none behind this switch)", tag),
		func(ctx context.Context, in *featuresInput) (*setOutput, error) {
			return &setOutput{Body: "OK"}, nil
		})
}
