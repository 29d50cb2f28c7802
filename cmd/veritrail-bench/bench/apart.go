package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/ingest"
	"github.com/veritrail/veritrail/ingest/blobs"
	"github.com/veritrail/veritrail/internal/bus/sqlitebus"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/metrics"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// Apart is each tier measured alone on the same data, as a deployment that gives the tiers
// machines of their own sees them: on one 2-core machine the combined phase makes ingest and
// the evaluator share the cores with each other and with the load generator.
type Apart struct {
	// Ingest is the ingest tier answering 201 with no evaluator running; its messages wait on
	// the embedded bus.
	Ingest Phase   `json:"ingest_alone"`
	Ratio  float64 `json:"ingest_alone_over_bare"`
	// PublishesPerCommit is how many Publish calls of ingest alone shared a write of the
	// embedded bus, on average (warm-up included).
	PublishesPerCommit float64 `json:"ingest_alone_publishes_per_commit"`
	// Backlog is what the evaluator then applied alone (every message of the warm-up and the
	// load). AppliedAtStart of them were applied while the product started; the rest took
	// EvaluatorSeconds from then. EvaluatorPerSecond is that rate and VsIngest that rate over
	// the ingest rate alone.
	Backlog            int     `json:"backlog"`
	AppliedAtStart     int     `json:"applied_at_start"`
	EvaluatorSeconds   float64 `json:"evaluator_seconds"`
	EvaluatorPerSecond float64 `json:"evaluator_alone_per_second"`
	VsIngest           float64 `json:"evaluator_alone_over_ingest_alone"`
	// EvaluatorCPUPerApplied is the CPU time this process (the whole product, idle ingest
	// included, and the load generator at rest) used per attestation the evaluator applied in
	// those EvaluatorSeconds, in microseconds: the SQLite path's cost, measured as the
	// distributed phase measures the PostgreSQL path's (DistributedRun.CPUPerApplied).
	EvaluatorCPUPerApplied float64 `json:"evaluator_alone_cpu_us_per_attestation"`
}

