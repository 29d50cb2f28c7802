package evaluate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/metrics"
	"github.com/veritrail/veritrail/internal/snapshot"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policyeval"
)

// policyJudge decides whether the artifacts running in an environment comply with its policies, inside the
// evaluator's transactions. It is called whenever the evidence or the policies change: a new snapshot, attach,
// detach, a new version of an attached policy, an allowlist entry (in the apply of that message), and a trail
// evaluation (in the transaction that saves it, for the fingerprints of that trail that run somewhere).
//
// What it stores: per running artifact a verdict (its input hash, and per policy the version that judged it and
// whether it complied), the rule evaluations once per (policy meaning, input hash), the snapshot's compliant and
// the environment's state. An artifact whose input hash is unchanged keeps the evaluation of each policy whose
// meaning is unchanged: only new evidence or new policies cost an OPA evaluation.
type policyJudge struct {
	engine  *envpolicy.Engine
	cache   *policyeval.Cache
	facts   *factCache // the evaluator's, through which policies read attestations
	metrics *metrics.Evaluator
	tracer  trace.Tracer
	// latest are the environments' latest snapshots this evaluator wrote, which their next
	// snapshots start from (recordRunningSet).
	latest *latestSnapshots
	// rejudges are the artifacts snapshots started in environments with policies, judged again
	// once the transactions beside them ended; nil on a store with one writer (rejudge.go).
	rejudges *startedRejudges
}

func newPolicyJudge(engine *envpolicy.Engine, facts *factCache, m *metrics.Evaluator, tracer trace.Tracer) *policyJudge {
	if engine == nil {
		engine = envpolicy.NewEngine(envpolicy.Options{})
	}
	return &policyJudge{engine: engine, cache: policyeval.NewCache(0), facts: facts, metrics: m, tracer: tracer,
		latest: newLatestSnapshots(latestArtifactBudget)}
}

// judgedPolicy is an attached policy ready to judge, or the reason it cannot (a stored version that no longer
// parses judges every artifact non-compliant with that reason, rather than holding up the evaluator).
type judgedPolicy struct {
	name    string
	version int
	id      string
	policy  *envpolicy.Policy
	err     error
}

func (pj *policyJudge) attached(ctx context.Context, tx store.Tx, envID string) ([]judgedPolicy, error) {
	attached, err := tx.AttachedPolicies(ctx, envID)
	if err != nil {
		return nil, err
	}
	out := make([]judgedPolicy, len(attached))
	for i, a := range attached {
		p, err := pj.cache.Policy(a.Name, a.PolicyVersion)
		out[i] = judgedPolicy{name: a.Name, version: a.Version, id: a.ContentID, policy: p, err: err}
	}
	return out, nil
}

// decision is the outcome of judging some artifacts of an environment.
type decision struct {
	verdicts []store.Verdict          // one per artifact judged, in order
	changed  []store.Verdict          // the verdicts to write
	evals    []store.PolicyEvaluation // evaluations made now, to store
	byKey    map[store.VerdictKey]int // index in verdicts
}

// parallelFrom is the number of artifact evaluations from which policies are evaluated side by side (as
// envpolicy.Engine.EvaluateSnapshot does): below it, a goroutine's stack growth costs more than it saves.
const parallelFrom = 64

// splitFrom is the number of artifacts one policy is to evaluate from which they are evaluated in parts side by
// side. Each part is judged by shape on its own (envpolicy), so a part holds enough artifacts to share shapes.
const splitFrom = 512

