package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/cmd/veritrail-bench/k8spod"
	"github.com/veritrail/veritrail/ingest"
	"github.com/veritrail/veritrail/internal/store"
)

const (
	// maxReportBytes is the product's body limit of a snapshot report.
	maxReportBytes = 32 << 20
	// replicas is the number of pods of each deployment in the generated reports.
	replicas = 2
	// Snapshot modes.
	modeAlternate = "alternate"
	modeRepeat    = "repeat"
)

// SnapshotSettings are the effective settings of a snapshot run.
type SnapshotSettings struct {
	Duration string `json:"duration"`
	Warmup   string `json:"warmup"`
	// Concurrency is the number of clients and of K8S environments, one per client.
	Concurrency int `json:"concurrency"`
	// ReportItems is the number of pods in each report; RunningArtifacts the (name,
	// fingerprint) pairs they group into (replicas of a deployment share one).
	ReportItems      int `json:"report_items"`
	RunningArtifacts int `json:"running_artifacts"`
	BodyBytes        int `json:"body_bytes"`
	// Mode is "alternate" (each report rolls one deployment back or forth, so each creates a
	// snapshot) or "repeat" (each report repeats the last running set and creates none).
	Mode      string `json:"mode"`
	ProductGC string `json:"product_gc"`
}

// SnapshotResult is everything one snapshot run measured.
type SnapshotResult struct {
	Machine  Machine          `json:"machine"`
	Settings SnapshotSettings `json:"settings"`
	// Bare is the baseline: a bare Huma JSON PUT decoding the same report.
	Bare Phase `json:"bare_json_put"`
	// Ingest is the embedded product answering 201 to snapshot reports.
	Ingest    Phase     `json:"ingest"`
	Ratio     float64   `json:"ingest_over_bare"`
	Evaluator Evaluator `json:"evaluator"`
	// Visible* are how long after its 201 a report was first seen applied in the store, over
	// every report of the measured window (upper bounds: the store is polled every 100 ms).
	VisibleP50ms float64 `json:"visible_after_201_p50_ms"`
	VisibleP99ms float64 `json:"visible_after_201_p99_ms"`
	VisibleMaxms float64 `json:"visible_after_201_max_ms"`
	// ProductLog counts the warnings and errors the product logged during the ingest phase.
	ProductLog []LogCount `json:"product_log,omitempty"`
}

// RunSnapshots measures environment snapshot reports: the baseline, then the product's ingest
// and its evaluator, with the same bodies sent the same way.
func RunSnapshots(ctx context.Context, cfg Config) (*SnapshotResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	sets, running, err := k8sReports(cfg.SnapshotArtifacts)
	if err != nil {
		return nil, fmt.Errorf("bench: build reports: %w", err)
	}
	if n := max(len(sets[0]), len(sets[1])); n > maxReportBytes {
		return nil, fmt.Errorf("bench: a report of %d bytes is over the product's limit of %d", n, maxReportBytes)
	}
	mode := modeAlternate
	if cfg.SnapshotRepeat {
		mode = modeRepeat
	}
	res := &SnapshotResult{
		Machine: Machine{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
			OS: runtime.GOOS, Arch: runtime.GOARCH},
		Settings: SnapshotSettings{Duration: cfg.Duration.String(), Warmup: cfg.Warmup.String(), Concurrency: cfg.Concurrency,
			ReportItems: cfg.SnapshotArtifacts, RunningArtifacts: running, BodyBytes: len(sets[0]), Mode: mode},
	}
	fmt.Fprintf(cfg.Progress, "bench: K8S reports of %d pods (%d running artifacts, %d bytes), %s, %d clients, %v per phase after %v of warm-up\n",
		cfg.SnapshotArtifacts, running, len(sets[0]), mode, cfg.Concurrency, cfg.Duration, cfg.Warmup)

	if res.Bare, err = runBareSnapshots(ctx, cfg, sets); err != nil {
		return nil, err
	}
	var restoreGC func()
	res.Settings.ProductGC, restoreGC = productGC()
	defer restoreGC()
	runtime.GC() // as in Run: the baseline's garbage is not collected on the product's time
	if err := runIngestSnapshots(ctx, cfg, sets, res); err != nil {
		return nil, err
	}
	if res.Bare.PerSecond > 0 {
		res.Ratio = res.Ingest.PerSecond / res.Bare.PerSecond
	}
	ev := &res.Evaluator
	if res.Ingest.PerSecond > 0 {
		ev.VsIngest = ev.ApplyPerSecond / res.Ingest.PerSecond
	}
	ev.KeptUp = ev.Drained && ev.VsIngest >= keptUpShare
	return res, nil
}

