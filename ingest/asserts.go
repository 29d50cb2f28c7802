package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/ingest/answers"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policyeval"
)

// Assertion scopes.
const (
	ScopeFlow        = "flow"
	ScopeEnvironment = "environment"
	ScopePolicy      = "policy"
)

// AssertResult is the assertion result: whether an artifact may ship, and why.
type AssertResult struct {
	Fingerprint       string                  `json:"fingerprint"`
	Flow              string                  `json:"flow"`
	Trail             string                  `json:"trail"`
	Compliant         bool                    `json:"compliant"`
	Scope             string                  `json:"scope" enum:"flow,environment,policy"`
	ComplianceStatus  AssertCompliance        `json:"compliance_status"`
	HTMLURL           string                  `json:"html_url"`
	Flows             []AssertFlow            `json:"flows"`
	Environment       *string                 `json:"environment,omitempty"`
	PolicyEvaluations []policyeval.Evaluation `json:"policy_evaluations,omitempty"`
	AllowListing      *AllowListing           `json:"allow_listing,omitempty"`

	// unsure says a policy could not judge the artifact just now (a time limit, say): the answer
	// is not kept, so the next assert tries again.
	unsure bool
}

// AssertCompliance is an artifact's compliance in one trail (the spec's artifact compliance result).
type AssertCompliance struct {
	Unexpected           bool                `json:"unexpected"`
	ArtifactFingerprint  string              `json:"artifact_fingerprint"`
	Status               string              `json:"status"`
	IsCompliant          bool                `json:"is_compliant"`
	AttestationsStatuses []AssertAttestation `json:"attestations_statuses"`
	EvaluatedAt          float64             `json:"evaluated_at"`
}

// AssertAttestation is one expected or reported attestation of the artifact or its trail.
type AssertAttestation struct {
	AttestationName string `json:"attestation_name"`
	AttestationType string `json:"attestation_type"`
	Status          string `json:"status"`
	IsCompliant     *bool  `json:"is_compliant"`
	Unexpected      bool   `json:"unexpected"`
}

// AssertFlow is the artifact in one of the trails that reported it.
type AssertFlow struct {
	Flow             string           `json:"flow"`
	Trail            string           `json:"trail"`
	Compliant        bool             `json:"compliant"`
	ComplianceStatus AssertCompliance `json:"compliance_status"`
	HTMLURL          string           `json:"html_url"`
}

// AllowListing is the allowlist entry that lets the artifact run in the environment.
type AllowListing struct {
	AllowlistID     string  `json:"allowlist_id"`
	AllowedByUserID string  `json:"allowed_by_user_id"`
	Timestamp       float64 `json:"timestamp"`
	Description     string  `json:"description"`
}

// trailCompliance is what an assert reads of a trail's stored compliance document.
type trailCompliance struct {
	EvaluatedAt          float64             `json:"evaluated_at"`
	AttestationsStatuses []AssertAttestation `json:"attestations_statuses"`
	ArtifactsStatuses    map[string]struct {
		ArtifactFingerprint  *string             `json:"artifact_fingerprint"`
		Unexpected           bool                `json:"unexpected"`
		AttestationsStatuses []AssertAttestation `json:"attestations_statuses"`
	} `json:"artifacts_statuses"`
}