// decide judges arts in env against policies. A policy meaning that judged an artifact's input before (a stored
// outcome) is not evaluated again, so evidence seen before costs no OPA evaluation. prev holds the environment's
// stored verdicts; a verdict is to be written when its input changed, a policy evaluated it now, or rewrite says
// the policies themselves changed.
func (pj *policyJudge) decide(ctx context.Context, r store.Reader, env store.Environment, policies []judgedPolicy,
	arts []envpolicy.Artifact, prev map[store.VerdictKey]store.VerdictState, rewrite bool, at float64) (decision, error) {
	d := decision{byKey: make(map[store.VerdictKey]int, len(arts))}
	parsed := make([]*envpolicy.Policy, len(policies))
	for i, p := range policies {
		parsed[i] = p.policy
	}
	// The hashes cover what these policies read: with YAML policies only, not the environment, so the
	// evaluations made in one environment hold in the next that runs the same artifact.
	in := envpolicy.NewInputFor(parsed, policyeval.Environment(env), arts)
	hashes := make([]string, len(in.Artifacts))
	for i, a := range in.Artifacts {
		hashes[i] = a.Hash
	}
	known := map[policyeval.EvaluationKey]bool{}
	if len(hashes) > 0 {
		outcomes, err := r.PolicyOutcomes(ctx, env.OrgID, hashes)
		if err != nil {
			return d, err
		}
		for _, o := range outcomes {
			known[policyeval.EvaluationKey{PolicyID: o.PolicyID, InputHash: o.InputHash}] = o.Compliant
		}
	}
	refs := make([][]store.VerdictPolicy, len(in.Artifacts))
	for i := range refs {
		refs[i] = make([]store.VerdictPolicy, len(policies))
	}
	evaluated, failed := make([]bool, len(in.Artifacts)), make([]bool, len(in.Artifacts))
	type job struct {
		policy int
		idx    []int // artifacts to evaluate
		out    []envpolicy.PolicyEvaluation
		err    error
	}
	var jobs []*job
	work := 0
	for pi, p := range policies {
		j := &job{policy: pi, err: p.err}
		for i, a := range in.Artifacts {
			refs[i][pi] = store.VerdictPolicy{Name: p.name, Version: p.version, ID: p.id}
			if c, ok := known[policyeval.EvaluationKey{PolicyID: p.id, InputHash: a.Hash}]; ok && p.err == nil {
				refs[i][pi].Compliant = c
				continue
			}
			j.idx = append(j.idx, i)
		}
		if len(j.idx) == 0 {
			continue
		}
		if j.err == nil {
			work += len(j.idx)
		}
		// A long list is cut into one part per core: where its artifacts share no shape each is evaluated
		// (envpolicy), and in one part that would keep one core busy while the others wait.
		parts := 1
		if j.err == nil && len(j.idx) >= splitFrom {
			parts = runtime.GOMAXPROCS(0)
		}
		for k := range parts {
			jobs = append(jobs, &job{policy: pi, idx: j.idx[k*len(j.idx)/parts : (k+1)*len(j.idx)/parts], err: j.err})
		}
	}
	run := func(ctx context.Context, j *job) error {
		if j.err != nil {
			return nil // the policy does not parse: nothing to evaluate
		}
		keep := make(map[string]bool, len(j.idx))
		for _, i := range j.idx {
			keep[in.Artifacts[i].Hash] = true
		}
		sub := in.Select(func(a envpolicy.ArtifactInput) bool { return keep[a.Hash] })
		octx, done := policyRun(ctx, pj.tracer, pj.metrics, metrics.PolicyEnvironment)
		j.out, j.err = pj.engine.Evaluate(octx, policies[j.policy].policy, sub)
		done(j.err)
		if j.err != nil && ctx.Err() != nil {
			return j.err
		}
		return nil
	}
	if work >= parallelFrom && len(jobs) > 1 {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(runtime.GOMAXPROCS(0))
		for _, j := range jobs {
			g.Go(func() error { return run(gctx, j) })
		}
		if err := g.Wait(); err != nil {
			return d, err
		}
	} else {
		for _, j := range jobs {
			if err := run(ctx, j); err != nil {
				return d, err
			}
		}
	}
	// The engine hands out one slice per distinct result (most artifacts share a few), so each
	// is encoded once: encoding 3,000 evaluations was 18 ms of a 1,000-artifact snapshot.
	encoded := map[*envpolicy.RuleEvaluation]json.RawMessage{}
	encode := func(rules []envpolicy.RuleEvaluation) (json.RawMessage, error) {
		if len(rules) == 0 {
			return json.Marshal(rules)
		}
		if b, ok := encoded[&rules[0]]; ok {
			return b, nil
		}
		b, err := json.Marshal(rules)
		encoded[&rules[0]] = b
		return b, err
	}
	for _, j := range jobs {
		p := policies[j.policy]
		var failure json.RawMessage
		if j.err != nil {
			// A policy that cannot judge does not pass: every artifact of the batch shows why, and is judged
			// again the next time its evidence or the policies change.
			failure = policyeval.ErrorRules(j.err.Error())
		}
		for k, i := range j.idx {
			e := store.PolicyEvaluation{PolicyID: p.id, InputHash: in.Artifacts[i].Hash, Failed: j.err != nil, RuleEvaluations: failure}
			if j.err == nil {
				pe := j.out[k]
				rules, err := encode(pe.RuleEvaluations)
				if err != nil {
					return d, fmt.Errorf("encode rule evaluations of %s: %w", p.name, err)
				}
				e.Compliant, e.RuleEvaluations = pe.Compliant, rules
			}
			refs[i][j.policy].Compliant = e.Compliant
			evaluated[i], failed[i] = true, failed[i] || e.Failed
			d.evals = append(d.evals, e)
		}
	}
	// Two attached policies of the same meaning make the same evaluation: store it once.
	slices.SortFunc(d.evals, func(x, y store.PolicyEvaluation) int {
		return cmp.Or(cmp.Compare(x.InputHash, y.InputHash), cmp.Compare(x.PolicyID, y.PolicyID))
	})
	d.evals = slices.CompactFunc(d.evals, func(x, y store.PolicyEvaluation) bool {
		return x.InputHash == y.InputHash && x.PolicyID == y.PolicyID
	})
	d.verdicts = make([]store.Verdict, len(in.Artifacts))
	for i, a := range in.Artifacts {
		v := store.Verdict{EnvID: env.ID, Name: a.Name, Fingerprint: a.Fingerprint, InputHash: a.Hash, Allowlisted: a.Allowlisted,
			Compliant: true, Failed: failed[i], Policies: refs[i], EvaluatedAt: at}
		for _, r := range refs[i] {
			v.Compliant = v.Compliant && r.Compliant
		}
		v.Compliant = v.Compliant || a.Allowlisted
		if old, ok := prev[v.Key()]; rewrite || !ok || old.InputHash != v.InputHash || evaluated[i] {
			d.changed = append(d.changed, v)
		}
		d.verdicts[i] = v
		d.byKey[v.Key()] = i
	}
	return d, nil
}

