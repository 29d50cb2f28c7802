// Package bench is the load generator behind `veritrail-bench bench`. In one run on one machine it
// measures a baseline (a bare Huma server parsing the same multipart attestation), the rate at
// which the embedded Veritrail answers 201 to attestations, and how fast its evaluator applies
// them. RunSnapshots does the same for Kubernetes environment snapshot reports (a bare Huma
// JSON PUT of the same report as the baseline), and RunNotify measures how long a snapshot
// change takes from its 201 to a webhook, beside the report's own time. Shared machines are noisy, so the product is
// only ever judged against the baseline taken in the same run.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/veritrail/veritrail/cmd/veritrail-bench/procmem"
)

// RatioTarget is the brief's target: ingest accepts attestations at >= 0.5x the bare Huma
// multipart rate.
const RatioTarget = 0.5

// DistributedTarget is the brief's target for the distributed evaluator on PostgreSQL: >= 0.5x
// the embedded evaluator's rate, each alone on a backlog.
const DistributedTarget = 0.5

// ResidentTargetMB is issue 21's bound on serve's resident set under the bench's load.
const ResidentTargetMB = 300

// keptUpShare is how much of the ingest rate the evaluator must apply during the load to
// count as keeping up: below it the backlog grows by more than a tenth of what is accepted.
const keptUpShare = 0.9

// Config is what one run does.
type Config struct {
	// Duration is the measured window of each phase (default 10s).
	Duration time.Duration
	// Warmup precedes each phase and is not measured (default Duration/5, within 100ms..1s).
	Warmup time.Duration
	// Concurrency is the number of clients, each with its own keep-alive connection (default 16).
	Concurrency int
	// Trails is how many trails the attestations are spread over (default 1000: a 10 s run then
	// puts tens of attestations in each, as real pipelines do, rather than thousands).
	Trails int
	// PayloadBytes is the size of the whole multipart body (default 1024).
	PayloadBytes int
	// DrainTimeout bounds the wait for the evaluator after the load stops (default 5m).
	DrainTimeout time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Apart adds a phase that measures each tier alone (see Apart).
	Apart bool
	// CPUProfile, when set, receives a CPU profile of the measured ingest phase and its drain,
	// or of the phase ProfilePhase names.
	CPUProfile io.Writer
	// ExecTrace, when set, receives an execution trace (runtime/trace) of the same phase as
	// CPUProfile: where the goroutines of a slow request waited.
	ExecTrace io.Writer
	// ProfilePhase picks the phase CPUProfile covers in Run: ProfileCombined (default),
	// ProfileIngestAlone or ProfileEvaluatorAlone (the last two need Apart).
	ProfilePhase string

	// SnapshotArtifacts is the number of items (pods) of each snapshot report of RunSnapshots
	// (default 200).
	SnapshotArtifacts int
	// SnapshotRepeat makes every report of RunSnapshots repeat the environment's last running
	// set instead of alternating between two sets.
	SnapshotRepeat bool

	// NotifyReports is the number of measured reports of RunNotify (default 200).
	NotifyReports int

	// Rounds is how many times RunObserve measures each setting (default 3).
	Rounds int

	// Postgres, when set, makes RunAssert measure the distributed mode (ingest and evaluate on an
	// in-process Kafka and a fresh schema of this PostgreSQL) instead of the embedded one, and,
	// with Apart, Run measure the distributed evaluator alone too.
	Postgres string
	// AssertLoadRate is the ingest load, in attestations a second, of RunAssert's phase under
	// load (default 500).
	AssertLoadRate int
}

// The phases of Run that Config.ProfilePhase can name.
const (
	ProfileCombined       = "combined"
	ProfileIngestAlone    = "ingest-alone"
	ProfileEvaluatorAlone = "evaluator-alone"
	// ProfileAssertMixed is RunAssert's mixed phase (RunAssert profiles its environment-scope
	// phase otherwise).
	ProfileAssertMixed = "assert-mixed"
	// ProfileWritesFull and ProfileWritesHalf are RunAssert's phases of writers alone, back to
	// back and at half that rate: what the pipeline costs an attestation at each.
	ProfileWritesFull = "writes-full"
	ProfileWritesHalf = "writes-half"
)

