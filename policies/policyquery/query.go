// Package policyquery answers questions about compliance from what the evaluator stored, without
// changing anything: how an artifact stands in the trails that reported it, against an
// environment's policies or against named policies (assert), and how a draft policy would judge an
// environment's latest snapshot (what-if). It reads the store and evaluates policies the way the
// evaluator does (policies/policyeval), so that ingest's handlers only resolve the names they are
// given, call it, and word its answers and errors.
package policyquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policyeval"
)

// ReadError is a read of the store (or a stored policy that no longer parses) that failed; What
// names it, as a caller reports it.
type ReadError struct {
	What string
	Err  error
}

func (e *ReadError) Error() string { return fmt.Sprintf("%s: %v", e.What, e.Err) }
func (e *ReadError) Unwrap() error { return e.Err }

// ErrUnknownArtifact says the artifact asked about was reported nowhere it could be judged.
var ErrUnknownArtifact = errors.New("artifact unknown")

// Querier answers the questions. Safe for concurrent use.
type Querier struct {
	store  store.Reader
	engine *envpolicy.Engine
	log    *slog.Logger
	// policies parses stored policy versions once per meaning.
	policies *policyeval.Cache
	// compliance caches an artifact's compliance in a trail evaluation.
	compliance *lru.Cache[complianceKey, AssertCompliance]
}

// New makes a Querier reading st and evaluating policies with engine.
func New(st store.Reader, engine *envpolicy.Engine, log *slog.Logger) *Querier {
	compliance, _ := lru.New[complianceKey, AssertCompliance](4096) // only a size <= 0 fails
	return &Querier{store: st, engine: engine, log: log, policies: policyeval.NewCache(0), compliance: compliance}
}

// Evidence is what the store knows of where the fingerprints fps were reported in the organization.
func (q *Querier) Evidence(ctx context.Context, orgID string, fps []string) (*policyeval.Evidence, error) {
	ev, err := policyeval.LoadReports(ctx, q.store, orgID, fps)
	if err != nil {
		return nil, &ReadError{"load artifact", err}
	}
	return ev, nil
}

// complianceKey names what ArtifactCompliance makes of one trail evaluation: a trail is evaluated again (and
// EvaluatedAt moves) whenever its evidence changes, so an entry never goes stale.
type complianceKey struct {
	trailID     string
	evaluatedAt float64
	fingerprint string
	state       string
}