// record writes a decision: the new evaluations, the verdicts that changed, and the removal of gone ones.
func (pj *policyJudge) record(ctx context.Context, tx store.Tx, env store.Environment, d decision, gone []store.VerdictKey) error {
	if len(d.evals) > 0 {
		if err := tx.PutPolicyEvaluations(ctx, env.OrgID, d.evals); err != nil {
			return err
		}
	}
	if len(d.changed) > 0 {
		if err := tx.PutVerdicts(ctx, env.OrgID, d.changed); err != nil {
			return err
		}
	}
	if len(gone) > 0 {
		return tx.DeleteVerdicts(ctx, env.ID, gone)
	}
	return nil
}

// allowlisted is the set of fingerprints allowlisted in an environment.
func allowlisted(ctx context.Context, tx store.Tx, envID string) (map[string]bool, error) {
	entries, err := tx.Allowlist(ctx, envID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(entries))
	for _, a := range entries {
		out[a.Fingerprint] = true
	}
	return out, nil
}

// decideSnapshot gives each artifact of a new snapshot its verdict against policies (the environment's attached
// ones). It answers nil verdicts when there are none (its artifacts then keep the compliance of their trails, and
// the snapshot none). An artifact that ran in the snapshot before keeps its verdict, which every change of its
// evidence or of the policies has kept current (see policyJudge), unless that verdict failed or rewrite asks for
// all of them to be judged again: from carry when the new snapshot takes it from the last one, else from the
// store. The others are judged. ev holds the reports of the fingerprints judged; the caller has locked the
// environment.
func (pj *policyJudge) decideSnapshot(ctx context.Context, tx store.Tx, env *store.Environment, index int, set []snapshot.Running,
	ev *policyeval.Evidence, allowed map[string]bool, policies []judgedPolicy, carry *snapshotCarry, rewrite bool, at float64) ([]store.Verdict, *bool, error) {
	if len(policies) == 0 {
		return nil, nil, nil
	}
	var read []string // the fingerprints whose stored verdicts are needed; nil reads all
	if carry != nil {
		read = []string{}
		for i, r := range set {
			if carry.verdicts[i] == nil {
				read = append(read, r.Fingerprint)
			}
		}
	}
	var prev map[store.VerdictKey]store.VerdictState
	if read == nil || len(read) > 0 {
		var err error
		if prev, err = tx.VerdictStates(ctx, env.ID, read); err != nil {
			return nil, nil, err
		}
	}
	verdicts := make([]store.Verdict, len(set))
	var judge []int
	// The stored verdicts of the set, to tell those of artifacts no longer in it. Only the
	// fingerprints read can have one: with a carry, a few.
	inSet := make(map[store.VerdictKey]bool, len(prev))
	for i, r := range set {
		k := store.VerdictKey{Name: r.Name, Fingerprint: r.Fingerprint}
		if _, ok := prev[k]; ok {
			inSet[k] = true
		}
		if carry != nil && carry.verdicts[i] != nil && !rewrite {
			verdicts[i] = store.Verdict{EnvID: env.ID, Name: r.Name, Fingerprint: r.Fingerprint, InputHash: carry.verdicts[i].InputHash,
				Compliant: carry.verdicts[i].Compliant}
			continue
		}
		if st, ok := prev[k]; ok && !rewrite && !st.Failed {
			verdicts[i] = store.Verdict{EnvID: env.ID, Name: r.Name, Fingerprint: r.Fingerprint, InputHash: st.InputHash, Compliant: st.Compliant}
			continue
		}
		judge = append(judge, i)
	}
	d := decision{}
	if len(judge) > 0 {
		fps := make([]string, len(judge))
		for k, i := range judge {
			fps[k] = set[i].Fingerprint
		}
		if err := ev.LoadAttestations(ctx, txAttestations{pj.facts, tx}, fps); err != nil {
			return nil, nil, err
		}
		arts := make([]envpolicy.Artifact, len(judge))
		for k, i := range judge {
			arts[k] = ev.Artifact(set[i].Name, set[i].Fingerprint, allowed[set[i].Fingerprint])
		}
		var err error
		if d, err = pj.decide(ctx, tx, *env, policies, arts, prev, rewrite, at); err != nil {
			return nil, nil, err
		}
		for k, i := range judge {
			verdicts[i] = d.verdicts[k]
		}
	}
	var gone []store.VerdictKey
	if carry != nil {
		for _, r := range carry.exited {
			gone = append(gone, store.VerdictKey{Name: r.Name, Fingerprint: r.Fingerprint})
		}
	}
	for k := range prev {
		if !inSet[k] && (carry == nil || !slices.Contains(gone, k)) {
			gone = append(gone, k)
		}
	}
	if err := pj.record(ctx, tx, *env, d, gone); err != nil {
		return nil, nil, err
	}
	refs := make([]store.SnapshotPolicy, len(policies))
	for i, p := range policies {
		refs[i] = store.SnapshotPolicy{Name: p.name, Version: p.version, ID: p.id}
	}
	if err := tx.PutSnapshotPolicies(ctx, env.ID, index, refs); err != nil {
		return nil, nil, err
	}
	compliant := allCompliant(verdicts)
	return verdicts, &compliant, nil
}

