package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/veritrail/veritrail/cmd/veritrail-bench/k8spod"
)

// The environment snapshots the harness exercises beside the trails: snapArtifacts artifacts,
// each reported in a trail of its own (snap-NN) of the run's flow, run in snapEnvs K8S
// environments, the first snapJudgedEnvs of which have a policy attached that requires the
// trails COMPLIANT (what the others show), so that their artifacts' compliance is a verdict,
// judged again as the evidence changes. During the load a reporter reports a random running
// set to a random environment and an evidence changer attests "build" with a random
// is_compliant on a random snap trail, so that the trails' compliance keeps flipping while
// the evaluators carry artifacts over from one snapshot to the next. After the drain every environment gets a
// final report of every artifact at snapFinalReplicas instances (a count the load never
// reports, so it is certainly a new snapshot), and each artifact of each final snapshot must
// show its trail's compliance as the API gives it at the end: a carried-over artifact whose
// evidence changed unnoticed shows a stale one.
const (
	snapArtifacts     = 24
	snapEnvs          = 4
	snapMinRunning    = 8 // artifacts of a report during the load, at least
	snapFinalReplicas = 3
	snapReportEvery   = 200 * time.Millisecond
	snapEvidenceEvery = 100 * time.Millisecond
	// snapFinalTimeout bounds the final reports' retries, and then the wait for the final
	// snapshots to appear.
	snapFinalTimeout = time.Minute
	snapTrailPrefix  = "snap-"
	// snapPolicy is attached to the first snapJudgedEnvs environments.
	snapPolicy     = "faults-trails"
	snapJudgedEnvs = 2
)

func snapTrail(i int) string { return fmt.Sprintf("%s%02d", snapTrailPrefix, i) }
func snapEnv(i int) string   { return fmt.Sprintf("faults-env-%d", i) }

// isSnapTrail tells the snapshots' trails from the load's (named w00-t00000 and so on).
func isSnapTrail(name string) bool { return strings.HasPrefix(name, snapTrailPrefix) }

// snapArtifact is one artifact the environments run: its image name, its fingerprint and the
// trail it was reported in.
type snapArtifact struct {
	name, fingerprint, trail string
}

func snapSet() []snapArtifact {
	out := make([]snapArtifact, snapArtifacts)
	for i := range out {
		out[i] = snapArtifact{name: fmt.Sprintf("registry.example.com/faults/service-%02d:1.0.%d", i, i),
			fingerprint: k8spod.Hash("faults-artifact", i), trail: snapTrail(i)}
	}
	return out
}

// k8sReport is the body of a K8S report in which artifact i of arts runs replicas[i] pods (none
// when 0). A pod's fields depend only on its artifact and replica, so that the same running set
// always makes the same report.
func k8sReport(arts []snapArtifact, replicas []int) []byte {
	pods := []k8spod.Pod{}
	for i, a := range arts {
		rs := fmt.Sprintf("service-%02d-%s", i, k8spod.Hash("rs", i)[:10])
		for r := range replicas[i] {
			pods = append(pods, k8spod.OfReplicaSet(rs, "faults", r, map[string]string{a.name: a.fingerprint}, 1786425000+int64(i*60+r)))
		}
	}
	b, _ := json.Marshal(map[string]any{"artifacts": pods}) // plain values: never fails
	return b
}

// snapLoad is the snapshots' part of the run: their setup, the reporter and the evidence
// changer during the load, and what they sent.
type snapLoad struct {
	c    *client
	l    *ledger
	lim  *rate.Limiter
	seed uint64
	arts []snapArtifact
	envs []string
	stop atomic.Bool
	wg   sync.WaitGroup

	mu     sync.Mutex
	builds map[string]*buildCount // by snap trail: the evidence changer's attestations
}

// buildCount is how the evidence changer's attestations of one trail ended.
type buildCount struct{ acked, ambiguous int }

func newSnapLoad(c *client, l *ledger, seed uint64) *snapLoad {
	s := &snapLoad{c: c, l: l, lim: rate.NewLimiter(rate.Inf, 1), seed: seed, arts: snapSet(), builds: map[string]*buildCount{}}
	for i := range snapEnvs {
		s.envs = append(s.envs, snapEnv(i))
	}
	for _, a := range s.arts {
		s.builds[a.trail] = &buildCount{}
	}
	return s
}