// ArtifactCompliance is the artifact's compliance in one trail: its state there, the trail's own attestations and
// the artifact's. Decoding a trail's compliance document is most of an assert's work, so the result is cached.
func (q *Querier) ArtifactCompliance(ctx context.Context, fp string, r policyeval.Report) (AssertCompliance, error) {
	key := complianceKey{r.Trail.ID, r.Trail.EvaluatedAt, fp, r.Artifact.State}
	if c, ok := q.compliance.Get(key); ok {
		return c, nil
	}
	tr, err := q.store.TrailByID(ctx, r.Trail.ID)
	if err != nil {
		return AssertCompliance{}, &ReadError{"load trail", err}
	}
	c := artifactCompliance(fp, r.Artifact.State, tr.Compliance)
	if tr.EvaluatedAt == r.Trail.EvaluatedAt && r.Trail.EvaluatedAt > 0 { // not re-evaluated in between
		q.compliance.Add(key, c)
	}
	return c, nil
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

// EnvironmentFacts are an environment as an assert of one artifact reads it: the environment, the artifact's
// verdicts there with their evaluations, and the attached policies when there is no verdict to show.
type EnvironmentFacts struct {
	Env      store.Environment
	Verdicts []store.Verdict
	Evals    []store.PolicyEvaluation
	Attached []store.AttachedPolicy
}

// Judged reports whether the environment's policies decide (it has a verdict for the artifact or policies
// attached); an environment without policies leaves the artifact to its trails.
func (f EnvironmentFacts) Judged() bool { return len(f.Verdicts) > 0 || len(f.Attached) > 0 }

// Environment reads the named environment with the artifact's verdicts and their evaluations, in one read: a
// verdict exists only where policies decide, so most asserts need nothing more. Without verdicts it reads the
// attached policies too. A missing environment is store.ErrNotFound, as it is, for the caller to wait on.
func (q *Querier) Environment(ctx context.Context, orgID, envName, fp string) (EnvironmentFacts, error) {
	e, vs, evs, err := q.store.EnvironmentVerdicts(ctx, orgID, envName, fp)
	if errors.Is(err, store.ErrNotFound) {
		return EnvironmentFacts{}, err
	}
	if err != nil {
		return EnvironmentFacts{}, &ReadError{"look up environment", err}
	}
	return EnvironmentFacts{Env: e, Verdicts: vs, Evals: evs}, nil
}

// Attach adds the environment's attached policies to f when the artifact has no verdict there.
func (q *Querier) Attach(ctx context.Context, f *EnvironmentFacts) error {
	if len(f.Verdicts) > 0 {
		return nil
	}
	attached, err := q.store.AttachedPolicies(ctx, f.Env.ID)
	if err != nil {
		return &ReadError{"look up policies", err}
	}
	f.Attached = attached
	return nil
}

// AssertEnvironment judges the artifact against an environment's policies into res: the stored verdicts when it
// runs there, else an evaluation now against the attached policies (ErrUnknownArtifact when it was not reported).
func (q *Querier) AssertEnvironment(ctx context.Context, f EnvironmentFacts, fp string, ev *policyeval.Evidence, res *AssertResult) error {
	e := f.Env
	res.Scope, res.Environment = ScopeEnvironment, &e.Name
	allowlisted := false
	if len(f.Verdicts) > 0 {
		// Running under several names: compliant only if under each; the first name that is not shows why.
		v := f.Verdicts[0]
		res.Compliant = true
		for _, x := range f.Verdicts {
			res.Compliant = res.Compliant && x.Compliant
			if !x.Compliant && v.Compliant {
				v = x
			}
		}
		res.PolicyEvaluations = policyeval.Expand(v.Policies, v.InputHash, policyeval.Index(f.Evals))
		allowlisted = v.Allowlisted
	} else {
		if len(ev.Reports(fp)) == 0 {
			return ErrUnknownArtifact
		}
		entries, err := q.store.Allowlist(ctx, e.ID)
		if err != nil {
			return &ReadError{"load allowlist", err}
		}
		allowlisted = slices.ContainsFunc(entries, func(x store.AllowlistEntry) bool { return x.Fingerprint == fp })
		policies, err := q.policies.Attached(f.Attached)
		if err != nil {
			return &ReadError{"parse policies", err}
		}
		if err := q.judgeNow(ctx, policies, policyeval.Environment(e), fp, ev, allowlisted, res); err != nil {
			return err
		}
	}
	if allowlisted {
		entries, err := q.store.Allowlist(ctx, e.ID)
		if err != nil {
			return &ReadError{"load allowlist", err}
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

// Policy parses a stored policy's latest version.
func (q *Querier) Policy(pol store.Policy) (*envpolicy.Policy, error) {
	parsed, err := q.policies.Policy(pol.Name, pol.Latest())
	if err != nil {
		return nil, &ReadError{"parse policy", err}
	}
	return parsed, nil
}

// AssertPolicies judges the artifact against policies, in order, into res: reported in a trail or running
// somewhere, else ErrUnknownArtifact.
func (q *Querier) AssertPolicies(ctx context.Context, orgID string, policies []*envpolicy.Policy, fp string, ev *policyeval.Evidence,
	res *AssertResult) error {
	res.Scope = ScopePolicy
	if len(ev.Reports(fp)) == 0 {
		running, err := q.store.RunningIn(ctx, orgID, fp)
		if err != nil {
			return &ReadError{"look up running", err}
		}
		if len(running) == 0 {
			return ErrUnknownArtifact
		}
	}
	return q.judgeNow(ctx, policies, envpolicy.Environment{}, fp, ev, false, res)
}

// judgeNow evaluates the artifact against policies with the evidence as it stands. A policy that cannot judge it
// does not pass, and says why (as the evaluator records it).
func (q *Querier) judgeNow(ctx context.Context, policies []*envpolicy.Policy, env envpolicy.Environment, fp string,
	ev *policyeval.Evidence, allowlisted bool, res *AssertResult) error {
	if err := ev.LoadAttestations(ctx, q.store, []string{fp}); err != nil {
		return &ReadError{"load attestations", err}
	}
	name := fp
	if reps := ev.Reports(fp); len(reps) > 0 && reps[0].Artifact.Filename != "" {
		name = reps[0].Artifact.Filename
	}
	in := envpolicy.NewInput(env, []envpolicy.Artifact{ev.Artifact(name, fp, allowlisted)})
	res.Compliant = true
	res.PolicyEvaluations = make([]policyeval.Evaluation, len(policies))
	for i, pol := range policies {
		e, failed, err := q.evaluateOne(ctx, pol, in)
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
// (other than by the request's end, whose error is returned as it is) judges every artifact non-compliant with
// the reason, and failed says so.
func (q *Querier) evaluateOne(ctx context.Context, pol *envpolicy.Policy, in *envpolicy.Input) (out []policyeval.Evaluation, failed bool, err error) {
	out = make([]policyeval.Evaluation, len(in.Artifacts))
	evals, err := q.engine.Evaluate(ctx, pol, in)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		q.log.Warn("ingest: a policy could not judge artifacts", "policy", pol.Name, "version", pol.Version, "err", err)
		for i := range out {
			out[i] = policyeval.Evaluation{PolicyName: pol.Name, PolicyVersion: pol.Version, Status: envpolicy.StatusNonCompliant,
				RuleEvaluations: policyeval.ErrorRules(err.Error())}
		}
		return out, true, nil
	}
	for i, pe := range evals {
		rules, err := json.Marshal(pe.RuleEvaluations)
		if err != nil {
			return nil, false, &ReadError{"encode rule evaluations", err}
		}
		out[i] = policyeval.Evaluation{PolicyName: pe.PolicyName, PolicyVersion: pe.PolicyVersion, Status: pe.Status,
			Compliant: pe.Compliant, RuleEvaluations: rules}
	}
	return out, false, nil
}

// WhatIf judges the environment's latest snapshot against draft into res (which names the environment and the
// draft), the artifacts that would fail first; an environment without a snapshot leaves res as it is.
func (q *Querier) WhatIf(ctx context.Context, orgID string, e store.Environment, draft *envpolicy.Policy, res *WhatIfResult) error {
	latest, err := q.store.LatestSnapshot(ctx, e.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return &ReadError{"load snapshot", err}
	}
	res.SnapshotIndex = &latest.Index
	var running []struct {
		Name        string `json:"name"`
		Fingerprint string `json:"fingerprint"`
	}
	if err := json.Unmarshal(latest.Artifacts, &running); err != nil {
		return &ReadError{"decode snapshot", err}
	}
	fps := make([]string, len(running))
	for i, r := range running {
		fps[i] = r.Fingerprint
	}
	ev, err := policyeval.LoadReports(ctx, q.store, orgID, fps)
	if err == nil {
		err = ev.LoadAttestations(ctx, q.store, nil)
	}
	if err != nil {
		return &ReadError{"load evidence", err}
	}
	entries, err := q.store.Allowlist(ctx, e.ID)
	if err != nil {
		return &ReadError{"load allowlist", err}
	}
	allowed := map[string]bool{}
	for _, x := range entries {
		allowed[x.Fingerprint] = true
	}
	current := map[store.VerdictKey]bool{}
	if e.State != nil {
		vs, err := q.store.Verdicts(ctx, e.ID, nil)
		if err != nil {
			return &ReadError{"load verdicts", err}
		}
		for _, v := range vs {
			current[v.Key()] = v.Compliant
		}
	}
	arts := make([]envpolicy.Artifact, len(running))
	for i, r := range running {
		arts[i] = ev.Artifact(r.Name, r.Fingerprint, allowed[r.Fingerprint])
	}
	evals, _, err := q.evaluateOne(ctx, draft, envpolicy.NewInput(policyeval.Environment(e), arts))
	if err != nil {
		return err
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
	return nil
}