// registerBareSnapshot is the baseline of the snapshot phases: the product's report route
// with the same input type (so Huma decodes and validates the same body into the same
// structure), the same body limit and the same answer. It leaves out what the product adds:
// authentication, the environment lookup, the check of every item and the publish.
func registerBareSnapshot(api huma.API) {
	type in struct {
		ingest.EnvPath
		Type string `path:"type"`
		Body struct {
			Artifacts []map[string]json.RawMessage `json:"artifacts"`
		}
	}
	type out struct {
		Status int
		Body   string
	}
	huma.Register(api, huma.Operation{
		OperationID:   "reportSnapshot",
		Method:        http.MethodPut,
		Path:          "/api/v2/environments/{org}/{env}/report/{type}",
		DefaultStatus: http.StatusCreated,
		MaxBodyBytes:  maxReportBytes,
	}, func(_ context.Context, in *in) (*out, error) {
		if len(in.Body.Artifacts) == 0 {
			return nil, huma.Error400BadRequest("artifacts: expected at least one")
		}
		return &out{Status: http.StatusCreated, Body: fmt.Sprintf("Environment '%s' report received", in.Env)}, nil
	})
}

func runBareSnapshots(ctx context.Context, cfg Config, sets [2][]byte) (Phase, error) {
	addr, stop, err := serveBare(registerBareSnapshot)
	if err != nil {
		return Phase{}, err
	}
	defer stop()
	client := newClient(cfg.Concurrency)
	defer client.CloseIdleConnections()
	rep := newReporters("http://"+addr, cfg.Concurrency, sets, cfg.SnapshotRepeat)
	t := &target{client: client, method: http.MethodPut, contentType: "application/json", want: 201, perWorker: rep}
	fmt.Fprintf(cfg.Progress, "bench: phase 1: bare Huma JSON PUT on %s\n", addr)
	hammer(ctx, t, cfg.Concurrency, cfg.Warmup, nil)
	p := hammer(ctx, t, cfg.Concurrency, cfg.Duration, nil)
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	if p.OK == 0 {
		return p, fmt.Errorf("bench: the baseline answered no request: %s", p.FirstErr)
	}
	fmt.Fprintf(cfg.Progress, "bench: phase 1: %.0f/s, p50 %.2f ms, p99 %.2f ms\n", p.PerSecond, p.P50ms, p.P99ms)
	return p, nil
}