func (a *API) registerAsserts() {
	type assertInput struct {
		OrgPath
		Fingerprint     string   `path:"fingerprint" doc:"a fingerprint, or a prefix of 5 to 64 characters of one"`
		FlowName        string   `query:"flow_name" doc:"only the artifact's trails in this flow"`
		EnvironmentName string   `query:"environment_name" doc:"judge against this environment's policies (its trails when it has none)"`
		PolicyNames     []string `query:"policy_name,explode" doc:"judge against these policies (repeat the parameter); exclusive with environment_name"`
	}
	// The body is written already encoded: an answer is mostly read back from memory (see answers.Cache), and
	// encoding 2-3 KB of rule evaluations was a tenth of an assert's work. The schema is declared by hand.
	type assertOutput struct{ Body func(huma.Context) }
	o := op(http.MethodGet, "/asserts/{org}/fingerprint/{fingerprint}", "assertArtifact", PrivRead,
		"Is an artifact compliant: in its flows, in an environment, or against policies", "Assertions")
	o.Responses = map[string]*huma.Response{"200": {Description: "OK", Content: map[string]*huma.MediaType{
		"application/json": {Schema: a.huma.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[AssertResult](), true, "AssertResult")}}}}
	huma.Register(a.huma, o, func(ctx context.Context, in *assertInput) (*assertOutput, error) {
		p := principalFrom(ctx)
		key := answers.NewKey(p.Org.ID, in.Fingerprint, in.FlowName, in.EnvironmentName, in.PolicyNames)
		// Counts that move after the commit (Evaluated; announcements, a few milliseconds later)
		// may not have moved yet for writes a read found visible: an organization whose writes
		// became visible lately, here or at another ingest process, gets its answers computed
		// afresh. Watched counts need not.
		fresh := a.answers.Lags() && (awaited(ctx) || a.tracker.WritesFresh(p.Org.ID, answers.AnnouncementLag))
		body, at, ok := a.answers.Get(key, fresh)
		if !ok {
			res, err := a.assert(ctx, p, in.Fingerprint, in.FlowName, in.EnvironmentName, in.PolicyNames)
			if err != nil {
				return nil, err
			}
			if body, err = answers.Encode(res); err != nil {
				return nil, a.internal(ctx, "encode assert result", err)
			}
			if !res.unsure {
				a.answers.Put(key, at, body)
			}
		}
		return &assertOutput{Body: func(hc huma.Context) {
			hc.SetHeader("Content-Type", "application/json")
			hc.SetStatus(http.StatusOK)
			_, _ = hc.BodyWriter().Write(body) // a client gone away is nothing to report
		}}, nil
	})
}

// assert answers an assertion. Environment scope reads the verdict the evaluator stored for the artifact in the
// environment's latest snapshot; an artifact not running there, and policy scope, are judged on the fly.
func (a *API) assert(ctx context.Context, p *Principal, prefix, flowName, envName string, policyNames []string) (AssertResult, error) {
	c := checker{}
	if !shortFPRE.MatchString(prefix) {
		c["fingerprint"] = patternError(shortFPPattern, prefix)
	}
	if envName != "" && len(policyNames) > 0 {
		c["environment_name"] = "environment_name and policy_name are exclusive: give one of them"
	}
	if err := c.err(); err != nil {
		return AssertResult{}, err
	}
	var flow *store.Flow
	if flowName != "" {
		f, err := a.flowByName(ctx, p, flowName)
		if err != nil {
			return AssertResult{}, err
		}
		flow = &f
	}
	fp, err := a.resolveFingerprint(ctx, p, prefix, flow)
	if err != nil {
		return AssertResult{}, err
	}
	ev, err := policyeval.LoadReports(ctx, a.store, p.Org.ID, []string{fp})
	if err != nil {
		return AssertResult{}, a.internal(ctx, "load artifact", err)
	}
	res, err := a.assertFlows(ctx, p, fp, ev.Reports(fp), flow)
	if err != nil {
		return res, err
	}
	unknown := func() error {
		if flow != nil {
			return apiError(http.StatusNotFound, "Artifact with fingerprint '%s' does not exist in flow '%s' belonging to organization '%s'",
				prefix, flow.Name, p.Org.Name)
		}
		return apiError(http.StatusNotFound, "Artifact with fingerprint '%s' does not exist in organization '%s'", prefix, p.Org.Name)
	}
	switch {
	case envName != "":
		// The environment with the artifact's verdicts and their evaluations, in one read: a verdict exists only
		// where policies decide, so most asserts need nothing more.
		type found struct {
			env      store.Environment
			verdicts []store.Verdict
			evals    []store.PolicyEvaluation
		}
		f, err := lookup(ctx, a, p, func() (found, error) {
			e, vs, evs, err := a.store.EnvironmentVerdicts(ctx, p.Org.ID, envName, fp)
			return found{e, vs, evs}, err
		})
		if errors.Is(err, store.ErrNotFound) {
			return res, apiError(http.StatusNotFound, "Environment named '%s' does not exist for organization '%s'", envName, p.Org.Name)
		}
		if err != nil {
			return res, a.internal(ctx, "look up environment", err)
		}
		e, verdicts := f.env, f.verdicts
		var attached []store.AttachedPolicy
		if len(verdicts) == 0 {
			if attached, err = a.store.AttachedPolicies(ctx, e.ID); err != nil {
				return res, a.internal(ctx, "look up policies", err)
			}
		}
		if len(verdicts) > 0 || len(attached) > 0 {
			return res, a.assertEnvironment(ctx, e, verdicts, f.evals, attached, fp, ev, &res, unknown)
		}
		// An environment without policies is ignored: the artifact is judged by its trails.
	case len(policyNames) > 0:
		return res, a.assertPolicies(ctx, p, policyNames, fp, ev, &res, unknown)
	}
	if len(res.Flows) == 0 {
		return res, unknown()
	}
	return res, nil
}

