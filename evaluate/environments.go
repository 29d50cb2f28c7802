package evaluate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/snapshot"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/policyeval"
)

func applyEnvironment(ctx context.Context, tx store.Tx, e *contract.Envelope) error {
	u := e.Environment
	if u == nil {
		return permanent("environment upsert without body")
	}
	_, err := tx.UpsertEnvironment(ctx, store.Environment{
		ID: u.ID, OrgID: e.OrgID, Name: u.Name, Type: u.Type, Description: u.Description, IncludeScaling: u.IncludeScaling,
		RequireProvenance: u.RequireProvenance, Included: u.IncludedEnvironments, Tags: map[string]string{},
		CreatedAt: e.At, LastModifiedAt: e.At,
	})
	return err
}

func applyEnvironmentChange(ctx context.Context, tx store.Tx, pj *policyJudge, e *contract.Envelope) error {
	c := e.EnvChange
	if c == nil {
		return permanent("environment change without body")
	}
	env, err := tx.EnvironmentByID(ctx, e.OrgID, c.EnvID)
	if err != nil {
		return classify(err)
	}
	if env.Archived {
		return nil // archived meanwhile: nothing left to change
	}
	if c.NewName != nil {
		env.Name = *c.NewName
	}
	if c.Description != nil {
		env.Description = *c.Description
	}
	if c.IncludeScaling != nil {
		env.IncludeScaling = *c.IncludeScaling
	}
	if c.JoinPhysical != "" && !slices.Contains(env.Included, c.JoinPhysical) {
		env.Included = append(env.Included, c.JoinPhysical)
	}
	for k, v := range c.SetTags {
		env.Tags[k] = v
	}
	for _, k := range c.RemoveTags {
		delete(env.Tags, k)
	}
	if c.Archive {
		// The name is freed for a new environment; the archived one keeps its history.
		env.Archived, env.Name = true, env.Name+"~archived~"+env.ID
	}
	env.LastModifiedAt = e.At
	if err := tx.UpdateEnvironment(ctx, env); err != nil {
		return classify(err)
	}
	if c.JoinPhysical != "" {
		// A logical environment shows its members' running sets from the moment they join.
		return refreshLogical(ctx, tx, pj, e, env)
	}
	if !env.Archived && (c.NewName != nil || len(c.SetTags) > 0 || len(c.RemoveTags) > 0) {
		// Policies see the environment's name and tags.
		if err := tx.LockEnvironment(ctx, env.ID); err != nil {
			return err
		}
		return pj.decideAll(ctx, tx, env, e.At)
	}
	return nil
}

func applyAllowlist(ctx context.Context, tx store.Tx, pj *policyJudge, e *contract.Envelope) error {
	a := e.Allow
	if a == nil {
		return permanent("allowlist entry without body")
	}
	if err := tx.InsertAllowlist(ctx, store.AllowlistEntry{ID: a.ID, EnvID: a.EnvID, Fingerprint: a.Fingerprint,
		ArtifactName: a.ArtifactName, Description: a.Description, AllowedBy: e.Actor.Name, Timestamp: e.At}); err != nil {
		return err
	}
	if err := enqueueAllowedTrigger(ctx, tx, e, a); err != nil {
		return err
	}
	// An allowlisted artifact complies whatever the policies say: its verdict changes where it runs.
	return pj.decideAllowlisted(ctx, tx, e.OrgID, a.EnvID, a.Fingerprint, e.At)
}

// applySnapshot records a physical environment's report, and the logical environments that
// include it. A report that repeats the running set creates no snapshot.
func applySnapshot(ctx context.Context, tx store.Tx, pj *policyJudge, e *contract.Envelope) error {
	r := e.Snapshot
	if r == nil {
		return permanent("snapshot without body")
	}
	env, err := tx.EnvironmentByID(ctx, e.OrgID, r.EnvID)
	if err != nil {
		return classify(err)
	}
	if env.Archived {
		return nil
	}
	items := make([]snapshot.Instance, len(r.Instances))
	for i, in := range r.Instances {
		items[i] = snapshot.Instance{Name: in.Name, Fingerprint: in.Fingerprint, CreationTimestamp: in.CreationTimestamp, Context: in.Context}
	}
	env.LastReportedAt = e.At
	changed, err := recordRunningSet(ctx, tx, pj, e, &env, snapshot.Group(items), r.Type)
	if err != nil || !changed {
		return err
	}
	return refreshParents(ctx, tx, pj, e, env)
}