// snapshotCarry is what a new snapshot takes from the environment's last one (recordRunningSet).
type snapshotCarry struct {
	// verdicts holds, per artifact of the new set, its verdict in the last snapshot when the
	// artifact is carried over from it (nothing it is judged on changed since); nil otherwise.
	verdicts []*SnapshotVerdict
	// exited are the last snapshot's artifacts that left: their verdicts go.
	exited []snapshot.Running
}

func allCompliant(vs []store.Verdict) bool {
	for _, v := range vs {
		if !v.Compliant {
			return false
		}
	}
	return true
}

// decideAll judges every artifact of the environment's latest snapshot (after attach, detach or a new policy
// version) and records the result on the snapshot and the environment. Without policies, it clears the verdicts
// and both return to null.
func (pj *policyJudge) decideAll(ctx context.Context, tx store.Tx, env store.Environment, at float64) error {
	policies, err := pj.attached(ctx, tx, env.ID)
	if err != nil {
		return err
	}
	if len(policies) == 0 && env.State == nil {
		return nil // nothing decided before, nothing to clear
	}
	// Every verdict changes: the next snapshot takes none from this one.
	if err := tx.MarkRunningChanged(ctx, env.OrgID, env.ID, nil); err != nil {
		return err
	}
	latest, err := tx.LatestSnapshot(ctx, env.ID)
	if errors.Is(err, store.ErrNotFound) || len(policies) == 0 {
		if err := tx.DeleteVerdicts(ctx, env.ID, nil); err != nil {
			return err
		}
		if err := tx.SetLatestSnapshotCompliance(ctx, env.ID, nil); err != nil {
			return err
		}
		_, err := tx.SetEnvironmentState(ctx, env.OrgID, env.ID, nil)
		return err
	}
	if err != nil {
		return err
	}
	set, err := runningSet(latest)
	if err != nil {
		return err
	}
	fps := make([]string, len(set))
	for i, r := range set {
		fps[i] = r.Fingerprint
	}
	ev, err := policyeval.LoadReports(ctx, tx, env.OrgID, fps)
	if err != nil {
		return err
	}
	allowed, err := allowlisted(ctx, tx, env.ID)
	if err != nil {
		return err
	}
	// The policies (or what they see of the environment) changed: every verdict is written again.
	verdicts, compliant, err := pj.decideSnapshot(ctx, tx, &env, latest.Index, set, ev, allowed, policies, nil, true, at)
	if err != nil || verdicts == nil {
		return err
	}
	return pj.setCompliance(ctx, tx, env, compliant)
}

