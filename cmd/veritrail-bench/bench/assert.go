package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"golang.org/x/sync/errgroup"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/ingest"
	"github.com/veritrail/veritrail/internal/store"
)

// AssertP99TargetMs is the brief's latency target for assert.
const AssertP99TargetMs = 2.0

// assertPolicies are three policies of the kinds environments use (as envpolicy's benchmarks): built-in rules
// with an exception, attestation rules with a condition on flow tags, a decision for a control.
var assertPolicies = map[string]string{
	"provenance": `_schema: https://kosli.com/schemas/policy/environment/v1
artifacts:
  provenance:
    required: true
    exceptions:
      - if: ${{ matches(artifact.name, "^datadog:") }}
  trail-compliance:
    required: true
`,
	"evidence": `_schema: https://kosli.com/schemas/policy/environment/v1
artifacts:
  attestations:
    - name: snyk
      type: snyk
      if: ${{ flow.tags.risk-level == "high" }}
    - name: unit-tests
      type: junit
`,
	"release": `_schema: https://kosli.com/schemas/policy/environment/v1
artifacts:
  attestations:
    - name: release
      type: decision
      for_control: change-approval
`,
}

// Issue 21's targets for assert: with ingest at half its capacity in the same process, >= 0.5x
// the bare GET with p99 under 5 ms; alone, >= 0.8x with p99 within 1.2x of the bare GET's.
const (
	MixedRatioTarget = 0.5
	MixedP99TargetMs = 5.0
	AloneRatioTarget = 0.8
	AloneP99Factor   = 1.2
)

// AssertResult is one run of RunAssert.
type AssertResult struct {
	Machine  Machine        `json:"machine"`
	Settings AssertSettings `json:"settings"`
	// Bare is the baseline: a bare Huma GET of the assert path answering a small JSON object.
	Bare Phase `json:"bare_get"`
	// BareMixed is the mixed phase on the baselines: the bare GET beside the bare multipart
	// handler at half its capacity, the ceiling of MixedRatio on this machine.
	BareMixed BareMixed `json:"bare_mixed"`
	// Environment is assert in environment scope: the stored verdict of a running artifact.
	Environment Phase `json:"assert_environment"`
	// Flow is assert in flow scope (trail compliance), Policy in policy scope (judged on the fly).
	Flow   Phase `json:"assert_flow"`
	Policy Phase `json:"assert_policy"`
	// Changing is environment scope again while a writer reports ChurnPerSecond attestations on the running
	// artifacts: every commit of the evaluator retires the answers kept in memory, so this is the rate with
	// most answers computed afresh. Changes is how many of those attestations were accepted during the phase.
	Changing       Phase   `json:"assert_environment_changing"`
	ChurnPerSecond float64 `json:"churn_per_second"`
	Changes        int64   `json:"changes"`
	// Loaded is environment scope again while LoadWriters pipelines with a key of their own report
	// attestations on the running artifacts, LoadTarget a second between them (ingest load),
	// and LoadWrites how many were accepted during the phase. Every assert waits for the writes of its organization
	// acknowledged before it (read after write); in the distributed mode the writers use a second
	// ingest process, so the readers wait for what another process acknowledged.
	Loaded      Phase   `json:"assert_environment_loaded"`
	LoadWriters int     `json:"load_writers"`
	LoadWrites  int64   `json:"load_writes"`
	LoadRate    float64 `json:"load_writes_per_second"`
	LoadTarget  int     `json:"load_writes_per_second_sent_at_most"`
	// IngestCapacity is how many attestations a second MixedWriters writers back to back got
	// accepted in the organization's build trails (other pipelines: none reports an asserted
	// artifact) with no reader beside them; Mixed is environment scope while they send half of
	// that, MixedRate a second of them accepted during the phase (issue 21 item 2). An assert
	// waits only for writes it depends on, so this is CPU shared with ingest and the evaluator;
	// Changing and Loaded are the phases whose writes touch the asserted artifacts.
	IngestCapacity float64 `json:"ingest_capacity_per_second"`
	// CapacityCPU is this process's CPU (product and load generator) an attestation accepted
	// while measuring IngestCapacity; HalfCPU the same with the writers sending half of it and
	// no reader (HalfRate accepted a second, HalfCores cores busy): what the mixed phase's
	// writers leave the readers is the machine less that.
	CapacityCPU  float64 `json:"capacity_cpu_us_per_attestation"`
	HalfRate     float64 `json:"half_writes_per_second"`
	HalfCPU      float64 `json:"half_cpu_us_per_attestation"`
	HalfCores    float64 `json:"half_cores_busy"`
	MixedWriters int     `json:"mixed_writers"`
	Mixed        Phase   `json:"assert_environment_mixed"`
	MixedRate    float64 `json:"mixed_writes_per_second"`
	// AloneSched and MixedSched are how long goroutines waited for a core once ready during the
	// environment-scope phase and the mixed phase.
	AloneSched SchedLatency `json:"environment_sched_latency"`
	MixedSched SchedLatency `json:"mixed_sched_latency"`
	// MixedRatio is Mixed over Bare; MixedMet is it against MixedRatioTarget with Mixed's p99
	// under MixedP99TargetMs; AloneMet is Environment against AloneRatioTarget with its p99
	// within AloneP99Factor of Bare's.
	MixedRatio float64 `json:"mixed_over_bare"`
	MixedMet   bool    `json:"mixed_met"`
	AloneMet   bool    `json:"alone_met"`
	// Ratio is Environment over Bare, against RatioTarget; P99Met is Environment's p99 against AssertP99TargetMs.
	Ratio       float64 `json:"environment_over_bare"`
	RatioTarget float64 `json:"environment_over_bare_target"`
	RatioMet    bool    `json:"environment_over_bare_met"`
	P99Met      bool    `json:"environment_p99_met"`
}

