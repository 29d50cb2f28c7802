package ingest

import (
	"context"
	"net/http"
	"path"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/policies/policyquery"
)

// WhatIfPayload is the optional payload part of what-if.
type WhatIfPayload struct {
	Name string `json:"name,omitempty" doc:"what to call the draft in the answer (default: the file's name)"`
	Type string `json:"type,omitempty" doc:"env (the default) or rego; a policy_file whose name ends in .rego is raw Rego too"`
}

func (a *API) registerWhatIf() {
	type whatIfInput struct {
		EnvPath
		ContentType string `header:"Content-Type"`
		RawBody     []byte `contentType:"multipart/form-data"`
	}
	type whatIfOutput struct{ Body policyquery.WhatIfResult }
	o := op(http.MethodPost, "/environments/{org}/{env}/what-if", "whatIfPolicy", PrivRead,
		"Judge the environment's latest snapshot against a draft policy, without attaching or storing it", "Policies")
	a.multipartOp(&o, "payload", "WhatIfPayload", "policy_file")
	o.RequestBody.Content["multipart/form-data"].Schema.Required = []string{"policy_file"}
	huma.Register(a.huma, o, func(ctx context.Context, in *whatIfInput) (*whatIfOutput, error) {
		res, err := a.whatIf(ctx, principalFrom(ctx), in.Env, in.ContentType, in.RawBody)
		if err != nil {
			return nil, err
		}
		return &whatIfOutput{Body: res}, nil
	})
}

func (a *API) whatIf(ctx context.Context, p *Principal, envName, contentType string, body []byte) (policyquery.WhatIfResult, error) {
	f, err := parseForm(contentType, body, nil, a.cfg.MaxFileBytes, a.cfg.MaxPartBytes)
	if err != nil {
		return policyquery.WhatIfResult{}, err
	}
	var payload WhatIfPayload
	if raw, ok := f.part("payload"); ok {
		if err := decodeJSONPart("payload", raw, &payload); err != nil {
			return policyquery.WhatIfResult{}, err
		}
	}
	c := checker{}
	checkPolicyType(c, payload.Type)
	if err := c.err(); err != nil {
		return policyquery.WhatIfResult{}, err
	}
	e, err := a.environmentByName(ctx, p, envName)
	if err != nil {
		return policyquery.WhatIfResult{}, err
	}
	file, err := a.readPolicyFile(ctx, p, f, payload.Type)
	if err != nil {
		return policyquery.WhatIfResult{}, err
	}
	draft := *file.policy
	draft.Name = payload.Name
	if draft.Name == "" {
		draft.Name = strings.TrimSuffix(path.Base(f.files["policy_file"].name), path.Ext(f.files["policy_file"].name))
	}
	if draft.Name == "" || draft.Name == "." {
		draft.Name = "draft"
	}
	res := policyquery.WhatIfResult{Environment: e.Name, Policy: draft.Name, Format: file.format, Compliant: true,
		Artifacts: []policyquery.WhatIfArtifact{}}
	err = a.queryError(ctx, a.query.WhatIf(ctx, p.Org.ID, e, &draft, &res), nil)
	return res, err
}