// setup begins the snap trails, reports an artifact in each and creates the environments,
// and waits until all of them can be read.
func (s *snapLoad) setup(ctx context.Context) error {
	deadline := time.Now().Add(startTimeout)
	c := s.c
	for _, a := range s.arts {
		err := until(ctx, deadline, "begin trail "+a.trail, func() answer {
			return c.multipart(ctx, http.MethodPut, "/trails/"+c.org+"/"+flowName,
				map[string]any{"name": a.trail, "description": "fault harness snapshots", "user_data": map[string]any{}}, "", "", nil)
		}, http.StatusCreated, http.StatusOK)
		if err != nil {
			return err
		}
		commit := k8spod.Hash("commit", a.trail)[:40]
		body, err := json.Marshal(map[string]any{
			"fingerprint": a.fingerprint, "filename": a.name, "trail_name": a.trail, "git_commit": commit,
			"build_url":  "https://ci.example.com/faults/" + a.trail,
			"commit_url": "https://git.example.com/faults/commit/" + commit,
			"repo_url":   "https://git.example.com/faults",
		})
		if err != nil {
			return fmt.Errorf("faults: %w", err)
		}
		if err := until(ctx, deadline, "report artifact "+a.name, func() answer {
			return c.do(ctx, http.MethodPost, "/artifacts/"+c.org+"/"+flowName, "application/json", body)
		}, http.StatusCreated); err != nil {
			return err
		}
	}
	for _, env := range s.envs {
		body := []byte(`{"name":"` + env + `","type":"K8S","description":"fault harness"}`)
		if err := until(ctx, deadline, "create environment "+env, func() answer {
			return c.do(ctx, http.MethodPut, "/environments/"+c.org, "application/json", body)
		}, http.StatusCreated, http.StatusOK); err != nil {
			return err
		}
	}
	// The policy judged environments attach: what it requires is what an environment without
	// policies shows (every trail that reported the artifact COMPLIANT), so the final check is the
	// same for both, and the judging runs under the faults too.
	form, contentType := policyForm()
	if err := until(ctx, deadline, "create policy "+snapPolicy, func() answer {
		return c.do(ctx, http.MethodPut, "/policies/"+c.org, contentType, form)
	}, http.StatusCreated, http.StatusOK); err != nil {
		return err
	}
	for _, env := range s.envs[:snapJudgedEnvs] {
		body := []byte(`{"policy_names":["` + snapPolicy + `"]}`)
		if err := until(ctx, deadline, "attach policy to "+env, func() answer {
			return c.do(ctx, http.MethodPost, "/environments/"+c.org+"/"+env+"/policies", "application/json", body)
		}, http.StatusCreated, http.StatusOK); err != nil {
			return err
		}
	}
	// Readable: every process that answers reads has applied them.
	for _, env := range s.envs {
		if err := until(ctx, deadline, "read environment "+env, func() answer {
			return c.get(ctx, "/environments/"+c.org+"/"+env)
		}, http.StatusOK); err != nil {
			return err
		}
	}
	for _, a := range s.arts {
		if err := until(ctx, deadline, "read artifact "+a.name, func() answer {
			return c.get(ctx, "/artifacts/"+c.org+"/"+flowName+"/fingerprint/"+a.fingerprint)
		}, http.StatusOK); err != nil {
			return err
		}
	}
	return nil
}

// policyForm is the create-policy request of snapPolicy, as the Kosli CLI sends it: its
// payload and its file, and the request's content type.
func policyForm() ([]byte, string) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.WriteField("payload", `{"name":"`+snapPolicy+`","description":"the fault harness's snap trails compliant"}`)
	fw, _ := w.CreateFormFile("policy_file", snapPolicy+".yml")
	_, _ = fw.Write([]byte("_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  trail-compliance:\n    required: true\n"))
	_ = w.Close() // writes to a buffer: never fails
	return buf.Bytes(), w.FormDataContentType()
}