func (pj *policyJudge) setCompliance(ctx context.Context, tx store.Tx, env store.Environment, compliant *bool) error {
	if err := tx.SetLatestSnapshotCompliance(ctx, env.ID, compliant); err != nil {
		return err
	}
	_, err := tx.SetEnvironmentState(ctx, env.OrgID, env.ID, compliant)
	return err
}

// decideSome judges the running artifacts of env that some evidence changed for (their fingerprints' new
// attestations, or an allowlist entry), and records the environment's compliance again.
func (pj *policyJudge) decideSome(ctx context.Context, tx store.Tx, env store.Environment, running []store.Running, at float64) error {
	policies, err := pj.attached(ctx, tx, env.ID)
	if err != nil || len(policies) == 0 || len(running) == 0 {
		return err
	}
	fps := make([]string, 0, len(running))
	for _, r := range running {
		fps = append(fps, r.Fingerprint)
	}
	fps = slices.Compact(slices.Sorted(slices.Values(fps)))
	ev, err := policyeval.LoadReports(ctx, tx, env.OrgID, fps)
	if err != nil {
		return err
	}
	if err := ev.LoadAttestations(ctx, txAttestations{pj.facts, tx}, nil); err != nil {
		return err
	}
	allowed, err := allowlisted(ctx, tx, env.ID)
	if err != nil {
		return err
	}
	prev, err := tx.VerdictStates(ctx, env.ID, fps)
	if err != nil {
		return err
	}
	arts := make([]envpolicy.Artifact, len(running))
	for i, r := range running {
		arts[i] = ev.Artifact(r.Name, r.Fingerprint, allowed[r.Fingerprint])
	}
	d, err := pj.decide(ctx, tx, env, policies, arts, prev, false, at)
	if err != nil {
		return err
	}
	if len(d.changed) == 0 {
		return nil // nothing a policy sees changed
	}
	if err := pj.record(ctx, tx, env, d, nil); err != nil {
		return err
	}
	bad, err := tx.NonCompliantVerdicts(ctx, env.ID)
	if err != nil {
		return err
	}
	compliant := bad == 0
	return pj.setCompliance(ctx, tx, env, &compliant)
}