// refreshParents gives every logical environment that includes env a new snapshot: the union
// of its members' latest running sets.
func refreshParents(ctx context.Context, tx store.Tx, pj *policyJudge, e *contract.Envelope, env store.Environment) error {
	parents, err := tx.LogicalEnvironments(ctx, env.ID)
	if err != nil {
		return err
	}
	for _, logical := range parents {
		if err := refreshLogical(ctx, tx, pj, e, logical); err != nil {
			return err
		}
	}
	return nil
}

func refreshLogical(ctx context.Context, tx store.Tx, pj *policyJudge, e *contract.Envelope, logical store.Environment) error {
	var sets [][]snapshot.Running
	for _, id := range logical.Included {
		latest, err := tx.LatestSnapshot(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		set, err := runningSet(latest)
		if err != nil {
			return err
		}
		sets = append(sets, set)
	}
	logical.LastReportedAt = e.At
	_, err := recordRunningSet(ctx, tx, pj, e, &logical, snapshot.Union(sets...), "logical")
	return err
}

// SnapshotArtifact is an artifact of a snapshot as the API shows it.
type SnapshotArtifact struct {
	Name              string              `json:"name"`
	Fingerprint       string              `json:"fingerprint"`
	Compliant         *bool               `json:"compliant"`
	Instances         int                 `json:"instances"`
	CreationTimestamp []float64           `json:"creationTimestamp"`
	Annotation        snapshot.Annotation `json:"annotation"`
	FlowName          *string             `json:"flow_name"`
	GitCommit         *string             `json:"git_commit"`
	CommitURL         *string             `json:"commit_url"`
	Flows             []Provenance        `json:"flows"`
	Allowlisted       bool                `json:"allowlisted"`
	Deployments       []int               `json:"deployments"`
	PolicyDecisions   []any               `json:"policy_decisions"`
	Contexts          []map[string]any    `json:"contexts,omitempty"`
	// PolicyVerdict is the verdict of the environment's policies when the snapshot was taken (absent without
	// policies); the API expands it into policy_decisions. Compliant above stays the compliance of the trails.
	PolicyVerdict *SnapshotVerdict `json:"policy_verdict,omitempty"`
}

// SnapshotVerdict is a verdict as a snapshot keeps it: the input hash finds each policy's evaluation of it (the
// policy versions are kept once per snapshot, store.SnapshotPolicies).
type SnapshotVerdict struct {
	InputHash string `json:"input_hash"`
	Compliant bool   `json:"compliant"`
}

// compliance is the artifact's compliance in its snapshot: the policies' verdict when there was one.
func (a SnapshotArtifact) compliance() *bool {
	if a.PolicyVerdict != nil {
		return &a.PolicyVerdict.Compliant
	}
	return a.Compliant
}

// Provenance is where a fingerprint was reported: a flow and trail.
type Provenance struct {
	FlowName              string  `json:"flow_name"`
	TrailName             string  `json:"trail_name"`
	TemplateReferenceName *string `json:"template_reference_name"`
	GitCommit             *string `json:"git_commit"`
	CommitURL             *string `json:"commit_url"`
	ArtifactID            string  `json:"artifact_id"`
	State                 string  `json:"state"`
	RepoName              string  `json:"-"`
	TrailID               string  `json:"-"`
}

// runningSet reads a stored snapshot back into the running set it recorded.
func runningSet(s store.Snapshot) ([]snapshot.Running, error) {
	var arts []struct { // only what the running set needs: decoding the rest of the document costs
		Name              string           `json:"name"`
		Fingerprint       string           `json:"fingerprint"`
		Instances         int              `json:"instances"`
		CreationTimestamp []float64        `json:"creationTimestamp"`
		Contexts          []map[string]any `json:"contexts,omitempty"`
	}
	// Every snapshot that changes decodes the last one whole; this decoder has encoding/json's
	// semantics at about a third of its cost (3.9 ms of CPU for 1,000 artifacts with encoding/json).
	if err := jsonv1.Unmarshal(s.Artifacts, &arts); err != nil {
		return nil, fmt.Errorf("decode snapshot %d: %w", s.Index, err)
	}
	out := make([]snapshot.Running, len(arts))
	for i, a := range arts {
		out[i] = snapshot.Running{Name: a.Name, Fingerprint: a.Fingerprint, Instances: a.Instances,
			CreationTimestamps: a.CreationTimestamp, Contexts: a.Contexts}
	}
	return out, nil
}

// recordRunningSet compares next with the environment's latest snapshot and, when the running
// set changed, writes the new snapshot, its events, the running index and the trail events of
// the artifacts that started or stopped. It costs a fixed number of store round trips however
// many artifacts the set holds.
//
// An artifact that ran in the latest snapshot and whose evidence, verdict and allowlisting did
// not change since (no store.RunningChanges mark) is carried over from it as it was, with its
// new instances, when this evaluator still holds that snapshot (latestSnapshots): a snapshot
// where one artifact of a thousand changed reads and writes one artifact's evidence.
func recordRunningSet(ctx context.Context, tx store.Tx, pj *policyJudge, e *contract.Envelope, env *store.Environment, next []snapshot.Running, typ string) (bool, error) {
	// Most reports repeat the last one: recognise them by digest, without decoding the last snapshot.
	digest := snapshot.Digest(next)
	_, lastDigest, err := tx.LatestSnapshotDigest(ctx, env.ID)
	switch {
	case err == nil && bytes.Equal(lastDigest, digest):
		if err := tx.CompactRunningChanges(ctx, env.ID); err != nil {
			return false, err
		}
		return false, tx.UpdateEnvironment(ctx, *env)
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return false, err
	}
	// Evaluations of this environment's policies take turns from here: the evidence read below is the latest.
	if err := tx.LockEnvironment(ctx, env.ID); err != nil {
		return false, err
	}
	last, prev, index, err := previousSnapshot(ctx, tx, pj, env.ID)
	if err != nil {
		return false, err
	}
	// The marks before the evidence: a change committed after this read is marked for the next snapshot.
	marks, err := tx.RunningChanges(ctx, env.ID)
	if err != nil {
		return false, err
	}
	annotated, exited, changed := snapshot.Diff(prev, next, env.IncludeScaling)
	if !changed && index > 1 { // the first report is snapshot 1 even when nothing runs
		return false, tx.UpdateEnvironment(ctx, *env)
	}
	isAllowed, err := allowlisted(ctx, tx, env.ID)
	if err != nil {
		return false, err
	}
	policies, err := pj.attached(ctx, tx, env.ID)
	if err != nil {
		return false, err
	}
	from := carryFrom(last, marks, annotated, exited, isAllowed, len(policies) > 0)
	fps := make([]string, 0, len(annotated)+len(exited))
	for i, a := range annotated {
		if from.annotated[i] < 0 {
			fps = append(fps, a.Fingerprint)
		}
	}
	for i, a := range exited {
		if from.exited[i] < 0 {
			fps = append(fps, a.Fingerprint)
		}
	}
	ev, err := policyeval.LoadReports(ctx, tx, e.OrgID, fps)
	if err != nil {
		return false, err
	}
	prov := provenance(ev, fps)
	var carry *snapshotCarry
	if last != nil {
		carry = &snapshotCarry{verdicts: make([]*SnapshotVerdict, len(annotated)), exited: exited}
		for i, j := range from.annotated {
			if j >= 0 {
				carry.verdicts[i] = last.arts[j].PolicyVerdict
			}
		}
	}
	verdicts, compliant, err := pj.decideSnapshot(ctx, tx, env, index, annotated, ev, isAllowed, policies, carry, false, e.At)
	if err != nil {
		return false, err
	}
	arts, docs, err := snapshotArtifacts(annotated, last, from, prov, isAllowed, verdicts)
	if err != nil {
		return false, err
	}
	array, _ := pj.latest.arrays.Get().(*[]byte)
	if array == nil {
		array = new([]byte)
	}
	*array = joinArray((*array)[:0], docs)
	err = tx.InsertSnapshot(ctx, store.Snapshot{EnvID: env.ID, Index: index, Timestamp: e.At, Type: typ, Compliant: compliant,
		Artifacts: *array, Digest: digest})
	pj.latest.arrays.Put(array)
	if err != nil {
		return false, err
	}
	evs := snapshot.Events(annotated, exited)
	for _, ev := range evs { // the events of artifacts whose provenance did not change show it as it was
		if _, ok := prov[ev.Fingerprint]; !ok {
			if j, ok := from.events[snapshotKey{ev.Name, ev.Fingerprint}]; ok {
				prov[ev.Fingerprint] = last.arts[j].Flows
			}
		}
	}
	events, trailEvents, err := environmentEvents(env, index, e.At, evs, prov, arts, compliant)
	if err != nil {
		return false, err
	}
	if err := tx.InsertEnvEvents(ctx, events); err != nil {
		return false, err
	}
	if err := enqueueSnapshotTriggers(ctx, tx, e, env, index, evs, prov, isAllowed); err != nil {
		return false, err
	}
	if err := tx.AppendTrailEvents(ctx, trailEvents, e.At); err != nil {
		return false, err
	}
	gone, started := runningChanges(annotated, exited, e.At)
	if err := tx.SetRunning(ctx, e.OrgID, env.ID, gone, started); err != nil {
		return false, err
	}
	startedInTx := startedStillRunning(started, pj.latest.startedEarlier(tx, env.ID), annotated)
	if err := settleMarks(ctx, tx, env, marks, verdicts, startedInTx); err != nil {
		return false, err
	}
	if pj.rejudges != nil && len(policies) > 0 && len(started) > 0 {
		fps := make([]string, len(started))
		for i, r := range started {
			fps[i] = r.Fingerprint
		}
		org := env.OrgID
		tx.OnCommit(func() { pj.rejudges.add(org, fps) })
	}
	env.LastChangedAt = e.At
	if err := tx.UpdateEnvironment(ctx, *env); err != nil {
		return false, err
	}
	if compliant != nil || env.State != nil {
		if _, err = tx.SetEnvironmentState(ctx, env.OrgID, env.ID, compliant); err != nil {
			return false, err
		}
	}
	taken := pj.latest.now()
	if last != nil {
		taken = last.taken // what it carried over was read then
	}
	pj.latest.stage(tx, env.ID, &latestSnapshot{taken: taken, index: index, digest: digest, running: annotated, arts: arts, docs: docs}, startedInTx)
	return true, nil
}

// startedStillRunning answers the fingerprints a snapshot started (started) and those that
// snapshots of the same environment written earlier in its transaction started (earlier) and it
// still runs (annotated).
func startedStillRunning(started []store.Running, earlier []string, annotated []snapshot.Running) []string {
	out := make([]string, 0, len(started)+len(earlier))
	for _, r := range started {
		out = append(out, r.Fingerprint)
	}
	if len(earlier) == 0 {
		return out
	}
	// Sets, not scans: a batch may start a thousand artifacts in one environment.
	running := make(map[string]bool, len(annotated))
	for _, a := range annotated {
		running[a.Fingerprint] = true
	}
	for _, fp := range out {
		running[fp] = false // started here: listed already
	}
	for _, fp := range earlier {
		if running[fp] {
			running[fp] = false
			out = append(out, fp)
		}
	}
	return out
}

// previousSnapshot answers the running set of env's latest snapshot and the index of the next
// one, and that latest snapshot as this evaluator holds it (nil when it does not: then the set
// is decoded from the store). The caller holds the environment's lock: the index is read again
// under it, since another evaluator (the distributed mode, while partitions move) may have
// written a snapshot after the caller's first look.
func previousSnapshot(ctx context.Context, tx store.Tx, pj *policyJudge, envID string) (*latestSnapshot, []snapshot.Running, int, error) {
	index, digest, err := tx.LatestSnapshotDigest(ctx, envID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, nil, 0, err
	}
	if digest != nil {
		if last, ok := pj.latest.get(tx, envID, index, digest); ok {
			return last, last.running, last.index + 1, nil
		}
	}
	latest, err := tx.LatestSnapshot(ctx, envID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil, 1, nil
	case err != nil:
		return nil, nil, 0, err
	}
	prev, err := runningSet(latest)
	return nil, prev, latest.Index + 1, err
}

// snapshotArtifacts makes the new snapshot's artifacts and their JSON: the carried ones from
// last (with its JSON when neither their instances nor their verdict changed), the others from
// prov. verdicts is nil without policies.
func snapshotArtifacts(annotated []snapshot.Running, last *latestSnapshot, from carried, prov map[string][]Provenance,
	allowed map[string]bool, verdicts []store.Verdict) ([]SnapshotArtifact, [][]byte, error) {
	arts := make([]SnapshotArtifact, len(annotated))
	docs := make([][]byte, len(annotated))
	for i, a := range annotated {
		var verdict SnapshotVerdict
		if verdicts != nil {
			verdict = SnapshotVerdict{InputHash: verdicts[i].InputHash, Compliant: verdicts[i].Compliant}
		}
		if j := from.annotated[i]; j >= 0 {
			arts[i] = last.arts[j]
			if sameRunning(arts[i], a) && sameVerdict(arts[i].PolicyVerdict, verdicts != nil, verdict) {
				docs[i] = last.docs[j] // the artifact, verdict included, is as it was
				continue
			}
			arts[i].Instances, arts[i].CreationTimestamp, arts[i].Annotation, arts[i].Contexts = a.Instances, a.CreationTimestamps, a.Annotation, a.Contexts
			if arts[i].CreationTimestamp == nil {
				arts[i].CreationTimestamp = []float64{}
			}
		} else {
			arts[i] = snapshotArtifact(a, prov[a.Fingerprint], allowed[a.Fingerprint])
		}
		arts[i].PolicyVerdict = nil
		if verdicts != nil {
			v := verdict // allocated only here: most artifacts are carried with theirs
			arts[i].PolicyVerdict = &v
		}
		var err error
		if docs[i], err = json.Marshal(arts[i]); err != nil {
			return nil, nil, fmt.Errorf("encode snapshot: %w", err)
		}
	}
	return arts, docs, nil
}

// settleMarks clears the marks a new snapshot read (the artifacts they name were taken anew),
// and marks for the next snapshot to take anew again:
//   - the artifacts whose verdict failed, so that it judges them again;
//   - the artifacts that started running here in this transaction (started: this snapshot's,
//     and those of snapshots before it in the same batch that still run). A change of their
//     evidence committed beside this transaction (another evaluator, on PostgreSQL) is marked
//     where they run once it committed (store.RunningChanges); while this transaction has not
//     committed, the running index does not hold them there, so it marks nothing here, and what
//     this snapshot read of them may be older than that change. A later snapshot in the same
//     transaction reads and clears the marks an earlier one wrote, so it writes them again.
func settleMarks(ctx context.Context, tx store.Tx, env *store.Environment, marks []store.RunningChange, verdicts []store.Verdict,
	started []string) error {
	ids := make([]int64, len(marks))
	for i, m := range marks {
		ids[i] = m.ID
	}
	if err := tx.ClearRunningChanges(ctx, ids); err != nil {
		return err
	}
	again := slices.Clip(started)
	for _, v := range verdicts {
		if v.Failed {
			again = append(again, v.Fingerprint)
		}
	}
	if len(again) == 0 {
		return nil
	}
	return tx.MarkRunningChanged(ctx, env.OrgID, env.ID, again)
}

// snapshotKey is an artifact's identity in a snapshot.
type snapshotKey struct{ name, fingerprint string }

// carried says which artifacts of a new snapshot come from the last one: per artifact of the
// new set and of the exited, the index of its entry in the last snapshot's arts, or -1 for one
// taken anew; and, for the artifacts of the snapshot's events, the index of their entry in the
// last snapshot when their provenance is unchanged since.
type carried struct {
	annotated, exited []int
	events            map[snapshotKey]int
}

// carryFrom decides what a new snapshot takes from last (nil: nothing). An artifact is carried
// when it ran in last, nothing marked its fingerprint since, its allowlisting is the same, and
// it has a verdict exactly when the environment has policies. annotated, exited and last's
// artifacts are all in running-set order, so one merge finds each one's entry in last.
func carryFrom(last *latestSnapshot, marks []store.RunningChange, annotated, exited []snapshot.Running, allowed map[string]bool, policies bool) carried {
	c := carried{annotated: make([]int, len(annotated)), exited: make([]int, len(exited)), events: map[snapshotKey]int{}}
	var fresh map[string]bool
	if last != nil {
		fresh = make(map[string]bool, len(marks))
		for _, m := range marks {
			fresh[m.Fingerprint] = true
		}
	}
	find := func(in []snapshot.Running, at []int) {
		j := 0
		for i, r := range in {
			at[i] = -1
			if last == nil {
				continue
			}
			for j < len(last.arts) && snapshot.CompareKey(last.arts[j].Name, last.arts[j].Fingerprint, r.Name, r.Fingerprint) < 0 {
				j++
			}
			if j == len(last.arts) || last.arts[j].Name != r.Name || last.arts[j].Fingerprint != r.Fingerprint || fresh[r.Fingerprint] {
				continue
			}
			at[i] = j
			if r.Annotation.Type != snapshot.Unchanged {
				c.events[snapshotKey{r.Name, r.Fingerprint}] = j
			}
		}
	}
	find(annotated, c.annotated)
	find(exited, c.exited)
	for i, j := range c.annotated {
		if j >= 0 && (last.arts[j].Allowlisted != allowed[annotated[i].Fingerprint] || (last.arts[j].PolicyVerdict != nil) != policies) {
			c.annotated[i] = -1
		}
	}
	return c
}

// sameRunning reports whether a carried artifact's instances are r's, so that its JSON stands.
func sameRunning(a SnapshotArtifact, r snapshot.Running) bool {
	if a.Instances != r.Instances || a.Annotation != r.Annotation || !slices.Equal(a.CreationTimestamp, r.CreationTimestamps) ||
		len(a.Contexts) != len(r.Contexts) {
		return false
	}
	for i := range a.Contexts {
		if !sameJSON(a.Contexts[i], r.Contexts[i]) {
			return false
		}
	}
	return true
}

// sameJSON compares values as encoding/json decodes them, several times faster than
// reflect.DeepEqual on a report's instance contexts (which every carried artifact compares).
func sameJSON(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// sameVerdict says whether a is v, or none when there is no verdict (judged false).
func sameVerdict(a *SnapshotVerdict, judged bool, v SnapshotVerdict) bool {
	if !judged {
		return a == nil
	}
	return a != nil && *a == v
}

// joinArray appends to out the JSON array of docs (what json.Marshal of their values writes).
func joinArray(out []byte, docs [][]byte) json.RawMessage {
	n := 2 + len(docs)
	for _, d := range docs {
		n += len(d)
	}
	out = slices.Grow(out, n)
	out = append(out, '[')
	for i, d := range docs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, d...)
	}
	return append(out, ']')
}