func (c *Config) defaults() error {
	switch c.ProfilePhase {
	case "":
		c.ProfilePhase = ProfileCombined
	case ProfileCombined, ProfileAssertMixed, ProfileWritesFull, ProfileWritesHalf:
	case ProfileIngestAlone, ProfileEvaluatorAlone:
		if !c.Apart {
			return fmt.Errorf("bench: profile phase %q needs the tiers apart (--apart)", c.ProfilePhase)
		}
	default:
		return fmt.Errorf("bench: unknown profile phase %q (want %s, %s, %s, %s, %s or %s)", c.ProfilePhase, ProfileCombined, ProfileIngestAlone,
			ProfileEvaluatorAlone, ProfileAssertMixed, ProfileWritesFull, ProfileWritesHalf)
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Warmup <= 0 {
		c.Warmup = min(max(c.Duration/5, 100*time.Millisecond), time.Second)
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.Trails <= 0 {
		c.Trails = 1000
	}
	if c.PayloadBytes <= 0 {
		c.PayloadBytes = 1024
	}
	if c.SnapshotArtifacts <= 0 {
		c.SnapshotArtifacts = 200
	}
	if c.NotifyReports <= 0 {
		c.NotifyReports = 200
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 5 * time.Minute
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.PayloadBytes > maxPartBytes {
		return fmt.Errorf("bench: payload of %d bytes is over the product's data_json limit of %d", c.PayloadBytes, maxPartBytes)
	}
	return nil
}

// Machine describes where the run happened.
type Machine struct {
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
}

// Settings are the effective settings of a run.
type Settings struct {
	Duration    string `json:"duration"`
	Warmup      string `json:"warmup"`
	Concurrency int    `json:"concurrency"`
	Trails      int    `json:"trails"`
	BodyBytes   int    `json:"body_bytes"`
	// ProductGC is how the garbage collector ran in the product's phases (productGC).
	ProductGC string `json:"product_gc"`
}

// Result is everything one run measured.
type Result struct {
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`
	// Bare is the baseline: bare Huma multipart.
	Bare Phase `json:"bare_multipart"`
	// Ingest is the embedded product answering 201 to generic attestations.
	Ingest      Phase     `json:"ingest"`
	Ratio       float64   `json:"ingest_over_bare"`
	RatioTarget float64   `json:"ingest_over_bare_target"`
	RatioMet    bool      `json:"ingest_over_bare_met"`
	Evaluator   Evaluator `json:"evaluator"`
	// Apart is each tier alone (nil when Config.Apart is false).
	Apart *Apart `json:"apart,omitempty"`
	// Distributed is the distributed evaluator alone (with Config.Apart and Config.Postgres).
	Distributed *DistributedApart `json:"distributed,omitempty"`
	// ProductLog counts the warnings and errors the product logged during the ingest phase.
	ProductLog []LogCount `json:"product_log,omitempty"`
	// Resident is the process's resident set at the end of the ingest phase (the embedded
	// product, its evaluator and the load generator together) and its peak during it.
	Resident procmem.Usage `json:"resident"`
}

// Run measures the baseline, then the product.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	body, contentType, err := attestationBody(cfg.PayloadBytes)
	if err != nil {
		return nil, fmt.Errorf("bench: build body: %w", err)
	}
	res := &Result{
		Machine: Machine{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
			OS: runtime.GOOS, Arch: runtime.GOARCH},
		Settings: Settings{Duration: cfg.Duration.String(), Warmup: cfg.Warmup.String(), Concurrency: cfg.Concurrency,
			Trails: cfg.Trails, BodyBytes: len(body)},
		RatioTarget: RatioTarget,
	}
	fmt.Fprintf(cfg.Progress, "bench: %d-byte attestation bodies, %d clients, %v per phase after %v of warm-up\n",
		len(body), cfg.Concurrency, cfg.Duration, cfg.Warmup)

	if res.Bare, err = runBare(ctx, cfg, body, contentType); err != nil {
		return nil, err
	}
	var restoreGC func()
	res.Settings.ProductGC, restoreGC = productGC()
	defer restoreGC()
	// Start the product from a clean heap so the baseline's garbage is not collected on its time.
	runtime.GC()
	debug.FreeOSMemory()
	procmem.ClearPeak()
	if err := runIngest(ctx, cfg, body, contentType, res); err != nil {
		return nil, err
	}
	if res.Bare.PerSecond > 0 {
		res.Ratio = res.Ingest.PerSecond / res.Bare.PerSecond
	}
	res.RatioMet = res.Ratio >= RatioTarget
	ev := &res.Evaluator
	if res.Ingest.PerSecond > 0 {
		ev.VsIngest = ev.ApplyPerSecond / res.Ingest.PerSecond
	}
	ev.KeptUp = ev.Drained && ev.VsIngest >= keptUpShare
	if cfg.Apart {
		runtime.GC()
		if res.Apart, err = runApart(ctx, cfg, body, contentType); err != nil {
			return nil, err
		}
		if res.Bare.PerSecond > 0 {
			res.Apart.Ratio = res.Apart.Ingest.PerSecond / res.Bare.PerSecond
		}
		if cfg.Postgres != "" {
			runtime.GC()
			if res.Distributed, err = runDistributedApart(ctx, cfg, body, contentType); err != nil {
				return nil, err
			}
			if res.Apart.EvaluatorPerSecond > 0 {
				res.Distributed.VsEmbedded = res.Distributed.Runs[0].PerSecond / res.Apart.EvaluatorPerSecond
			}
		}
	}
	return res, nil
}

func runBare(ctx context.Context, cfg Config, body []byte, contentType string) (Phase, error) {
	addr, stop, err := startBare()
	if err != nil {
		return Phase{}, err
	}
	defer stop()
	client := newClient(cfg.Concurrency)
	defer client.CloseIdleConnections()
	t := &target{client: client, url: trailURLs("http://"+addr, "bench", "bench", cfg.Trails),
		contentType: contentType, body: body, want: 201}
	fmt.Fprintf(cfg.Progress, "bench: phase 1: bare Huma multipart on %s\n", addr)
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

// trailURLs spreads requests round-robin over the trails' attest URLs, built once so both
// phases spend the same on them.
func trailURLs(base, org, flow string, trails int) func(int) string {
	urls := make([]string, trails)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/api/v2/attestations/%s/%s/trail/%s/generic", base, org, flow, trailName(i))
	}
	return func(i int) string { return urls[i%len(urls)] }
}

func trailName(i int) string { return fmt.Sprintf("trail-%03d", i) }

// errNotDrained is returned by waits that ran out of time.
var errNotDrained = errors.New("bench: the evaluator did not catch up in time")