// resolveFingerprint finds the one fingerprint prefix names among the artifacts reported in the organization (or
// in flow). A full fingerprint is taken as it is: an artifact of no flow can be asserted in an environment.
func (a *API) resolveFingerprint(ctx context.Context, p *Principal, prefix string, flow *store.Flow) (string, error) {
	if len(prefix) == 64 {
		return prefix, nil
	}
	flowID := ""
	if flow != nil {
		flowID = flow.ID
	}
	arts, err := lookup(ctx, a, p, func() ([]store.Artifact, error) {
		arts, err := a.store.ArtifactsByPrefix(ctx, p.Org.ID, flowID, prefix, 50)
		if err == nil && len(arts) == 0 {
			err = store.ErrNotFound
		}
		return arts, err
	})
	switch {
	case errors.Is(err, store.ErrNotFound) && flow != nil:
		return "", apiError(http.StatusNotFound, "Artifact with fingerprint '%s' does not exist in flow '%s' belonging to organization '%s'",
			prefix, flow.Name, p.Org.Name)
	case errors.Is(err, store.ErrNotFound):
		return "", apiError(http.StatusNotFound, "Artifact with fingerprint '%s' does not exist in organization '%s'", prefix, p.Org.Name)
	case err != nil:
		return "", a.internal(ctx, "look up artifact", err)
	}
	var fps []string
	for _, art := range arts {
		if !slices.Contains(fps, art.Fingerprint) {
			fps = append(fps, art.Fingerprint)
		}
	}
	if len(fps) > 1 {
		slices.Sort(fps)
		return "", &Error{Status: http.StatusBadRequest,
			Message: fmt.Sprintf("Fingerprint prefix '%s' is ambiguous: it matches %d artifacts; give more characters", prefix, len(fps)),
			Errors:  map[string]string{"fingerprint": fmt.Sprintf("matches %v", fps)}}
	}
	return fps[0], nil
}

// assertFlows fills the flow-scope result: the artifact in each trail that reported it (only flow's when given),
// compliant when it is compliant in every one.
func (a *API) assertFlows(ctx context.Context, p *Principal, fp string, reports []policyeval.Report, flow *store.Flow) (AssertResult, error) {
	res := AssertResult{Fingerprint: fp, Scope: ScopeFlow, Flows: []AssertFlow{},
		HTMLURL:          a.cfg.BaseURL + "/" + p.Org.Name + "/fingerprints/" + fp,
		ComplianceStatus: AssertCompliance{ArtifactFingerprint: fp, AttestationsStatuses: []AssertAttestation{}}}
	for _, r := range reports {
		if flow != nil && r.Flow.ID != flow.ID {
			continue
		}
		cs, err := a.artifactCompliance(ctx, fp, r)
		if err != nil {
			return res, err
		}
		f := AssertFlow{Flow: r.Flow.Name, Trail: r.Trail.Name, Compliant: r.Artifact.State == "COMPLIANT",
			ComplianceStatus: cs, HTMLURL: a.artifactURL(p.Org.Name, r.Flow.Name, fp, r.Artifact.ID)}
		res.Flows = append(res.Flows, f)
	}
	res.Compliant = len(res.Flows) > 0
	for i, f := range res.Flows {
		res.Compliant = res.Compliant && f.Compliant
		if i == 0 {
			res.Flow, res.Trail, res.ComplianceStatus, res.HTMLURL = f.Flow, f.Trail, f.ComplianceStatus, f.HTMLURL
		}
	}
	return res, nil
}