// provenance lists, for each fingerprint, the flows and trails that reported it.
func provenance(ev *policyeval.Evidence, fps []string) map[string][]Provenance {
	out := map[string][]Provenance{}
	for _, fp := range fps {
		reps := ev.Reports(fp)
		if len(reps) == 0 {
			continue
		}
		ps := make([]Provenance, len(reps))
		for i, r := range reps {
			var rep struct {
				CommitURL string `json:"commit_url"`
			}
			_ = json.Unmarshal(r.Artifact.Report, &rep) // stored by us from a validated report
			a := r.Artifact
			ps[i] = Provenance{FlowName: r.Flow.Name, TrailName: r.Trail.Name, TemplateReferenceName: strOrNil(a.TemplateName),
				GitCommit: strOrNil(a.GitCommit), CommitURL: strOrNil(rep.CommitURL), ArtifactID: a.ID, State: a.State,
				RepoName: a.RepoName, TrailID: a.TrailID}
		}
		out[fp] = ps
	}
	return out
}

func snapshotArtifact(r snapshot.Running, prov []Provenance, allowed bool) SnapshotArtifact {
	a := SnapshotArtifact{Name: r.Name, Fingerprint: r.Fingerprint, Instances: r.Instances, CreationTimestamp: r.CreationTimestamps,
		Annotation: r.Annotation, Flows: prov, Allowlisted: allowed, Deployments: []int{}, PolicyDecisions: []any{},
		Contexts: r.Contexts}
	if a.CreationTimestamp == nil {
		a.CreationTimestamp = []float64{}
	}
	if a.Flows == nil {
		a.Flows = []Provenance{}
	}
	if len(prov) > 0 {
		a.FlowName, a.GitCommit, a.CommitURL = &prov[0].FlowName, prov[0].GitCommit, prov[0].CommitURL
	}
	a.Compliant = artifactCompliance(prov, allowed)
	return a
}