// AssertSettings are the effective settings of an assert run.
type AssertSettings struct {
	Mode        string `json:"mode"`
	Duration    string `json:"duration"`
	Warmup      string `json:"warmup"`
	Concurrency int    `json:"concurrency"`
	Artifacts   int    `json:"artifacts"`
	Policies    int    `json:"policies"`
	ProductGC   string `json:"product_gc"`
}

// assertArtifacts is how many artifacts run in the environment the asserts ask about, round-robin.
const assertArtifacts = 100

// assertChurnInterval is the pace of the writer in the changing phase: 100 attestations a second,
// each an evaluator commit, as a busy organization's pipelines would send.
const assertChurnInterval = 10 * time.Millisecond

// defaultAssertLoadRate is the ingest load of the loaded phase, in attestations a second over
// all its writers (Config.AssertLoadRate): a fixed rate, so that the load is the same before and
// after a change (writers back to back would go as fast as the readers leave them room).
const defaultAssertLoadRate = 500

// RunAssert measures assert against a baseline in the same run: a bare Huma GET, then the embedded product
// answering asserts about artifacts running in an environment with three policies, in environment, flow and
// policy scope.
func RunAssert(ctx context.Context, cfg Config) (*AssertResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	res := &AssertResult{
		Machine: Machine{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
			OS: runtime.GOOS, Arch: runtime.GOARCH},
		Settings: AssertSettings{Duration: cfg.Duration.String(), Warmup: cfg.Warmup.String(), Concurrency: cfg.Concurrency,
			Artifacts: assertArtifacts, Policies: len(assertPolicies)},
		RatioTarget: RatioTarget,
	}
	fps := make([]string, assertArtifacts)
	for i := range fps {
		fps[i] = fmt.Sprintf("%064x", 0xa55e<<32+i)
	}
	assertURLs := func(base, query string) func(int) string {
		urls := make([]string, len(fps))
		for i, fp := range fps {
			urls[i] = base + "/api/v2/asserts/" + benchOrg + "/fingerprint/" + fp + query
		}
		return func(i int) string { return urls[i%len(urls)] }
	}

	addr, stop, err := serveBare(registerBareGet)
	if err != nil {
		return nil, err
	}
	client := newClient(cfg.Concurrency)
	bare := &target{client: client, method: http.MethodGet, url: assertURLs("http://"+addr, "?environment_name=prod"),
		contentType: "application/json; charset=utf-8", want: 200}
	fmt.Fprintf(cfg.Progress, "bench: assert phase 1: bare Huma GET on %s\n", addr)
	hammer(ctx, bare, cfg.Concurrency, cfg.Warmup, nil)
	res.Bare = hammer(ctx, bare, cfg.Concurrency, cfg.Duration, nil)
	stop()
	client.CloseIdleConnections()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if res.Bare.OK == 0 {
		return nil, fmt.Errorf("bench: the baseline answered no request: %s", res.Bare.FirstErr)
	}
	fmt.Fprintf(cfg.Progress, "bench: assert phase 1: %.0f/s, p50 %.2f ms, p99 %.2f ms\n", res.Bare.PerSecond, res.Bare.P50ms, res.Bare.P99ms)
	fmt.Fprintf(cfg.Progress, "bench: assert phase 1b: the mixed phase on the baselines (bare GET beside bare multipart at half its capacity)\n")
	if res.BareMixed, err = runBareMixed(ctx, cfg, cfg.Concurrency, res.Bare.PerSecond, func(base string) func(int) string {
		return assertURLs(base, "?environment_name=prod")
	}); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Progress, "bench: assert phase 1b: bare multipart capacity %.0f/s; at half, %.2f cores busy; bare GET beside it %.0f/s (%.2fx alone), p99 %.2f ms\n",
		res.BareMixed.WriteCapacity, res.BareMixed.HalfCores, res.BareMixed.Readers.PerSecond, res.BareMixed.Ratio, res.BareMixed.Readers.P99ms)

	var restoreGC func()
	res.Settings.ProductGC, restoreGC = productGC()
	defer restoreGC()
	runtime.GC()
	start, mode := startProduct, "embedded"
	if cfg.Postgres != "" {
		start, mode = startDistributed, "distributed (ingest and evaluate on kfake and PostgreSQL)"
	}
	pr, err := start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer pr.close()
	res.Settings.Mode = mode
	fmt.Fprintf(cfg.Progress, "bench: assert phases: %s Veritrail on %s, %d artifacts running in prod with %d policies\n",
		mode, pr.r.Addr, assertArtifacts, len(assertPolicies))
	if err := prepareAsserts(ctx, pr, fps); err != nil {
		return nil, err
	}
	for _, ph := range []struct {
		name  string
		query string
		out   *Phase
	}{
		{"environment scope", "?environment_name=prod", &res.Environment},
		{"flow scope", "", &res.Flow},
		{"policy scope", "?policy_name=provenance&policy_name=evidence&policy_name=release", &res.Policy},
	} {
		t := &target{client: pr.client, method: http.MethodGet, url: assertURLs(pr.base, ph.query), token: pr.secret,
			contentType: "application/json; charset=utf-8", want: 200}
		hammer(ctx, t, cfg.Concurrency, cfg.Warmup, nil)
		stopProfile := func() {}
		if ph.out == &res.Environment && cfg.ProfilePhase == ProfileCombined { // the phase with the targets, unless another is named
			if stopProfile, err = startProfile(cfg); err != nil {
				return nil, err
			}
		}
		sched := markSched()
		*ph.out = hammer(ctx, t, cfg.Concurrency, cfg.Duration, nil)
		if ph.out == &res.Environment {
			res.AloneSched = sched.since()
		}
		stopProfile()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if ph.out.OK == 0 {
			return nil, fmt.Errorf("bench: assert in %s answered no request: %s", ph.name, ph.out.FirstErr)
		}
		fmt.Fprintf(cfg.Progress, "bench: assert in %s: %.0f/s, p50 %.2f ms, p99 %.2f ms\n", ph.name, ph.out.PerSecond,
			ph.out.P50ms, ph.out.P99ms)
	}
	changing, changes, err := assertWhileChanging(ctx, cfg, pr, assertURLs(pr.base, "?environment_name=prod"), fps, false, 1, assertChurnInterval)
	if err != nil {
		return nil, err
	}
	res.Changing, res.Changes, res.ChurnPerSecond = changing, changes, float64(time.Second/assertChurnInterval)
	fmt.Fprintf(cfg.Progress, "bench: assert in environment scope, evidence changing: %.0f/s, p99 %.2f ms, %d attestations accepted\n",
		changing.PerSecond, changing.P99ms, changes)
	res.LoadWriters, res.LoadTarget = max(1, cfg.Concurrency/4), cfg.AssertLoadRate
	if res.LoadTarget <= 0 {
		res.LoadTarget = defaultAssertLoadRate
	}
	res.Loaded, res.LoadWrites, err = assertWhileChanging(ctx, cfg, pr, assertURLs(pr.base, "?environment_name=prod"), fps, false, res.LoadWriters,
		time.Duration(res.LoadWriters)*time.Second/time.Duration(res.LoadTarget))
	if err != nil {
		return nil, err
	}
	res.LoadRate = float64(res.LoadWrites) / res.Loaded.Seconds
	fmt.Fprintf(cfg.Progress, "bench: assert in environment scope under ingest load: %.0f/s, p50 %.2f ms, p99 %.2f ms, %.0f attestations/s accepted\n",
		res.Loaded.PerSecond, res.Loaded.P50ms, res.Loaded.P99ms, res.LoadRate)
	res.MixedWriters = cfg.Concurrency
	if err := prepareBuilds(ctx, pr, cfg.Concurrency); err != nil {
		return nil, err
	}
	if res.IngestCapacity, res.CapacityCPU, _, err = writeAlone(ctx, cfg, pr, fps, res.MixedWriters, 0, ProfileWritesFull); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Progress, "bench: ingest capacity, %d writers back to back, no reader: %.0f attestations/s, %.0f us of CPU each\n",
		res.MixedWriters, res.IngestCapacity, res.CapacityCPU)
	half := res.IngestCapacity / 2
	halfEvery := time.Duration(float64(res.MixedWriters) * float64(time.Second) / half)
	if res.HalfRate, res.HalfCPU, res.HalfCores, err = writeAlone(ctx, cfg, pr, fps, res.MixedWriters, halfEvery, ProfileWritesHalf); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Progress, "bench: ingest at half its capacity, no reader: %.0f attestations/s, %.0f us of CPU each, %.2f cores busy\n",
		res.HalfRate, res.HalfCPU, res.HalfCores)
	var mixed int64
	stopProfile, err := startProfileOf(cfg, ProfileAssertMixed)
	if err != nil {
		return nil, err
	}
	sched := markSched()
	res.Mixed, mixed, err = assertWhileChanging(ctx, cfg, pr, assertURLs(pr.base, "?environment_name=prod"), fps, true, res.MixedWriters,
		halfEvery)
	if err != nil {
		return nil, err
	}
	res.MixedSched = sched.since()
	stopProfile()
	res.MixedRate = float64(mixed) / res.Mixed.Seconds
	fmt.Fprintf(cfg.Progress, "bench: assert in environment scope, ingest at half its capacity: %.0f/s, p50 %.2f ms, p99 %.2f ms, %.0f attestations/s accepted\n",
		res.Mixed.PerSecond, res.Mixed.P50ms, res.Mixed.P99ms, res.MixedRate)
	res.Ratio = res.Environment.PerSecond / res.Bare.PerSecond
	res.RatioMet = res.Ratio >= RatioTarget
	res.P99Met = res.Environment.P99ms < AssertP99TargetMs
	res.MixedRatio = res.Mixed.PerSecond / res.Bare.PerSecond
	res.MixedMet = res.MixedRatio >= MixedRatioTarget && res.Mixed.P99ms < MixedP99TargetMs
	res.AloneMet = res.Ratio >= AloneRatioTarget && res.Environment.P99ms <= AloneP99Factor*res.Bare.P99ms
	return res, nil
}