// runApart prepares a flow and its trails with the whole product, stops it, runs the ingest
// tier alone on that data directory under the load, then starts the whole product again and
// times its evaluator through the backlog.
func runApart(ctx context.Context, cfg Config, body []byte, contentType string) (*Apart, error) {
	secret := "apart-" + benchOrg
	dir, err := preparedDir(ctx, cfg, "apart", secret)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(cfg.Progress, "bench: phase 4: tiers apart (data in %s): ingest alone, then the evaluator alone\n", dir)

	addr, stats, stop, err := startIngestAlone(ctx, dir, observability{metrics: true})
	if err != nil {
		return nil, err
	}
	client := newClient(cfg.Concurrency)
	t := &target{client: client, url: trailURLs("http://"+addr, benchOrg, benchFlow, cfg.Trails), token: secret,
		contentType: contentType, body: body, want: 201}
	var accepted atomic.Int64 // every attestation the evaluator will have to apply
	hammer(ctx, t, cfg.Concurrency, cfg.Warmup, &accepted)
	stopProfile, err := startProfileOf(cfg, ProfileIngestAlone)
	if err != nil {
		stop()
		return nil, err
	}
	a := &Apart{Ingest: hammer(ctx, t, cfg.Concurrency, cfg.Duration, &accepted)}
	stopProfile()
	if s := stats(); s.Commits > 0 {
		a.PublishesPerCommit = float64(s.Calls) / float64(s.Commits)
	}
	client.CloseIdleConnections()
	if err := stop(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	fmt.Fprintf(cfg.Progress, "bench: phase 4: ingest alone %.0f/s; starting the evaluator on the backlog\n", a.Ingest.PerSecond)

	pr, err := startProductIn(ctx, cfg, dir, secret)
	if err != nil {
		return nil, err
	}
	defer pr.r.Close()
	org, err := pr.r.Store.OrgByName(ctx, benchOrg)
	if err != nil {
		return nil, fmt.Errorf("bench: look up organization: %w", err)
	}
	counter, err := openAttestationCount(dir, org.ID)
	if err != nil {
		return nil, err
	}
	defer counter.Close()
	p := &progress{st: pr.r.Store, count: counter.count}
	// The clock (and the evaluator-alone profile) starts once the product is up, and what the
	// evaluator applied while it started is left out of the count as well as the time.
	early, err := p.total(ctx)
	if err != nil {
		return nil, err
	}
	stopProfile, err = startProfileOf(cfg, ProfileEvaluatorAlone)
	if err != nil {
		return nil, err
	}
	defer stopProfile()
	cpu0, _ := processCPU()
	start := time.Now()
	a.Backlog = int(accepted.Load())
	if err := p.waitIdle(ctx, a.Backlog, cfg.DrainTimeout); err != nil {
		return nil, fmt.Errorf("bench: evaluator alone: %w", err)
	}
	a.EvaluatorSeconds = time.Since(start).Seconds()
	a.AppliedAtStart = early
	a.EvaluatorPerSecond = float64(a.Backlog-early) / a.EvaluatorSeconds
	if cpu1, ok := processCPU(); ok && a.Backlog > early {
		a.EvaluatorCPUPerApplied = float64((cpu1 - cpu0).Microseconds()) / float64(a.Backlog-early)
	}
	if a.Ingest.PerSecond > 0 {
		a.VsIngest = a.EvaluatorPerSecond / a.Ingest.PerSecond
	}
	fmt.Fprintf(cfg.Progress, "bench: phase 4: evaluator alone applied %d while starting, then %d in %.1f s (%.0f/s, %.0f us of CPU each)\n",
		early, a.Backlog-early, a.EvaluatorSeconds, a.EvaluatorPerSecond, a.EvaluatorCPUPerApplied)
	return a, nil
}

// preparedDir is a new data directory in which the whole product, started and stopped again,
// created the bench's organization (its admin key's secret is secret), flow and cfg.Trails
// trails. The caller removes it.
func preparedDir(ctx context.Context, cfg Config, name, secret string) (string, error) {
	dir, err := os.MkdirTemp("", "veritrail-bench-"+name+"-")
	if err != nil {
		return "", fmt.Errorf("bench: data dir: %w", err)
	}
	pr, err := startProductIn(ctx, cfg, dir, secret)
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	err = prepare(ctx, pr.client, pr.base, secret, cfg.Trails)
	pr.client.CloseIdleConnections()
	pr.r.Close()
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// startIngestAlone serves the ingest tier on the embedded bus and store of dir, with no
// evaluator: the same composition as the embedded mode minus the evaluate tier, observed as o
// says (the product runs with metrics on and tracing off unless the OTEL_* variables ask).
func startIngestAlone(ctx context.Context, dir string, o observability) (addr string, stats func() sqlitebus.PublishStats, stop func() error, err error) {
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		return "", nil, nil, err
	}
	busDB, err := sqlitebus.Open(filepath.Join(dir, "bus.db"))
	if err != nil {
		st.Close()
		return "", nil, nil, err
	}
	closeAll := func() error { return errors.Join(busDB.Close(), st.Close()) }
	busCfg := app.EmbeddedBusConfig()
	busCfg.CompactInterval = -1
	bus, err := sqlitebus.New(busDB, busCfg, watermill.NopLogger{})
	if err != nil {
		closeAll()
		return "", nil, nil, err
	}
	busPub, err := bus.Publisher()
	if err != nil {
		closeAll()
		return "", nil, nil, err
	}
	// With metrics, as the product runs: the publish counted and timed, every request observed.
	var reg prometheus.Registerer // a nil interface, not a nil registry: ingest then registers nothing
	var pub message.Publisher = busPub
	if o.metrics {
		r := metrics.NewRegistry()
		reg, pub = r, metrics.NewPublishing(r).Publisher(busPub, contract.TopicEvidence)
	}
	bl, err := blobs.NewDir(filepath.Join(dir, "blobs"))
	if err != nil {
		closeAll()
		return "", nil, nil, err
	}
	api := ingest.New(ingest.Config{}, ingest.Deps{Store: st, Sessions: st, Publisher: pub, Blobs: bl, Log: slog.New(slog.DiscardHandler), Metrics: reg,
		Tracing: o.tracing})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeAll()
		return "", nil, nil, err
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return ln.Addr().String(), bus.PublishStats, func() error {
		return errors.Join(srv.Shutdown(ctx), bus.Close(), closeAll())
	}, nil
}