// artifactCompliance is an artifact's compliance by its trails, which is its compliance in an
// environment without policies: allowlisted artifacts are compliant; otherwise the artifact is
// as compliant as its trails; an artifact of no flow is unknown (null).
func artifactCompliance(prov []Provenance, allowed bool) *bool {
	t := true
	if allowed {
		return &t
	}
	if len(prov) == 0 {
		return nil
	}
	ok := true
	for _, p := range prov {
		ok = ok && p.State == "COMPLIANT"
	}
	return &ok
}

// environmentEvents renders the snapshot's events, and the trail events of artifacts that
// started or stopped running.
func environmentEvents(env *store.Environment, index int, at float64, evs []snapshot.Event, prov map[string][]Provenance,
	arts []SnapshotArtifact, snapshotCompliant *bool) ([]store.EnvEvent, []store.TrailEvent, error) {
	compliance := make(map[string]*bool, len(evs))
	for _, ev := range evs {
		compliance[ev.Fingerprint] = nil
	}
	for _, a := range arts {
		if _, ok := compliance[a.Fingerprint]; ok {
			compliance[a.Fingerprint] = a.compliance()
		}
	}
	var out []store.EnvEvent
	var trailEvents []store.TrailEvent
	for _, ev := range evs {
		p := prov[ev.Fingerprint]
		flows := make([]envEventFlow, 0, len(p))
		repos := []string{}
		pipeline := ""
		for i, x := range p {
			flows = append(flows, envEventFlow{FlowName: x.FlowName, TrailName: x.TrailName})
			if x.RepoName != "" && !slices.Contains(repos, x.RepoName) {
				repos = append(repos, x.RepoName)
			}
			if i == 0 {
				pipeline = x.FlowName
			}
		}
		doc, err := json.Marshal(envEventDoc{Pipeline: pipeline, Deployments: []int{}, Flows: flows,
			ArtifactCompliance: compliance[ev.Fingerprint], SnapshotCompliance: snapshotCompliant, Was: ev.Was, Now: ev.Now})
		if err != nil {
			return nil, nil, fmt.Errorf("encode event: %w", err)
		}
		out = append(out, store.EnvEvent{EnvID: env.ID, SnapshotIndex: index, Type: ev.Type, ArtifactName: ev.Name,
			Fingerprint: ev.Fingerprint, Description: ev.Description, ReportedAt: at, RepoNames: repos, Doc: doc})
		typ := ""
		switch ev.Type {
		case "started":
			typ = "artifact_started_running"
		case "exited":
			typ = "artifact_stopped_running"
		default:
			continue
		}
		for _, x := range p {
			tdoc, err := json.Marshal(runningEvent{Type: typ, Timestamp: at, EnvironmentName: env.Name, SnapshotIndex: index,
				Fingerprint: ev.Fingerprint, ArtifactName: ev.Name, ArtifactID: x.ArtifactID})
			if err != nil {
				return nil, nil, fmt.Errorf("encode trail event: %w", err)
			}
			trailEvents = append(trailEvents, store.TrailEvent{TrailID: x.TrailID, Doc: tdoc})
		}
	}
	return out, trailEvents, nil
}