// complianceKey names what artifactCompliance makes of one trail evaluation: a trail is evaluated again (and
// EvaluatedAt moves) whenever its evidence changes, so an entry never goes stale.
type complianceKey struct {
	trailID     string
	evaluatedAt float64
	fingerprint string
	state       string
}

// artifactCompliance is the artifact's compliance in one trail: its state there, the trail's own attestations and
// the artifact's. Decoding a trail's compliance document is most of an assert's work, so the result is cached.
func (a *API) artifactCompliance(ctx context.Context, fp string, r policyeval.Report) (AssertCompliance, error) {
	key := complianceKey{r.Trail.ID, r.Trail.EvaluatedAt, fp, r.Artifact.State}
	if c, ok := a.compliance.Get(key); ok {
		return c, nil
	}
	tr, err := a.store.TrailByID(ctx, r.Trail.ID)
	if err != nil {
		return AssertCompliance{}, a.internal(ctx, "load trail", err)
	}
	c := artifactCompliance(fp, r.Artifact.State, tr.Compliance)
	if tr.EvaluatedAt == r.Trail.EvaluatedAt && r.Trail.EvaluatedAt > 0 { // not re-evaluated in between
		a.compliance.Add(key, c)
	}
	return c, nil
}

func artifactCompliance(fp, state string, compliance json.RawMessage) AssertCompliance {
	out := AssertCompliance{ArtifactFingerprint: fp, Status: state, IsCompliant: state == "COMPLIANT",
		AttestationsStatuses: []AssertAttestation{}}
	var doc trailCompliance
	if len(compliance) == 0 || json.Unmarshal(compliance, &doc) != nil {
		return out // not evaluated yet
	}
	out.EvaluatedAt = doc.EvaluatedAt
	out.AttestationsStatuses = append(out.AttestationsStatuses, doc.AttestationsStatuses...)
	for _, slot := range doc.ArtifactsStatuses {
		if slot.ArtifactFingerprint != nil && *slot.ArtifactFingerprint == fp {
			out.Unexpected = slot.Unexpected
			out.AttestationsStatuses = append(out.AttestationsStatuses, slot.AttestationsStatuses...)
			break
		}
	}
	return out
}

// assertEnvironment judges the artifact against an environment's policies: the stored verdicts when it runs there,
// else an evaluation now against the attached policies.
func (a *API) assertEnvironment(ctx context.Context, e store.Environment, verdicts []store.Verdict, evals []store.PolicyEvaluation,
	attached []store.AttachedPolicy, fp string, ev *policyeval.Evidence, res *AssertResult, unknown func() error) error {
	res.Scope, res.Environment = ScopeEnvironment, &e.Name
	allowlisted := false
	if len(verdicts) > 0 {
		// Running under several names: compliant only if under each; the first name that is not shows why.
		v := verdicts[0]
		res.Compliant = true
		for _, x := range verdicts {
			res.Compliant = res.Compliant && x.Compliant
			if !x.Compliant && v.Compliant {
				v = x
			}
		}
		res.PolicyEvaluations = policyeval.Expand(v.Policies, v.InputHash, policyeval.Index(evals))
		allowlisted = v.Allowlisted
	} else {
		if len(ev.Reports(fp)) == 0 {
			return unknown()
		}
		entries, err := a.store.Allowlist(ctx, e.ID)
		if err != nil {
			return a.internal(ctx, "load allowlist", err)
		}
		allowlisted = slices.ContainsFunc(entries, func(x store.AllowlistEntry) bool { return x.Fingerprint == fp })
		policies, err := a.policies.Attached(attached)
		if err != nil {
			return a.internal(ctx, "parse policies", err)
		}
		if err := a.judgeNow(ctx, policies, policyeval.Environment(e), fp, ev, allowlisted, res); err != nil {
			return err
		}
	}
	if allowlisted {
		entries, err := a.store.Allowlist(ctx, e.ID)
		if err != nil {
			return a.internal(ctx, "load allowlist", err)
		}
		for _, x := range entries { // oldest first: the entry that allowed it
			if x.Fingerprint == fp {
				res.AllowListing = &AllowListing{AllowlistID: x.ID, AllowedByUserID: x.AllowedBy, Timestamp: x.Timestamp, Description: x.Description}
				break
			}
		}
	}
	return nil
}

