package ingest

import (
	"context"
	"net/http"
	"path"
	"strings"

	"github.com/veritrail/veritrail/policies/policyquery"
)

// WhatIfPayload is the optional payload part of what-if.
type WhatIfPayload struct {
	_    struct{} `additionalProperties:"true"`
	Name string   `json:"name,omitempty" doc:"what to call the draft in the answer (default: the file's name)"`
	Type string   `json:"type,omitempty" doc:"env (the default) or rego; a policy_file whose name ends in .rego is raw Rego too"`
}

func (w *WhatIfPayload) check(c checker, _ *form) { checkPolicyType(c, w.Type) }

func (a *API) registerWhatIf() {
	type whatIfInput struct {
		EnvPath
		FormBody
	}
	type whatIfOutput struct{ Body policyquery.WhatIfResult }
	o := op(http.MethodPost, "/environments/{org}/{env}/what-if", "whatIfPolicy", PrivRead,
		"Judge the environment's latest snapshot against a draft policy, without attaching or storing it", "Policies")
	parts := policyParts(true)
	parts.decoding = decodeValue
	registerForm(a, o, parts, func(ctx context.Context, in *whatIfInput, f *Form[WhatIfPayload]) (*whatIfOutput, error) {
		res, err := a.whatIf(ctx, principalFrom(ctx), in.Env, f)
		if err != nil {
			return nil, err
		}
		return &whatIfOutput{Body: res}, nil
	})
}

func (a *API) whatIf(ctx context.Context, p *Principal, envName string, f *Form[WhatIfPayload]) (policyquery.WhatIfResult, error) {
	payload := f.Payload
	e, err := a.environmentByName(ctx, p, envName)
	if err != nil {
		return policyquery.WhatIfResult{}, err
	}
	file, err := a.readPolicyFile(ctx, p, f.parts, payload.Type)
	if err != nil {
		return policyquery.WhatIfResult{}, err
	}
	draft := *file.policy
	draft.Name = payload.Name
	if draft.Name == "" {
		ff, _ := f.file("policy_file")
		draft.Name = strings.TrimSuffix(path.Base(ff.name), path.Ext(ff.name))
	}
	if draft.Name == "" || draft.Name == "." {
		draft.Name = "draft"
	}
	res := policyquery.WhatIfResult{Environment: e.Name, Policy: draft.Name, Format: file.format, Compliant: true,
		Artifacts: []policyquery.WhatIfArtifact{}}
	err = a.queryError(ctx, a.query.WhatIf(ctx, p.Org.ID, e, &draft, &res), nil)
	return res, err
}