// until sends until the answer has one of the statuses, or the deadline passes.
func until(ctx context.Context, deadline time.Time, what string, send func() answer, ok ...int) error {
	for {
		a := send()
		for _, st := range ok {
			if a.status == st {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("faults: %s: %d %s %v", what, a.status, clip(a.body, 300), a.err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// start starts the reporter and the evidence changer.
func (s *snapLoad) start(ctx context.Context) {
	s.wg.Go(func() { s.reporter(ctx) })
	s.wg.Go(func() { s.changer(ctx) })
}

// finish stops them after the requests they are sending, and waits for them.
func (s *snapLoad) finish() {
	s.stop.Store(true)
	s.wg.Wait()
}

// next waits about every (0.5 to 1.5 times it) and a token of the rate limit, and reports
// whether the sender goes on.
func (s *snapLoad) next(ctx context.Context, rng *rand.Rand, every time.Duration) bool {
	t := time.NewTimer(time.Duration((0.5 + rng.Float64()) * float64(every)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	if s.stop.Load() {
		return false
	}
	return s.lim.Wait(ctx) == nil && !s.stop.Load()
}

// reporter reports to a random environment a random running set: at least snapMinRunning
// artifacts, each at 1 or 2 replicas.
func (s *snapLoad) reporter(ctx context.Context) {
	rng := rand.New(rand.NewPCG(s.seed, 0x5a4b))
	replicas := make([]int, len(s.arts))
	for s.next(ctx, rng, snapReportEvery) {
		clear(replicas)
		n := snapMinRunning + rng.IntN(len(s.arts)-snapMinRunning+1)
		for _, i := range rng.Perm(len(s.arts))[:n] {
			replicas[i] = 1 + rng.IntN(2)
		}
		env := s.envs[rng.IntN(len(s.envs))]
		a := s.c.do(ctx, http.MethodPut, "/environments/"+s.c.org+"/"+env+"/report/K8S", "application/json", k8sReport(s.arts, replicas))
		s.l.record(kindSnapshot, "snapshot report "+env, a)
	}
}

// changer attests "build" with a random is_compliant on a random snap trail: the latest one
// decides the trail's compliance.
func (s *snapLoad) changer(ctx context.Context) {
	rng := rand.New(rand.NewPCG(s.seed, 0x5a4c))
	for s.next(ctx, rng, snapEvidenceEvery) {
		trail := s.arts[rng.IntN(len(s.arts))].trail
		a := s.c.multipart(ctx, http.MethodPost, "/attestations/"+s.c.org+"/"+flowName+"/trail/"+trail+"/generic",
			map[string]any{"attestation_name": buildName, "is_compliant": rng.IntN(2) == 0, "user_data": map[string]any{}}, "", "", nil)
		o := s.l.record(kindEvidence, "build attestation "+trail, a)
		s.mu.Lock()
		b := s.builds[trail]
		switch {
		case o.acknowledged():
			b.acked++
		case o.ambiguous():
			b.ambiguous++
		}
		s.mu.Unlock()
	}
}

// finalReport sends env's final report until it is answered 201, within deadline, waiting
// as a Retry-After asks (at most 5 s) or backing off.
func (s *snapLoad) finalReport(ctx context.Context, env string, deadline time.Time) bool {
	replicas := make([]int, len(s.arts))
	for i := range replicas {
		replicas[i] = snapFinalReplicas
	}
	body := k8sReport(s.arts, replicas)
	pause := backoff{}
	for {
		a := s.c.do(ctx, http.MethodPut, "/environments/"+s.c.org+"/"+env+"/report/K8S", "application/json", body)
		if s.l.record(kindFinalSnapshot, "final snapshot report "+env, a) == created {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		if secs, err := strconv.Atoi(a.retryAfter); err == nil && secs > 0 {
			select {
			case <-time.After(min(time.Duration(secs)*time.Second, 5*time.Second)):
			case <-ctx.Done():
			}
			continue
		}
		pause.wait(ctx)
	}
}

// finalSnapshot is what the harness read of an environment's latest snapshot at the end.
type finalSnapshot struct {
	env      string
	judged   bool   // the environment has snapPolicy attached
	appeared bool   // it showed the final report (every artifact at snapFinalReplicas instances) in time
	body     string // GET /snapshots/{org}/{env}/-1
	err      string // why it did not appear
}

// snapDoc is what the checks read of a snapshot.
type snapDoc struct {
	Index     int `json:"index"`
	Artifacts []struct {
		Name        string `json:"name"`
		Fingerprint string `json:"fingerprint"`
		Compliant   *bool  `json:"compliant"`
		Instances   int    `json:"instances"`
		// PolicyDecisions are the latest snapshot's verdicts (as assert reads them) in an
		// environment with policies.
		PolicyDecisions []json.RawMessage `json:"policy_decisions"`
		Flows           []struct {
			FlowName  string `json:"flow_name"`
			TrailName string `json:"trail_name"`
			State     string `json:"state"`
		} `json:"flows"`
	} `json:"artifacts"`
}

// showsFinal reports whether a snapshot is one of the final report: every artifact at
// snapFinalReplicas instances.
func showsFinal(body string) bool {
	var d snapDoc
	if json.Unmarshal([]byte(body), &d) != nil || len(d.Artifacts) == 0 {
		return false
	}
	for _, a := range d.Artifacts {
		if a.Instances != snapFinalReplicas {
			return false
		}
	}
	return true
}

// awaitFinal polls env's latest snapshot until it shows the final report, or deadline.
func (s *snapLoad) awaitFinal(ctx context.Context, env string, deadline time.Time) finalSnapshot {
	f := finalSnapshot{env: env}
	for {
		a := s.c.get(ctx, "/snapshots/"+s.c.org+"/"+url.PathEscape(env)+"/-1")
		switch {
		case a.err != nil:
			f.err = a.err.Error()
		case a.status != http.StatusOK:
			f.err = fmt.Sprintf("%d %s", a.status, clip(a.body, 200))
		case showsFinal(a.body):
			f.appeared, f.body, f.err = true, a.body, ""
			return f
		default:
			f.body, f.err = a.body, "the latest snapshot does not show the final report"
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return f
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// buildsStored counts the build attestations the store holds in each snap trail.
func buildsStored(ctx context.Context, h *harness) (map[string]int, error) {
	rows, err := h.db.QueryContext(ctx, `SELECT t.name, count(*) FROM attestations a JOIN trails t ON t.id = a.trail_id
		WHERE t.name LIKE 'snap-%' GROUP BY t.name`)
	if err != nil {
		return nil, fmt.Errorf("faults: read the snap trails' attestations: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("faults: read the snap trails' attestations: %w", err)
		}
		out[name] = n
	}
	return out, rows.Err()
}

// checkSnapshots is the snapshots' verification after the drain: it waits until the store
// holds every build attestation answered 201 and no trail waits for evaluation, sends the
// final reports, waits for the final snapshots and checks them against the trails.
func (h *harness) checkSnapshots(ctx context.Context) Snapshots {
	s := h.snaps
	out := Snapshots{Environments: len(s.envs), Artifacts: len(s.arts)}
	s.mu.Lock()
	builds := make(map[string]buildCount, len(s.builds))
	for t, b := range s.builds {
		builds[t] = *b
	}
	s.mu.Unlock()

	// The evidence changer's attestations applied and evaluated: the trails' states are final.
	var stored map[string]int
	var why string
	settled := waitFor(ctx, h.cfg.DrainTimeout, func() bool {
		c, err := readCounts(ctx, h.db)
		if err == nil {
			stored, err = buildsStored(ctx, h)
		}
		switch {
		case err != nil:
			why = err.Error()
			return false
		case c.dirty > 0:
			why = fmt.Sprintf("%d trails waiting for evaluation", c.dirty)
			return false
		}
		for t, b := range builds {
			if stored[t] < b.acked {
				why = fmt.Sprintf("%s holds %d build attestations of %d answered 201", t, stored[t], b.acked)
				return false
			}
		}
		return true
	})
	if !settled {
		h.problem("the snap trails' evidence did not settle within %v after the drain: %s", h.cfg.DrainTimeout, why)
	}
	for _, a := range s.arts {
		if b := builds[a.trail]; stored[a.trail] > b.acked+b.ambiguous {
			h.problem("%s holds %d build attestations, more than the %d answered 201 and %d failed ambiguously", a.trail,
				stored[a.trail], b.acked, b.ambiguous)
		}
	}
	trailNames := make([]string, len(s.arts))
	for i, a := range s.arts {
		trailNames[i] = a.trail
	}
	before := readAPI(ctx, h.c, trailNames)

	deadline := time.Now().Add(snapFinalTimeout)
	for _, env := range s.envs {
		if !s.finalReport(ctx, env, deadline) {
			h.problem("the final snapshot report of %s was not answered 201 within %v", env, snapFinalTimeout)
		}
	}
	h.progress("final snapshot reports sent")
	deadline = time.Now().Add(snapFinalTimeout)
	snaps := make([]finalSnapshot, len(s.envs))
	var wg sync.WaitGroup
	for i, env := range s.envs {
		wg.Go(func() {
			snaps[i] = s.awaitFinal(ctx, env, deadline)
			snaps[i].judged = i < snapJudgedEnvs
		})
	}
	wg.Wait()

	after := readAPI(ctx, h.c, trailNames)
	for _, t := range trailNames {
		if before[t].state != after[t].state {
			h.problem("%s changed its compliance from %s to %s while the snapshots were checked: its evidence had not settled",
				t, before[t].state, after[t].state)
		}
	}
	c, probs := verifySnapshots(s.arts, snaps, after)
	for _, p := range probs {
		h.problem("%s", p)
	}
	out.EnvironmentsChecked, out.ArtifactsChecked, out.Compliant, out.Wrong, out.Missing = c.EnvironmentsChecked, c.ArtifactsChecked,
		c.Compliant, c.Wrong, c.Missing
	out.Reports, out.Evidence, out.FinalReports = h.led.outcomes(kindSnapshot), h.led.outcomes(kindEvidence), h.led.outcomes(kindFinalSnapshot)
	return out
}

// verifySnapshots checks every artifact of each final snapshot against its trail as the API
// shows it at the end (each artifact is reported in one trail, and the policy of the judged
// environments requires what the others show): its compliant is whether the trail is
// COMPLIANT, and its provenance (flows) is that trail with the trail's state. An artifact of want missing from a final snapshot, one that is not of
// want, and a final snapshot that never appeared are problems too.
func verifySnapshots(want []snapArtifact, snaps []finalSnapshot, trails map[string]apiTrail) (Snapshots, []string) {
	f := newFindings()
	var st Snapshots
	type key struct{ name, fingerprint string }
	byKey := make(map[key]snapArtifact, len(want))
	for _, a := range want {
		byKey[key{a.name, a.fingerprint}] = a
	}
	for _, snap := range snaps {
		if !snap.appeared {
			f.add("final snapshots never appeared", fmt.Sprintf("%s: %s", snap.env, snap.err))
			continue
		}
		var d snapDoc
		if err := json.Unmarshal([]byte(snap.body), &d); err != nil {
			f.add("final snapshots cannot be decoded", fmt.Sprintf("%s: %v", snap.env, err))
			continue
		}
		st.EnvironmentsChecked++
		seen := map[key]bool{}
		for _, got := range d.Artifacts {
			k := key{got.Name, got.Fingerprint}
			where := fmt.Sprintf("%s#%d %s", snap.env, d.Index, got.Name)
			a, ok := byKey[k]
			if !ok || seen[k] {
				st.Wrong++
				f.add("final snapshots show artifacts that were not reported (or twice)", where)
				continue
			}
			seen[k] = true
			st.ArtifactsChecked++
			tr := trails[a.trail]
			if tr.status != http.StatusOK || tr.err != "" || tr.state == "" {
				st.Wrong++
				f.add("snapshot artifacts' trails cannot be read through the API", fmt.Sprintf("%s: %s %d %s", where, a.trail, tr.status, tr.err))
				continue
			}
			wrong := false
			if got.Instances != snapFinalReplicas {
				wrong = true
				f.add("final snapshot artifacts show another instance count than the final report",
					fmt.Sprintf("%s: %d, want %d", where, got.Instances, snapFinalReplicas))
			}
			if wantOK := tr.state == "COMPLIANT"; got.Compliant == nil || *got.Compliant != wantOK {
				wrong = true
				f.add("snapshot artifacts show another compliance than their trail (stale)",
					fmt.Sprintf("%s: compliant %s, trail %s is %s", where, boolOrNull(got.Compliant), a.trail, tr.state))
			}
			if len(got.Flows) == 0 {
				wrong = true
				f.add("snapshot artifacts show no provenance", where)
			}
			if snap.judged && len(got.PolicyDecisions) == 0 {
				wrong = true
				f.add("snapshot artifacts of environments with a policy show no policy decision", where)
			}
			for _, p := range got.Flows {
				switch {
				case p.FlowName != flowName || p.TrailName != a.trail:
					wrong = true
					f.add("snapshot artifacts show another provenance than their trail",
						fmt.Sprintf("%s: %s/%s, want %s/%s", where, p.FlowName, p.TrailName, flowName, a.trail))
				case p.State != tr.state:
					wrong = true
					f.add("snapshot artifacts show another state of their trail than the trail has (stale)",
						fmt.Sprintf("%s: %s in the snapshot, %s is %s", where, p.State, a.trail, tr.state))
				}
			}
			if wrong {
				st.Wrong++
			} else if tr.state == "COMPLIANT" {
				st.Compliant++
			}
		}
		var missing []string
		for _, a := range want {
			if !seen[key{a.name, a.fingerprint}] {
				missing = append(missing, a.name)
			}
		}
		sort.Strings(missing)
		for _, m := range missing {
			st.Missing++
			f.add("artifacts of the final report are missing from its snapshot", fmt.Sprintf("%s#%d %s", snap.env, d.Index, m))
		}
	}
	return st, f.problems()
}

func boolOrNull(b *bool) string {
	if b == nil {
		return "null"
	}
	return strconv.FormatBool(*b)
}