// runIngestSnapshots starts the embedded product, creates one K8S environment per client,
// warms up until the evaluator is idle again, then measures the reports and the evaluator.
func runIngestSnapshots(ctx context.Context, cfg Config, sets [2][]byte, res *SnapshotResult) error {
	pr, err := startProduct(ctx, cfg)
	if err != nil {
		return err
	}
	defer pr.close()
	r, dir, logs, secret, base, client := pr.r, pr.dir, pr.logs, pr.secret, pr.base, pr.client
	fmt.Fprintf(cfg.Progress, "bench: phase 2: embedded Veritrail on %s (data in %s), %d K8S environments\n", r.Addr, dir, cfg.Concurrency)
	if err := prepareEnvironments(ctx, client, base, secret, cfg.Concurrency); err != nil {
		return err
	}
	org, err := r.Store.OrgByName(ctx, benchOrg)
	if err != nil {
		return fmt.Errorf("bench: look up organization: %w", err)
	}
	rep := newReporters(base, cfg.Concurrency, sets, cfg.SnapshotRepeat)
	rep.st, rep.orgID = r.Store, org.ID
	for i := range cfg.Concurrency {
		e, err := r.Store.EnvironmentByName(ctx, org.ID, envName(i))
		if err != nil {
			return fmt.Errorf("bench: look up environment: %w", err)
		}
		rep.envIDs = append(rep.envIDs, e.ID)
	}
	p := &progress{st: r.Store, count: rep.applied}

	t := &target{client: client, method: http.MethodPut, token: secret, contentType: "application/json", want: 201, perWorker: rep}
	if err := rep.window(ctx); err != nil {
		return err
	}
	var warm atomic.Int64
	hammer(ctx, t, cfg.Concurrency, cfg.Warmup, &warm)
	// Measure from an idle evaluator, so the warm-up's backlog is not counted as the load's.
	if err := p.waitIdle(ctx, int(warm.Load()), cfg.DrainTimeout); err != nil {
		return fmt.Errorf("bench: after the warm-up: %w", err)
	}
	if err := rep.window(ctx); err != nil {
		return err
	}
	logs.reset() // count what the measured load causes, not the setup

	stopProfile, err := startProfile(cfg)
	if err != nil {
		return err
	}
	res.Ingest, err = measure(ctx, cfg, t, p, "phase 2")
	stopProfile()
	res.Evaluator = p.ev
	res.ProductLog = logs.counts()
	lags := rep.visibleLags()
	res.VisibleP50ms, res.VisibleP99ms = ms(percentile(lags, 0.50)), ms(percentile(lags, 0.99))
	if len(lags) > 0 {
		res.VisibleMaxms = ms(lags[len(lags)-1])
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if res.Ingest.OK == 0 {
		return fmt.Errorf("bench: ingest accepted no report: %s", res.Ingest.FirstErr)
	}
	if err != nil && err != errNotDrained {
		return err
	}
	ev := p.ev
	fmt.Fprintf(cfg.Progress, "bench: phase 3: evaluator applied %.0f/s during the load, drained %v after %.1f s\n",
		ev.ApplyPerSecond, ev.Drained, ev.DrainSeconds)
	return nil
}

func envName(i int) string { return fmt.Sprintf("k8s-%03d", i) }

// prepareEnvironments creates the K8S environments, then reads the last one back: the read
// waits for the caller's own writes, so every environment exists before the load starts.
func prepareEnvironments(ctx context.Context, client *http.Client, base, secret string, n int) error {
	for i := range n {
		body, _ := json.Marshal(map[string]any{"name": envName(i), "type": "K8S", "description": "veritrail bench"})
		if err := callJSON(ctx, client, http.MethodPut, base+"/api/v2/environments/"+benchOrg, secret, 201, body); err != nil {
			return fmt.Errorf("bench: create environment: %w", err)
		}
	}
	if err := callJSON(ctx, client, http.MethodGet, base+"/api/v2/environments/"+benchOrg+"/"+envName(n-1), secret, 200, nil); err != nil {
		return fmt.Errorf("bench: read environment back: %w", err)
	}
	return nil
}

// callJSON sends one JSON request (or none with a nil body) and checks the status.
func callJSON(ctx context.Context, client *http.Client, method, url, secret string, want int, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, url, resp.StatusCode, want, b)
	}
	return nil
}

// reporters is the snapshot load: worker w reports to environment w, alternating between the
// two running sets (or repeating the first), and remembers when each accepted report was sent
// and answered, so that the evaluator's progress read from the store can be matched to it.
type reporters struct {
	urls   []string
	sets   [2][]byte
	repeat bool
	// turn is which set worker w sends next; only that worker touches it.
	turn []int

	// Set for the product only: where the progress is read.
	st     store.Store
	orgID  string
	envIDs []string

	mu sync.Mutex // guards what follows: written by the workers, read by the poller
	// sent and answered, per environment, are the accepted reports of the current window in
	// order (one client per environment, so in the order the evaluator applies them).
	sent, answered [][]time.Time
	// seen is how many of them were seen applied; lags how long after its 201 each was.
	seen []int
	lags []time.Duration
	// base is each environment's snapshot count when the window started.
	base []int
}

func newReporters(base string, n int, sets [2][]byte, repeat bool) *reporters {
	r := &reporters{sets: sets, repeat: repeat, turn: make([]int, n), sent: make([][]time.Time, n),
		answered: make([][]time.Time, n), seen: make([]int, n), base: make([]int, n)}
	for i := range n {
		r.urls = append(r.urls, fmt.Sprintf("%s/api/v2/environments/%s/%s/report/K8S", base, benchOrg, envName(i)))
	}
	return r
}

func (r *reporters) next(w int) (string, []byte) {
	return r.urls[w], r.sets[r.turn[w]]
}