// registerBareGet is the baseline of the assert phases: the assert route with its path and query parameters,
// answering a small fixed JSON object, without authentication or store.
func registerBareGet(api huma.API) {
	type in struct {
		ingest.OrgPath
		Fingerprint     string `path:"fingerprint"`
		EnvironmentName string `query:"environment_name"`
	}
	type body struct {
		Fingerprint string `json:"fingerprint"`
		Compliant   bool   `json:"compliant"`
		Scope       string `json:"scope"`
	}
	type out struct{ Body body }
	huma.Register(api, huma.Operation{OperationID: "bareAssert", Method: http.MethodGet,
		Path: "/api/v2/asserts/{org}/fingerprint/{fingerprint}"},
		func(_ context.Context, in *in) (*out, error) {
			return &out{Body: body{Fingerprint: in.Fingerprint, Compliant: true, Scope: "environment"}}, nil
		})
}

// prepareAsserts reports the artifacts in two flows with their evidence, runs them in prod, attaches the
// policies, and reads an assert back (which waits for the caller's writes).
func prepareAsserts(ctx context.Context, pr *product, fps []string) error {
	api, secret, client := pr.base+"/api/v2", pr.secret, pr.client
	js := func(v any) []byte {
		b, _ := json.Marshal(v) // plain maps always encode
		return b
	}
	steps := []func() error{
		func() error {
			return callJSON(ctx, client, http.MethodPost, api+"/controls/"+benchOrg, secret, 201,
				js(map[string]any{"identifier": "change-approval", "name": "CAB"}))
		},
	}
	for _, flow := range []string{"web", "api"} {
		steps = append(steps, func() error {
			return call(ctx, client, http.MethodPut, api+"/flows/"+benchOrg+"/template_file", secret, 201,
				part{"data_json", "", js(map[string]any{"name": flow, "description": ""})}, part{"template_file", "t.yml", []byte("version: 1\n")})
		})
	}
	steps = append(steps, func() error {
		return callJSON(ctx, client, http.MethodPatch, api+"/tags/"+benchOrg+"/flow/web", secret, 200,
			js(map[string]any{"set_tags": map[string]string{"risk-level": "high"}}))
	})
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("bench: prepare asserts: %w", err)
		}
	}
	var running []map[string]any
	for i, fp := range fps {
		flow, trail := []string{"web", "api"}[i%2], fmt.Sprintf("trail-%d", i%10) // ten trails, five in each flow
		if i < 10 {
			if err := call(ctx, client, http.MethodPut, api+"/trails/"+benchOrg+"/"+flow, secret, 201,
				part{"data_json", "", js(map[string]any{"name": trail})}); err != nil {
				return fmt.Errorf("bench: begin trail: %w", err)
			}
		}
		if err := callJSON(ctx, client, http.MethodPost, api+"/artifacts/"+benchOrg+"/"+flow, secret, 201, js(map[string]any{
			"fingerprint": fp, "filename": fmt.Sprintf("service-%d", i), "build_url": "b", "commit_url": "c", "trail_name": trail})); err != nil {
			return fmt.Errorf("bench: report artifact: %w", err)
		}
		atts := []map[string]any{
			{"kind": "junit", "attestation_name": "unit-tests", "junit_results": []map[string]any{{"name": "s", "failures": 0, "errors": 0}}},
			{"kind": "snyk", "attestation_name": "snyk", "snyk_results": map[string]any{"results": []any{}}},
			{"kind": "system", "attestation_name": "release", "type_name": "decision", "control": "change-approval",
				"attestation_data": map[string]any{"is_compliant": i%10 != 0}},
		}
		for _, a := range atts {
			kind := a["kind"].(string)
			delete(a, "kind")
			a["artifact_fingerprint"], a["user_data"] = fp, map[string]any{}
			if err := call(ctx, client, http.MethodPost, api+"/attestations/"+benchOrg+"/"+flow+"/trail/"+trail+"/"+kind, secret, 201,
				part{"data_json", "", js(a)}); err != nil {
				return fmt.Errorf("bench: attest: %w", err)
			}
		}
		running = append(running, map[string]any{"digests": map[string]string{fmt.Sprintf("service-%d", i): fp}, "creationTimestamp": 1})
	}
	if err := callJSON(ctx, client, http.MethodPut, api+"/environments/"+benchOrg, secret, 201,
		js(map[string]any{"name": "prod", "type": "server"})); err != nil {
		return fmt.Errorf("bench: create environment: %w", err)
	}
	if err := callJSON(ctx, client, http.MethodPut, api+"/environments/"+benchOrg+"/prod/report/server", secret, 201,
		js(map[string]any{"artifacts": running})); err != nil {
		return fmt.Errorf("bench: report snapshot: %w", err)
	}
	for name, content := range assertPolicies {
		if err := call(ctx, client, http.MethodPut, api+"/policies/"+benchOrg, secret, 201,
			part{"payload", "", js(map[string]any{"name": name, "type": "env"})}, part{"policy_file", name + ".yml", []byte(content)}); err != nil {
			return fmt.Errorf("bench: create policy: %w", err)
		}
	}
	if err := callJSON(ctx, client, http.MethodPost, api+"/environments/"+benchOrg+"/prod/policies", secret, 200,
		js(map[string]any{"policy_names": []string{"evidence", "provenance", "release"}})); err != nil {
		return fmt.Errorf("bench: attach policies: %w", err)
	}
	if err := callJSON(ctx, client, http.MethodGet, api+"/asserts/"+benchOrg+"/fingerprint/"+fps[0]+"?environment_name=prod", secret, 200, nil); err != nil {
		return fmt.Errorf("bench: read an assert back: %w", err)
	}
	return nil
}