// assertPolicies judges the artifact against named policies (their latest versions), in the order asked.
func (a *API) assertPolicies(ctx context.Context, p *Principal, names []string, fp string, ev *policyeval.Evidence,
	res *AssertResult, unknown func() error) error {
	res.Scope = ScopePolicy
	policies := make([]*envpolicy.Policy, 0, len(names))
	for _, name := range names {
		pol, err := a.policyByName(ctx, p, name)
		if err != nil {
			return err
		}
		parsed, err := a.policies.Policy(pol.Name, pol.Latest())
		if err != nil {
			return a.internal(ctx, "parse policy", err)
		}
		policies = append(policies, parsed)
	}
	if len(ev.Reports(fp)) == 0 {
		running, err := a.store.RunningIn(ctx, p.Org.ID, fp)
		if err != nil {
			return a.internal(ctx, "look up running", err)
		}
		if len(running) == 0 {
			return unknown()
		}
	}
	return a.judgeNow(ctx, policies, envpolicy.Environment{}, fp, ev, false, res)
}

// judgeNow evaluates the artifact against policies with the evidence as it stands. A policy that cannot judge it
// does not pass, and says why (as the evaluator records it).
func (a *API) judgeNow(ctx context.Context, policies []*envpolicy.Policy, env envpolicy.Environment, fp string,
	ev *policyeval.Evidence, allowlisted bool, res *AssertResult) error {
	if err := ev.LoadAttestations(ctx, a.store, []string{fp}); err != nil {
		return a.internal(ctx, "load attestations", err)
	}
	name := fp
	if reps := ev.Reports(fp); len(reps) > 0 && reps[0].Artifact.Filename != "" {
		name = reps[0].Artifact.Filename
	}
	in := envpolicy.NewInput(env, []envpolicy.Artifact{ev.Artifact(name, fp, allowlisted)})
	res.Compliant = true
	res.PolicyEvaluations = make([]policyeval.Evaluation, len(policies))
	for i, pol := range policies {
		e, failed, err := a.evaluateOne(ctx, pol, in)
		if err != nil {
			return err
		}
		res.unsure = res.unsure || failed
		res.PolicyEvaluations[i] = e[0]
		res.Compliant = res.Compliant && e[0].Compliant
	}
	res.Compliant = res.Compliant || allowlisted
	return nil
}

// evaluateOne evaluates every artifact of in against pol, as the API shows evaluations. A policy that fails
// (other than by the request's end) judges every artifact non-compliant with the reason, and failed says so.
func (a *API) evaluateOne(ctx context.Context, pol *envpolicy.Policy, in *envpolicy.Input) (out []policyeval.Evaluation, failed bool, err error) {
	out = make([]policyeval.Evaluation, len(in.Artifacts))
	evals, err := a.engine.Evaluate(ctx, pol, in)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		a.log.Warn("ingest: a policy could not judge artifacts", "policy", pol.Name, "version", pol.Version, "err", err)
		for i := range out {
			out[i] = policyeval.Evaluation{PolicyName: pol.Name, PolicyVersion: pol.Version, Status: envpolicy.StatusNonCompliant,
				RuleEvaluations: policyeval.ErrorRules(err.Error())}
		}
		return out, true, nil
	}
	for i, pe := range evals {
		rules, err := json.Marshal(pe.RuleEvaluations)
		if err != nil {
			return nil, false, a.internal(ctx, "encode rule evaluations", err)
		}
		out[i] = policyeval.Evaluation{PolicyName: pe.PolicyName, PolicyVersion: pe.PolicyVersion, Status: pe.Status,
			Compliant: pe.Compliant, RuleEvaluations: rules}
	}
	return out, false, nil
}