// afterTrails re-judges, in every environment with policies, the running artifacts whose trails were just
// evaluated: one query when none of them runs in such an environment. Environments are locked in ID order.
func (pj *policyJudge) afterTrails(ctx context.Context, tx store.Tx, fpsByOrg map[string][]string, at float64) error {
	for _, org := range slices.Sorted(func(yield func(string) bool) {
		for k := range fpsByOrg {
			if !yield(k) {
				return
			}
		}
	}) {
		running, err := tx.RunningWithPolicies(ctx, org, slices.Compact(slices.Sorted(slices.Values(fpsByOrg[org]))))
		if err != nil {
			return err
		}
		if err := pj.redecideEach(ctx, tx, org, running, at); err != nil {
			return err
		}
	}
	return nil
}

// afterFlowChange re-judges the running artifacts of a flow whose name, tags or archiving changed (policies see
// them) in every environment with policies.
func (pj *policyJudge) afterFlowChange(ctx context.Context, tx store.Tx, orgID, flowID string, at float64) error {
	// What snapshots show of the flow's artifacts (its name, whether it is archived) changed too.
	if err := tx.MarkFlowRunningChanged(ctx, orgID, flowID); err != nil {
		return err
	}
	running, err := tx.RunningWithPoliciesOfFlow(ctx, orgID, flowID)
	if err != nil {
		return err
	}
	return pj.redecideEach(ctx, tx, orgID, running, at)
}

// redecideEach re-judges running artifacts sorted by environment, one environment at a time.
func (pj *policyJudge) redecideEach(ctx context.Context, tx store.Tx, orgID string, running []store.Running, at float64) error {
	for len(running) > 0 {
		n := 1
		for n < len(running) && running[n].EnvID == running[0].EnvID {
			n++
		}
		if err := pj.redecide(ctx, tx, orgID, running[0].EnvID, running[:n], at); err != nil {
			return err
		}
		running = running[n:]
	}
	return nil
}

func (pj *policyJudge) redecide(ctx context.Context, tx store.Tx, orgID, envID string, running []store.Running, at float64) error {
	if err := tx.LockEnvironment(ctx, envID); err != nil {
		return err
	}
	if pj.rejudges != nil {
		// Writers run beside each other (PostgreSQL), and running was read before the lock: a
		// snapshot that held the environment may since have stopped or started some of these
		// artifacts there. Judged from the rows read before, a stopped one counted again and
		// turned the environment back to non-compliant after that snapshot (the lock makes this
		// read see the snapshot's commit).
		var err error
		if running, err = runningNow(ctx, tx, orgID, envID, running); err != nil {
			return err
		}
	}
	env, err := tx.EnvironmentByID(ctx, orgID, envID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && env.Archived) {
		return nil
	}
	if err != nil {
		return err
	}
	return pj.decideSome(ctx, tx, env, running, at)
}