// envEventDoc is an environment event's document, envEventFlow one of its flows, and
// runningEvent the trail event of an artifact that started or stopped running. Their fields are
// in the order of their names, so they encode as the maps they replaced did (encoding/json sorts
// a map's keys), at a fraction of the cost: a snapshot of 1,000 new artifacts makes 2,000.
type envEventDoc struct {
	ArtifactCompliance *bool          `json:"artifact_compliance"`
	Deployments        []int          `json:"deployments"`
	Flows              []envEventFlow `json:"flows"`
	Now                int            `json:"now"`
	Pipeline           string         `json:"pipeline"`
	SnapshotCompliance *bool          `json:"snapshot_compliance"`
	Was                int            `json:"was"`
}

type envEventFlow struct {
	Deployments []int  `json:"deployments"` // always null
	FlowName    string `json:"flow_name"`
	TrailName   string `json:"trail_name"`
}

type runningEvent struct {
	ArtifactID      string  `json:"artifact_id"`
	ArtifactName    string  `json:"artifact_name"`
	EnvironmentName string  `json:"environment_name"`
	Fingerprint     string  `json:"fingerprint"`
	SnapshotIndex   int     `json:"snapshot_index"`
	Timestamp       float64 `json:"timestamp"`
	Type            string  `json:"type"`
}

