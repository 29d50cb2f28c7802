package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"strings"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policyeval"
)

// WhatIfPayload is the optional payload part of what-if.
type WhatIfPayload struct {
	_    struct{} `additionalProperties:"true"`
	Name string   `json:"name,omitempty" doc:"what to call the draft in the answer (default: the file's name)"`
	Type string   `json:"type,omitempty" doc:"env (the default) or rego; a policy_file whose name ends in .rego is raw Rego too"`
}

func (w *WhatIfPayload) check(c checker, _ *form) { checkPolicyType(c, w.Type) }

// WhatIfResult is how a draft policy would judge an environment's latest snapshot.
type WhatIfResult struct {
	Environment   string `json:"environment"`
	SnapshotIndex *int   `json:"snapshot_index" doc:"null when the environment has no snapshot yet"`
	Policy        string `json:"policy"`
	Format        string `json:"format" enum:"yaml,rego"`
	// Compliant is whether every artifact would comply with the draft (allowlisted ones do whatever it says).
	Compliant     bool             `json:"compliant"`
	ArtifactCount int              `json:"artifact_count"`
	FailingCount  int              `json:"failing_count"`
	Artifacts     []WhatIfArtifact `json:"artifacts" doc:"every artifact of the snapshot, those that would fail first"`
}

// WhatIfArtifact is one artifact under the draft.
type WhatIfArtifact struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	Compliant   bool   `json:"compliant"`
	Allowlisted bool   `json:"allowlisted"`
	// CurrentlyCompliant is the verdict of the environment's attached policies now (null without policies).
	CurrentlyCompliant *bool                 `json:"currently_compliant"`
	Evaluation         policyeval.Evaluation `json:"policy_evaluation"`
}

func (a *API) registerWhatIf() {
	type whatIfInput struct {
		EnvPath
		FormBody
	}
	type whatIfOutput struct{ Body WhatIfResult }
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

func (a *API) whatIf(ctx context.Context, p *Principal, envName string, f *Form[WhatIfPayload]) (WhatIfResult, error) {
	payload := f.Payload
	e, err := a.environmentByName(ctx, p, envName)
	if err != nil {
		return WhatIfResult{}, err
	}
	file, err := a.readPolicyFile(ctx, p, f.parts, payload.Type)
	if err != nil {
		return WhatIfResult{}, err
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
	res := WhatIfResult{Environment: e.Name, Policy: draft.Name, Format: file.format, Compliant: true, Artifacts: []WhatIfArtifact{}}
	latest, err := a.store.LatestSnapshot(ctx, e.ID)
	if errors.Is(err, store.ErrNotFound) {
		return res, nil
	}
	if err != nil {
		return res, a.internal(ctx, "load snapshot", err)
	}
	res.SnapshotIndex = &latest.Index
	var running []struct {
		Name        string `json:"name"`
		Fingerprint string `json:"fingerprint"`
	}
	if err := json.Unmarshal(latest.Artifacts, &running); err != nil {
		return res, a.internal(ctx, "decode snapshot", err)
	}
	fps := make([]string, len(running))
	for i, r := range running {
		fps[i] = r.Fingerprint
	}
	ev, err := policyeval.LoadReports(ctx, a.store, p.Org.ID, fps)
	if err == nil {
		err = ev.LoadAttestations(ctx, a.store, nil)
	}
	if err != nil {
		return res, a.internal(ctx, "load evidence", err)
	}
	entries, err := a.store.Allowlist(ctx, e.ID)
	if err != nil {
		return res, a.internal(ctx, "load allowlist", err)
	}
	allowed := map[string]bool{}
	for _, x := range entries {
		allowed[x.Fingerprint] = true
	}
	current := map[store.VerdictKey]bool{}
	if e.State != nil {
		vs, err := a.store.Verdicts(ctx, e.ID, nil)
		if err != nil {
			return res, a.internal(ctx, "load verdicts", err)
		}
		for _, v := range vs {
			current[v.Key()] = v.Compliant
		}
	}
	arts := make([]envpolicy.Artifact, len(running))
	for i, r := range running {
		arts[i] = ev.Artifact(r.Name, r.Fingerprint, allowed[r.Fingerprint])
	}
	evals, _, err := a.evaluateOne(ctx, &draft, envpolicy.NewInput(policyeval.Environment(e), arts))
	if err != nil {
		return res, err
	}
	var failing, passing []WhatIfArtifact
	for i, r := range running {
		w := WhatIfArtifact{Name: r.Name, Fingerprint: r.Fingerprint, Allowlisted: allowed[r.Fingerprint], Evaluation: evals[i]}
		w.Compliant = evals[i].Compliant || w.Allowlisted
		if c, ok := current[store.VerdictKey{Name: r.Name, Fingerprint: r.Fingerprint}]; ok {
			w.CurrentlyCompliant = &c
		}
		if w.Compliant {
			passing = append(passing, w)
		} else {
			failing = append(failing, w)
		}
	}
	res.Artifacts = append(append(res.Artifacts, failing...), passing...)
	res.ArtifactCount, res.FailingCount, res.Compliant = len(running), len(failing), len(failing) == 0
	return res, nil
}