// runningNow reads again where the fingerprints of running (all in envID) run in envID.
func runningNow(ctx context.Context, tx store.Tx, orgID, envID string, running []store.Running) ([]store.Running, error) {
	fps := make([]string, 0, len(running))
	for _, r := range running {
		fps = append(fps, r.Fingerprint)
	}
	now, err := tx.RunningWithPolicies(ctx, orgID, slices.Compact(slices.Sorted(slices.Values(fps))))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(now, func(r store.Running) bool { return r.EnvID != envID }), nil
}

// applyPolicyVersion records a policy's new version (none when the content equals the latest) and re-judges every
// environment it is attached to.
func applyPolicyVersion(ctx context.Context, tx store.Tx, pj *policyJudge, e *contract.Envelope) error {
	pv := e.Policy
	if pv == nil {
		return permanent("policy version without body")
	}
	version := 1
	existing, err := tx.Policy(ctx, e.OrgID, pv.Name)
	switch {
	case err == nil:
		latest := existing.Latest()
		if latest.Content == pv.Content && latest.Format == pv.Format {
			if pv.Description == "" || pv.Description == existing.Description {
				return nil
			}
			return tx.SetPolicyDescription(ctx, e.OrgID, pv.Name, pv.Description)
		}
		version = latest.Version + 1
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if err := tx.PutPolicyVersion(ctx, e.OrgID, pv.Name, pv.Description, store.PolicyVersion{Version: version, Format: pv.Format,
		Content: pv.Content, ContentID: pv.ContentID, Comment: pv.Comment, CreatedBy: e.Actor.Name, CreatedAt: e.At}); err != nil {
		return err
	}
	if version == 1 {
		return nil // attached nowhere yet
	}
	envs, err := tx.PolicyEnvironments(ctx, e.OrgID, pv.Name)
	if err != nil {
		return err
	}
	for _, id := range envs { // sorted: concurrent transactions lock environments in one order
		if err := tx.LockEnvironment(ctx, id); err != nil {
			return err
		}
		env, err := tx.EnvironmentByID(ctx, e.OrgID, id)
		if err != nil {
			return classify(err)
		}
		if err := pj.decideAll(ctx, tx, env, e.At); err != nil {
			return err
		}
	}
	return nil
}

// applyPolicyAttachment attaches or detaches policies and re-judges the environment's latest snapshot.
func applyPolicyAttachment(ctx context.Context, tx store.Tx, pj *policyJudge, e *contract.Envelope) error {
	a := e.Attach
	if a == nil {
		return permanent("policy attachment without body")
	}
	if err := tx.LockEnvironment(ctx, a.EnvID); err != nil {
		return err
	}
	env, err := tx.EnvironmentByID(ctx, e.OrgID, a.EnvID)
	if err != nil {
		return classify(err)
	}
	if env.Archived {
		return nil
	}
	if a.Detach {
		err = tx.DetachPolicies(ctx, env.ID, a.Names)
	} else {
		for _, name := range a.Names {
			if _, err := tx.Policy(ctx, e.OrgID, name); err != nil {
				return classify(err) // ingest checked; only a store out of step with it gets here
			}
		}
		err = tx.AttachPolicies(ctx, e.OrgID, env.ID, a.Names, e.At)
	}
	if err != nil {
		return err
	}
	return pj.decideAll(ctx, tx, env, e.At)
}

// decideAllowlisted re-judges an allowlisted fingerprint where it runs in env.
func (pj *policyJudge) decideAllowlisted(ctx context.Context, tx store.Tx, orgID, envID, fp string, at float64) error {
	running, err := tx.RunningIn(ctx, orgID, fp)
	if err != nil {
		return err
	}
	mine := running[:0]
	for _, r := range running {
		if r.EnvID == envID {
			mine = append(mine, r)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	return pj.redecide(ctx, tx, orgID, envID, mine, at)
}