// assertWhileChanging measures environment-scope asserts while writers report passing junit
// attestations on one running artifact after another, or elsewhere in the organization's
// build trails (see startWriters).
func assertWhileChanging(ctx context.Context, cfg Config, pr *product, url func(int) string, fps []string, elsewhere bool, writers int,
	interval time.Duration) (Phase, int64, error) {
	t := &target{client: pr.client, method: http.MethodGet, url: url, token: pr.secret,
		contentType: "application/json; charset=utf-8", want: 200}
	w, err := startWriters(ctx, pr, fps, elsewhere, writers, interval)
	if err != nil {
		return Phase{}, 0, err
	}
	hammer(ctx, t, cfg.Concurrency, cfg.Warmup, nil)
	w.changes.Store(0)
	ph := hammer(ctx, t, cfg.Concurrency, cfg.Duration, nil)
	n := w.changes.Load()
	if err := w.stop(); err != nil {
		return ph, n, err
	}
	if ph.OK == 0 {
		return ph, n, fmt.Errorf("bench: assert while evidence changes answered no request: %s", ph.FirstErr)
	}
	return ph, n, ctx.Err()
}

// writeAlone has writers report in the build trails with no reader beside them, each one every
// interval or, with 0, back to back (the capacity the mixed phase loads ingest to half of), and
// answers how many attestations a second were accepted, this process's CPU each and its cores
// busy meanwhile. The CPU profile covers it when cfg's profile phase is phase.
func writeAlone(ctx context.Context, cfg Config, pr *product, fps []string, writers int, interval time.Duration, phase string) (rate, cpuEach, cores float64, err error) {
	w, err := startWriters(ctx, pr, fps, true, writers, interval)
	if err != nil {
		return 0, 0, 0, err
	}
	wait := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	wait(cfg.Warmup)
	stopProfile, err := startProfileOf(cfg, phase)
	if err != nil {
		return 0, 0, 0, errors.Join(err, w.stop())
	}
	w.changes.Store(0)
	win := startCPUWindow()
	wait(cfg.Duration)
	n := w.changes.Load()
	cpuEach, cores, el := win.per(n)
	stopProfile()
	if err := w.stop(); err != nil {
		return 0, 0, 0, err
	}
	if n == 0 {
		return 0, 0, 0, errors.New("bench: ingest accepted no attestation while writing alone")
	}
	return float64(n) / el.Seconds(), cpuEach, cores, ctx.Err()
}

