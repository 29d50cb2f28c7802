package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/ingest/answers"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policyeval"
	"github.com/veritrail/veritrail/policies/policyquery"
)

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
		"application/json": {Schema: a.huma.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[policyquery.AssertResult](), true, "AssertResult")}}}}
	o.Metadata[scopedReadKey] = true
	huma.Register(a.huma, o, func(ctx context.Context, in *assertInput) (*assertOutput, error) {
		p := principalFrom(ctx)
		key := answers.NewKey(p.Org.ID, in.Fingerprint, in.FlowName, in.EnvironmentName, in.PolicyNames)
		// Read after write, narrowed to what the answer depends on: the artifact's own evidence
		// (which trails report it), whatever names no scope, and the trails and the environment
		// a kept answer read, all in one wait (at another ingest process, one look in the
		// store); a computed answer then waits for the trails and environment it read
		// (assertScoped). Writes to the organization's other trails hold no assert back. A
		// prefix may name an artifact not reported yet: it waits for all.
		body, deps, at, ok := a.answers.Get(key)
		waited, peersDone := false, true
		var scopes []string
		if len(in.Fingerprint) == 64 {
			scopes = []string{contract.FingerprintScope(p.Org.ID, in.Fingerprint)}
			waited, peersDone = a.awaitScopes(ctx, p, append(scopes, deps...), true)
		} else {
			waited = a.awaitWrites(ctx, p)
		}
		if ok {
			// Writes of the answer's scopes acknowledged before this read retire it. Counts that
			// move after the commit (Evaluated; announcements, a few milliseconds later) may not
			// have moved yet for writes a read found visible: those of scopes whose writes became
			// visible lately, here or at another ingest process, are computed afresh. Watched
			// counts need not.
			ok = !waited && !(a.answers.Lags() && a.tracker.ScopesFresh(p.Org.ID, append(scopes, deps...), answers.AnnouncementLag))
		}
		if !ok {
			if waited { // the counts to keep the new answer at are those after the wait
				_, _, at, _ = a.answers.Get(key)
			}
			res, deps, err := a.assertScoped(ctx, p, !peersDone, in.Fingerprint, in.FlowName, in.EnvironmentName, in.PolicyNames)
			if err != nil {
				return nil, err
			}
			if body, err = answers.Encode(res); err != nil {
				return nil, a.internal(ctx, "encode assert result", err)
			}
			if !res.Unsure() {
				a.answers.Put(key, at, body, deps)
			}
		}
		return &assertOutput{Body: func(hc huma.Context) {
			hc.SetHeader("Content-Type", "application/json")
			hc.SetStatus(http.StatusOK)
			_, _ = hc.BodyWriter().Write(body) // a client gone away is nothing to report
		}}, nil
	})
}

// assertScoped answers an assertion after waiting for the writes acknowledged before it of the
// trails and the environment the answer reads (at other ingest processes too with peers: the
// read is not done with them), and reports those scopes. The artifact's own evidence was waited
// for: which trails report it does not change while it waits.
func (a *API) assertScoped(ctx context.Context, p *Principal, peers bool, prefix, flowName, envName string, policyNames []string) (policyquery.AssertResult, []string, error) {
	res, deps, err := a.assert(ctx, p, prefix, flowName, envName, policyNames)
	if err != nil {
		return res, deps, err
	}
	if waited, _ := a.awaitScopes(ctx, p, deps, peers); !waited {
		return res, deps, nil
	}
	return a.assert(ctx, p, prefix, flowName, envName, policyNames)
}

