package ingest

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/template"
)

// FlowWhatIfPayload is the optional payload part of a flow template's what-if.
type FlowWhatIfPayload struct {
	_    struct{} `additionalProperties:"true"`
	Name string   `json:"name,omitempty" doc:"what to call the draft in the answer (default: the file's name)"`
}

// FlowWhatIfResult is how a draft template would judge the latest trails of a flow.
type FlowWhatIfResult struct {
	Flow     string `json:"flow"`
	Template string `json:"template" doc:"the draft's name"`
	// TrailCount is every trail of the flow; the latest Limit of them are judged.
	TrailCount  int               `json:"trail_count"`
	JudgedCount int               `json:"judged_count"`
	Changed     int               `json:"changed_count" doc:"trails whose compliance state the draft would change"`
	Worse       int               `json:"worse_count" doc:"trails compliant today that the draft would make non-compliant or incomplete"`
	Trails      []FlowWhatIfTrail `json:"trails" doc:"the trails judged, newest first"`
}

// FlowWhatIfTrail is the verdict of the draft on one trail.
type FlowWhatIfTrail struct {
	Name         string   `json:"name"`
	CurrentState string   `json:"current_state" doc:"the trail's compliance state today"`
	DraftState   string   `json:"draft_state" doc:"its state under the draft: COMPLIANT, NON-COMPLIANT or INCOMPLETE"`
	Changed      bool     `json:"changed"`
	Reasons      []string `json:"reasons" doc:"what keeps the trail from being compliant under the draft"`
}

// Bounds of the trails one what-if judges.
const (
	defaultFlowWhatIfTrails = 100
	maxFlowWhatIfTrails     = 1000
)

func (a *API) registerFlowWhatIf() {
	type flowWhatIfInput struct {
		FlowPath
		Limit int `query:"limit" minimum:"0" maximum:"1000" doc:"how many of the latest trails to judge (default 100)"`
		FormBody
	}
	type flowWhatIfOutput struct{ Body FlowWhatIfResult }
	o := op(http.MethodPost, "/flows/{org}/{flow}/what-if", "whatIfFlowTemplate", PrivRead,
		"Judge the latest trails of a flow against a draft template, without storing it: which would change state", "Flows")
	parts := formParts{json: "payload", optional: true, files: []filePart{
		{name: "template_file", doc: "The draft flow template (YAML)", large: true, required: true}}}
	registerForm(a, o, parts, func(ctx context.Context, in *flowWhatIfInput, f *Form[FlowWhatIfPayload]) (*flowWhatIfOutput, error) {
		res, err := a.flowWhatIf(ctx, principalFrom(ctx), in.Flow, in.Limit, f)
		if err != nil {
			return nil, err
		}
		return &flowWhatIfOutput{Body: res}, nil
	})
}

func (a *API) flowWhatIf(ctx context.Context, p *Principal, flowName string, limit int, f *Form[FlowWhatIfPayload]) (FlowWhatIfResult, error) {
	flow, err := a.flowByName(ctx, p, flowName)
	if err != nil {
		return FlowWhatIfResult{}, err
	}
	content, ok := f.part("template_file")
	if !ok {
		return FlowWhatIfResult{}, fieldError("template_file", "Field required")
	}
	draft, err := parseTemplate("template_file", content, false)
	if err != nil {
		return FlowWhatIfResult{}, err
	}
	res := FlowWhatIfResult{Flow: flow.Name, Template: f.Payload.Name, Trails: []FlowWhatIfTrail{}}
	if res.Template == "" {
		ff, _ := f.file("template_file")
		res.Template = strings.TrimSuffix(path.Base(ff.name), path.Ext(ff.name))
	}
	if res.Template == "" || res.Template == "." {
		res.Template = "draft"
	}
	if limit <= 0 {
		limit = defaultFlowWhatIfTrails
	}
	a.awaitWrites(ctx, p) // judge the evidence acknowledged before the call
	trails, total, err := a.store.ListTrails(ctx, p.Org.ID, store.TrailFilter{FlowIDs: []string{flow.ID},
		Page: store.Page{Page: 1, PerPage: min(limit, maxFlowWhatIfTrails)}})
	if err != nil {
		return res, a.internal(ctx, "list trails", err)
	}
	res.TrailCount, res.JudgedCount = total, len(trails)
	// One engine per call: the draft is prepared once, and trails with the same evidence share a result.
	engine := template.NewEngine(template.EngineOptions{CacheSize: 1, ResultCacheSize: 256})
	ids := make([]string, len(trails))
	for i, t := range trails {
		ids[i] = t.ID
	}
	arts, err := a.store.TrailArtifactsByIDs(ctx, ids)
	if err != nil {
		return res, a.internal(ctx, "read trail artifacts", err)
	}
	for _, t := range trails {
		facts, err := a.store.TrailAttestationFacts(ctx, t.ID)
		if err != nil {
			return res, a.internal(ctx, "read trail attestations", err)
		}
		c, err := engine.Evaluate(ctx, draft, whatIfTrailInput(facts, arts[t.ID]))
		if err != nil {
			return res, a.internal(ctx, "evaluate the draft template", err)
		}
		v := FlowWhatIfTrail{Name: t.Name, CurrentState: t.State, DraftState: c.State, Changed: c.State != t.State,
			Reasons: complianceReasons(c, draft.Trail)}
		if v.Changed {
			res.Changed++
			if t.State == template.StateCompliant {
				res.Worse++
			}
		}
		res.Trails = append(res.Trails, v)
	}
	return res, nil
}