// writerPool is startWriters' running writers.
type writerPool struct {
	changes atomic.Int64
	stop    func() error
}

// buildFlow and buildTrails are where the organization's other pipelines report while asserts
// are measured (the mixed phase): a flow of many trails, none of them the asserted artifacts'.
const (
	buildFlow   = "builds"
	buildTrails = 1000
)

// prepareBuilds makes buildFlow and begins its buildTrails trails, with workers clients at once.
func prepareBuilds(ctx context.Context, pr *product, workers int) error {
	api := pr.base + "/api/v2"
	js, _ := json.Marshal(map[string]any{"name": buildFlow, "description": "other pipelines"})
	if err := call(ctx, pr.client, http.MethodPut, api+"/flows/"+benchOrg+"/template_file", pr.secret, 201,
		part{"data_json", "", js}, part{"template_file", "t.yml", []byte("version: 1\n")}); err != nil {
		return fmt.Errorf("bench: the build flow: %w", err)
	}
	var next atomic.Int64
	var g errgroup.Group
	for range workers {
		g.Go(func() error {
			for i := next.Add(1) - 1; i < buildTrails; i = next.Add(1) - 1 {
				body, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("build-%d", i)})
				if err := call(ctx, pr.client, http.MethodPut, api+"/trails/"+benchOrg+"/"+buildFlow, pr.secret, 201,
					part{"data_json", "", body}); err != nil {
					return fmt.Errorf("bench: begin a build trail: %w", err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// startWriters starts writers reporting passing junit attestations on one running artifact
// after another or, elsewhere, on the build trails (prepareBuilds) one after another: one every
// interval each, or, with interval 0, each back to back. The writers are other pipelines with a
// key of their own, through pr.writerBase: reads wait for the writes of their organization
// acknowledged before them that they depend on (read after write), whoever made them. stop ends
// them and answers the first error one of them met.
func startWriters(ctx context.Context, pr *product, fps []string, elsewhere bool, writers int, interval time.Duration) (*writerPool, error) {
	org, err := pr.r.Store.OrgByName(ctx, benchOrg)
	if err != nil {
		return nil, fmt.Errorf("bench: the organization: %w", err)
	}
	// What the organization held before: stop waits until the evaluator has applied and
	// evaluated every attestation the writers got accepted on top of it.
	_, before, err := pr.r.Store.ListAttestations(ctx, org.ID, store.Page{Page: 1, PerPage: 1})
	if err != nil {
		return nil, fmt.Errorf("bench: count attestations: %w", err)
	}
	writer := app.NewSecret()
	if err := app.CreateOrgKey(ctx, pr.r.Store, org, "pipeline-"+writer[len(writer)-8:], store.RoleMember, writer); err != nil {
		return nil, fmt.Errorf("bench: the writer's key: %w", err)
	}
	base := pr.writerBase
	if base == "" {
		base = pr.base
	}
	// The writers' own connections: sharing the readers' pool, they waited for one behind them.
	wclient := newClient(writers)
	wctx, cancel := context.WithCancel(ctx)
	p := &writerPool{}
	var accepted atomic.Int64 // every 201, the warm-up's too (changes is reset after it)
	var werrMu sync.Mutex
	var werr error
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var tick *time.Ticker
			if interval > 0 {
				tick = time.NewTicker(interval)
				defer tick.Stop()
			}
			for i := w; ; i += writers {
				if tick != nil {
					select {
					case <-wctx.Done():
						return
					case <-tick.C:
					}
				} else if wctx.Err() != nil {
					return
				}
				// The artifact's flow and trail as prepareAsserts reported it.
				flow, trail := []string{"web", "api"}[i%len(fps)%2], fmt.Sprintf("trail-%d", i%len(fps)%10)
				att := map[string]any{"attestation_name": "unit-tests", "artifact_fingerprint": fps[i%len(fps)],
					"user_data": map[string]any{}, "junit_results": []map[string]any{{"name": "s", "failures": 0, "errors": 0}}}
				if elsewhere {
					flow, trail = buildFlow, fmt.Sprintf("build-%d", i%buildTrails)
					delete(att, "artifact_fingerprint")
				}
				body, _ := json.Marshal(att)
				err := call(wctx, wclient, http.MethodPost, base+"/api/v2/attestations/"+benchOrg+"/"+flow+"/trail/"+trail+"/junit",
					writer, 201, part{"data_json", "", body})
				if err != nil {
					if wctx.Err() == nil {
						werrMu.Lock()
						werr = errors.Join(werr, err)
						werrMu.Unlock()
					}
					return
				}
				p.changes.Add(1)
				accepted.Add(1)
			}
		})
	}
	p.stop = func() error {
		cancel()
		wg.Wait()
		wclient.CloseIdleConnections()
		if werr != nil {
			return fmt.Errorf("bench: a writer of the changing phase: %w", werr)
		}
		// The next phase starts with the evaluator idle: the backlog of one phase (the
		// capacity phase's writers go back to back) is not the next one's load.
		idle := &progress{st: pr.r.Store, count: func(ctx context.Context) (int, error) {
			_, n, err := pr.r.Store.ListAttestations(ctx, org.ID, store.Page{Page: 1, PerPage: 1})
			return n, err
		}}
		return idle.waitIdle(ctx, before+int(accepted.Load()), 5*time.Minute)
	}
	return p, nil
}

// WriteTable prints the assert run.
func (r *AssertResult) WriteTable(w io.Writer) error {
	m, s := r.Machine, r.Settings
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %s %s/%s\n", m.NumCPU, m.GOMAXPROCS, m.GoVersion, m.OS, m.Arch)
	fmt.Fprintf(w, "mode:    %s\n", s.Mode)
	fmt.Fprintf(w, "gc:      %s\n", s.ProductGC)
	fmt.Fprintf(w, "load:    %d clients, %s per phase after %s of warm-up; asserts round-robin over %d artifacts running with %d policies\n\n",
		s.Concurrency, s.Duration, s.Warmup, s.Artifacts, s.Policies)
	const row = "%-34s %8s %8s %8s %8s %8s %8s %7s\n"
	fmt.Fprintf(w, row, "phase", "ok/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "ok", "errors")
	for _, p := range []struct {
		name string
		Phase
	}{{"bare Huma GET (baseline)", r.Bare}, {"assert, environment scope", r.Environment}, {"assert, flow scope", r.Flow},
		{"assert, policy scope (on the fly)", r.Policy},
		{fmt.Sprintf("assert, env., %.0f changes/s to them", r.ChurnPerSecond), r.Changing},
		{fmt.Sprintf("assert, env., %d writes/s to them", r.LoadTarget), r.Loaded},
		{fmt.Sprintf("assert, env., %.0f writes/s elsewhere", r.IngestCapacity/2), r.Mixed}} {
		fmt.Fprintf(w, row, p.name, fmt.Sprintf("%.0f", p.PerSecond), fmt.Sprintf("%.2f", p.P50ms), fmt.Sprintf("%.2f", p.P90ms),
			fmt.Sprintf("%.2f", p.P99ms), fmt.Sprintf("%.2f", p.MaxMs), fmt.Sprint(p.OK), fmt.Sprint(p.Errors))
		if p.FirstErr != "" {
			fmt.Fprintf(w, "  first error: %s\n", p.FirstErr)
		}
	}
	fmt.Fprintf(w, "ingest load of the last phase: %d writers, %.0f attestations/s accepted (%d/s sent at most)\n\n", r.LoadWriters,
		r.LoadRate, r.LoadTarget)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	verdict := map[bool]string{true: "met", false: "MISSED"}
	fmt.Fprintf(tw, "environment-scope assert / bare GET\t%.2f (target >= %.1f: %s)\n", r.Ratio, r.RatioTarget, verdict[r.RatioMet])
	fmt.Fprintf(tw, "environment-scope assert p99\t%.2f ms (target < %.0f ms: %s)\n", r.Environment.P99ms, AssertP99TargetMs, verdict[r.P99Met])
	fmt.Fprintf(tw, "ingest capacity, %d writers in other trails, no reader\t%.0f attestations/s at %.0f us of CPU each (product and load generator); the mixed phase sent half, %.0f/s accepted\n",
		r.MixedWriters, r.IngestCapacity, r.CapacityCPU, r.MixedRate)
	fmt.Fprintf(tw, "ingest at half its capacity, no reader\t%.0f attestations/s at %.0f us of CPU each, %.2f of %d cores busy\n",
		r.HalfRate, r.HalfCPU, r.HalfCores, r.Machine.GOMAXPROCS)
	fmt.Fprintf(tw, "waits for a core, alone / mixed phase\tp50 %.3f / %.3f ms, p90 %.2f / %.2f ms, p99 %.2f / %.2f ms\n",
		r.AloneSched.P50ms, r.MixedSched.P50ms, r.AloneSched.P90ms, r.MixedSched.P90ms, r.AloneSched.P99ms, r.MixedSched.P99ms)
	fmt.Fprintf(tw, "alone: assert / bare GET, p99 / bare p99\t%.2f, %.2f (target >= %.1f, <= %.1f: %s)\n", r.Ratio,
		r.Environment.P99ms/r.Bare.P99ms, AloneRatioTarget, AloneP99Factor, verdict[r.AloneMet])
	fmt.Fprintf(tw, "mixed: assert / bare GET, p99\t%.2f, %.2f ms (target >= %.1f, < %.0f ms: %s)\n", r.MixedRatio,
		r.Mixed.P99ms, MixedRatioTarget, MixedP99TargetMs, verdict[r.MixedMet])
	b := r.BareMixed
	fmt.Fprintf(tw, "the same on the baselines\tbare GET beside bare multipart at half its capacity (%.0f of %.0f/s, %.0f us of CPU each against %.0f, %.2f of %d cores busy): %.2fx the bare GET alone, p99 %.2f ms\n",
		b.HalfRate, b.WriteCapacity, b.HalfCPU, b.CapacityCPU, b.HalfCores, r.Machine.GOMAXPROCS, b.Ratio, b.Readers.P99ms)
	return tw.Flush()
}