// assert answers an assertion, with the scopes of the writes that could change the answer: the
// trails reporting the artifact and the environment judged in. Environment scope reads the verdict the evaluator stored for the artifact in the
// environment's latest snapshot; an artifact not running there, and policy scope, are judged on the fly.
func (a *API) assert(ctx context.Context, p *Principal, prefix, flowName, envName string, policyNames []string) (res policyquery.AssertResult, deps []string, err error) {
	c := checker{}
	if !shortFPRE.MatchString(prefix) {
		c["fingerprint"] = patternError(shortFPPattern, prefix)
	}
	if envName != "" && len(policyNames) > 0 {
		c["environment_name"] = "environment_name and policy_name are exclusive: give one of them"
	}
	if err := c.err(); err != nil {
		return res, nil, err
	}
	var flow *store.Flow
	if flowName != "" {
		f, err := a.flowByName(ctx, p, flowName)
		if err != nil {
			return res, nil, err
		}
		flow = &f
	}
	fp, err := a.resolveFingerprint(ctx, p, prefix, flow)
	if err != nil {
		return res, nil, err
	}
	ev, err := a.query.Evidence(ctx, p.Org.ID, []string{fp})
	if err != nil {
		return res, nil, a.queryError(ctx, err, nil)
	}
	reports := ev.Reports(fp)
	for _, r := range reports {
		if k := contract.TrailKey(p.Org.ID, r.Flow.ID, r.Trail.Name); !slices.Contains(deps, k) {
			deps = append(deps, k)
		}
	}
	if res, err = a.assertFlows(ctx, p, fp, reports, flow); err != nil {
		return res, deps, err
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
		f, err := lookup(ctx, a, p, func() (policyquery.EnvironmentFacts, error) {
			return a.query.Environment(ctx, p.Org.ID, envName, fp)
		})
		if errors.Is(err, store.ErrNotFound) {
			return res, deps, apiError(http.StatusNotFound, "Environment named '%s' does not exist for organization '%s'", envName, p.Org.Name)
		}
		if err == nil {
			deps = append(deps, contract.EnvironmentKey(p.Org.ID, f.Env.ID))
			err = a.query.Attach(ctx, &f)
		}
		if err != nil {
			return res, deps, a.queryError(ctx, err, nil)
		}
		if f.Judged() {
			err = a.queryError(ctx, a.query.AssertEnvironment(ctx, f, fp, ev, &res), unknown)
			return res, deps, err
		}
		// An environment without policies requires nothing: the artifact may run there, and
		// the answer still lists its trails (CLIENT-2.md section 14).
		if len(res.Flows) == 0 {
			return res, deps, unknown()
		}
		res.Scope, res.Environment, res.Compliant = policyquery.ScopeEnvironment, &f.Env.Name, true
		res.PolicyEvaluations = []policyeval.Evaluation{}
		return res, deps, nil
	case len(policyNames) > 0:
		err = a.assertPolicies(ctx, p, policyNames, fp, ev, &res, unknown)
		return res, deps, err
	}
	if len(res.Flows) == 0 {
		return res, deps, unknown()
	}
	return res, deps, nil
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
func (a *API) assertFlows(ctx context.Context, p *Principal, fp string, reports []policyeval.Report, flow *store.Flow) (policyquery.AssertResult, error) {
	res := policyquery.AssertResult{Fingerprint: fp, Scope: policyquery.ScopeFlow, Flows: []policyquery.AssertFlow{},
		HTMLURL:          a.cfg.BaseURL + "/" + p.Org.Name + "/fingerprints/" + fp,
		ComplianceStatus: policyquery.AssertCompliance{ArtifactFingerprint: fp, AttestationsStatuses: []policyquery.AssertAttestation{}}}
	for _, r := range reports {
		if flow != nil && r.Flow.ID != flow.ID {
			continue
		}
		cs, err := a.query.ArtifactCompliance(ctx, fp, r)
		if err != nil {
			return res, a.queryError(ctx, err, nil)
		}
		f := policyquery.AssertFlow{Flow: r.Flow.Name, Trail: r.Trail.Name, Compliant: r.Artifact.State == "COMPLIANT",
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

// assertPolicies judges the artifact against named policies (their latest versions), in the order asked.
func (a *API) assertPolicies(ctx context.Context, p *Principal, names []string, fp string, ev *policyeval.Evidence,
	res *policyquery.AssertResult, unknown func() error) error {
	policies := make([]*envpolicy.Policy, 0, len(names))
	for _, name := range names {
		pol, err := a.policyByName(ctx, p, name)
		if err != nil {
			return err
		}
		parsed, err := a.query.Policy(pol)
		if err != nil {
			return a.queryError(ctx, err, nil)
		}
		policies = append(policies, parsed)
	}
	return a.queryError(ctx, a.query.AssertPolicies(ctx, p.Org.ID, policies, fp, ev, res), unknown)
}

// queryError words an error of policyquery: a failed read as an internal error (or a 503), an artifact it
// cannot judge as unknown says; nil stays nil, and the request's end passes as it is.
func (a *API) queryError(ctx context.Context, err error, unknown func() error) error {
	if err == nil {
		return nil // before errors.As's target, which escapes: answers cost no allocation here
	}
	var read *policyquery.ReadError
	switch {
	case errors.As(err, &read):
		return a.internal(ctx, read.What, read.Err)
	case errors.Is(err, policyquery.ErrUnknownArtifact) && unknown != nil:
		return unknown()
	}
	return err
}