// runningChanges lists the fingerprints that no longer run and those that started.
func runningChanges(annotated, exited []snapshot.Running, at float64) ([]string, []store.Running) {
	still := make(map[string]bool, len(exited)) // of the exited fingerprints, those running under another name
	for _, x := range exited {
		still[x.Fingerprint] = false
	}
	var started []store.Running
	for _, a := range annotated {
		if _, ok := still[a.Fingerprint]; ok {
			still[a.Fingerprint] = true
		}
		if a.Annotation.Type == "started" {
			started = append(started, store.Running{Fingerprint: a.Fingerprint, Name: a.Name, Since: at})
		}
	}
	var gone []string
	for _, x := range exited {
		if !still[x.Fingerprint] {
			gone = append(gone, x.Fingerprint)
		}
	}
	return gone, started
}

func applyApproval(ctx context.Context, tx store.Tx, e *contract.Envelope) error {
	a := e.Approval
	if a == nil {
		return permanent("approval without body")
	}
	doc, err := json.Marshal(map[string]any{
		"base_artifact": a.BaseArtifact, "artifact_name": a.ArtifactName, "target_artifact": a.Fingerprint,
		"description": a.Description, "src_commit_list": a.SrcCommitList, "approvals": a.Approvals,
		"environment": strOrNil(a.Environment), "user_data": a.UserData, "created_by": e.Actor.Name,
	})
	if err != nil {
		return fmt.Errorf("encode approval: %w", err)
	}
	_, err = tx.InsertApproval(ctx, store.Approval{ID: a.ID, OrgID: e.OrgID, FlowID: a.FlowID, State: a.State, CreatedAt: e.At, Doc: doc})
	return err
}