func (r *reporters) accepted(w int, sent, answered time.Time) {
	// Switch sets only after a 201: a failed report is sent again unchanged, so every applied
	// report differs from the one applied before it.
	if !r.repeat {
		r.turn[w] ^= 1
	}
	r.mu.Lock()
	r.sent[w] = append(r.sent[w], sent)
	r.answered[w] = append(r.answered[w], answered)
	r.mu.Unlock()
}

// window starts counting afresh: it forgets the accepted reports so far and takes each
// environment's snapshot count as its base. Call it with the evaluator idle.
func (r *reporters) window(ctx context.Context) error {
	base := make([]int, len(r.envIDs))
	if !r.repeat {
		for i, id := range r.envIDs {
			ts, err := r.st.SnapshotTimestamps(ctx, id)
			if err != nil {
				return fmt.Errorf("bench: snapshot timestamps: %w", err)
			}
			base[i] = len(ts)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.envIDs {
		r.sent[i], r.answered[i], r.seen[i], r.base[i] = nil, nil, 0, base[i]
	}
	r.lags = nil
	return nil
}

// applied reads from the store how many reports accepted in the window the evaluator has
// applied, one query per environment, and notes for the newly applied ones how long after
// their 201 that poll saw them.
//
// Alternating, every report creates a snapshot: applied is the snapshot count over the base.
// Repeating, no report does, but each sets the environment's last_reported_at to the time
// ingest published it, between the report's send and its answer: the reports applied are
// then those sent at or before last_reported_at (the next one was only sent after the
// previous one was answered).
func (r *reporters) applied(ctx context.Context) (int, error) {
	total := 0
	for i, id := range r.envIDs {
		n := 0
		var last float64
		if r.repeat {
			e, err := r.st.EnvironmentByID(ctx, r.orgID, id)
			if err != nil {
				return 0, fmt.Errorf("bench: environment: %w", err)
			}
			last = e.LastReportedAt
		} else {
			ts, err := r.st.SnapshotTimestamps(ctx, id)
			if err != nil {
				return 0, fmt.Errorf("bench: snapshot timestamps: %w", err)
			}
			n = len(ts)
		}
		now := time.Now()
		r.mu.Lock()
		if r.repeat {
			// ingest stamps reports with microseconds as float seconds; so is the send time here.
			n = sort.Search(len(r.sent[i]), func(k int) bool { return float64(r.sent[i][k].UnixMicro())/1e6 > last })
		} else {
			n -= r.base[i]
		}
		// A report can be applied before its client has read the 201; it counts from the next poll.
		n = min(n, len(r.answered[i]))
		for k := r.seen[i]; k < n; k++ {
			r.lags = append(r.lags, max(now.Sub(r.answered[i][k]), 0))
		}
		r.seen[i] = max(r.seen[i], n)
		total += r.seen[i]
		r.mu.Unlock()
	}
	return total, nil
}

// visibleLags are the lags noted so far, sorted.
func (r *reporters) visibleLags() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	lags := slices.Clone(r.lags)
	slices.Sort(lags)
	return lags
}

// k8sReports builds the two running sets the load alternates between, as report bodies of n
// pods: deployments of two replicas (the last one has one when n is odd), each pod with one
// container. The second set is the first with one deployment rolled to a new image (new
// digest, replica set, pod names and start times), the common change between two reports
// of a cluster. running is the number of (name, fingerprint) pairs of a set.
func k8sReports(n int) (sets [2][]byte, running int, err error) {
	deployments := (n + replicas - 1) / replicas
	for s := range sets {
		pods := make([]k8spod.Pod, 0, n)
		for i := range n {
			d := i / replicas
			version := 1
			if s == 1 && d == 0 {
				version = 2
			}
			pods = append(pods, k8sPod(d, i%replicas, version))
		}
		if sets[s], err = json.Marshal(map[string]any{"artifacts": pods}); err != nil {
			return sets, 0, err
		}
	}
	return sets, deployments, nil
}

func k8sPod(deployment, replica, version int) k8spod.Pod {
	team := fmt.Sprintf("team-%02d", deployment%8)
	name := fmt.Sprintf("service-%03d", deployment)
	rs := name + "-" + k8spod.Hash("rs", deployment, version)[:10]
	image := fmt.Sprintf("registry.example.com/%s/%s:1.%d.0", team, name, version)
	return k8spod.OfReplicaSet(rs, team, replica, map[string]string{image: k8spod.Hash("image", deployment, version)},
		1786425000+int64(deployment*60+version*86400+replica))
}