// whatIfTrailInput is the engine's input from a trail's stored evidence, as the evaluator builds it: an override
// takes the place (and the report time) of the attestation it replaces.
func whatIfTrailInput(facts []store.AttestationFact, arts []store.Artifact) template.TrailInput {
	overrides := map[string]store.AttestationFact{}
	for _, a := range facts {
		if a.OverridesID != "" {
			overrides[a.OverridesID] = a
		}
	}
	var in template.TrailInput
	for _, a := range facts {
		if a.OverridesID != "" {
			continue
		}
		x := template.Attestation{ID: a.ID, Name: a.Name, Type: a.Type, IsCompliant: a.IsCompliant, CreatedAt: a.CreatedAt,
			ArtifactFingerprint: a.ArtifactFingerprint, TargetArtifact: a.TargetArtifact}
		if o, ok := overrides[a.ID]; ok {
			x.ID, x.OverriddenID, x.IsCompliant = o.ID, a.ID, o.IsCompliant
		}
		in.Attestations = append(in.Attestations, x)
	}
	for _, a := range arts {
		in.Artifacts = append(in.Artifacts, template.Artifact{ID: a.ID, Fingerprint: a.Fingerprint, TemplateName: a.TemplateName,
			CreatedAt: a.CreatedAt})
	}
	return in
}

// complianceReasons says what keeps a trail from being compliant: each missing or non-compliant attestation of
// the trail, then of each artifact that is not compliant (the template's artifacts in its order, then unexpected
// ones by name).
func complianceReasons(c template.TrailCompliance, spec template.TrailSpec) []string {
	out := attestationReasons("trail", c.Attestations)
	keys := make([]string, 0, len(c.Artifacts))
	for _, a := range spec.Artifacts {
		keys = append(keys, a.Name)
	}
	var unexpected []string
	for k := range c.Artifacts {
		if !slices.Contains(keys, k) {
			unexpected = append(unexpected, k)
		}
	}
	slices.Sort(unexpected)
	for _, k := range append(keys, unexpected...) {
		a, ok := c.Artifacts[k]
		switch {
		case !ok || a.Status == template.StateCompliant:
		case a.Status == template.StatusMissing:
			out = append(out, fmt.Sprintf("artifact %s: not reported", k))
		default:
			out = append(out, attestationReasons("artifact "+k, a.Attestations)...)
		}
	}
	return out
}

// attestationReasons lists the attestations of one level that are missing or not compliant.
func attestationReasons(level string, ss []template.AttestationStatus) []string {
	out := []string{}
	for _, s := range ss {
		switch {
		case s.Status == template.StatusMissing:
			out = append(out, fmt.Sprintf("%s: %s (%s) is missing", level, s.Name, s.Type))
		case s.IsCompliant != nil && !*s.IsCompliant:
			out = append(out, fmt.Sprintf("%s: %s (%s) is not compliant", level, s.Name, s.Type))
		}
	}
	return out
}
