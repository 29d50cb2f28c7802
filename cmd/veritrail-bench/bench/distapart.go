package bench

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/contract"
)

// DistributedApart is the distributed evaluator measured alone, as Apart measures the embedded
// one: ingest on kfake and PostgreSQL fills the evidence topic with no evaluator running, then
// evaluate processes (in this process, as separate tiers would run) apply the backlog. Each
// count of evaluators gets its own schema, broker and backlog.
type DistributedApart struct {
	Runs []DistributedRun `json:"runs"`
	// Together is the whole distributed pipeline at full rate, with 1 and 2 evaluate tiers.
	Together []DistributedTogether `json:"together"`
	// VsEmbedded is one evaluator's rate over the embedded evaluator alone (Apart) of this run.
	VsEmbedded float64 `json:"one_evaluator_over_embedded_evaluator"`
}

// DistributedRun is one backlog applied by Evaluators evaluate tiers.
type DistributedRun struct {
	Evaluators int `json:"evaluators"`
	// Ingest is the distributed ingest tier alone, filling the backlog.
	Ingest  Phase `json:"ingest_alone"`
	Backlog int   `json:"backlog"`
	// AppliedAtStart were applied by the time the first applied attestation was seen; Seconds is
	// from then until every attestation is applied and no trail is dirty; PerSecond is the rest
	// of the backlog over it.
	AppliedAtStart int     `json:"applied_at_start"`
	Seconds        float64 `json:"seconds"`
	PerSecond      float64 `json:"applied_per_second"`
	// CPU per applied attestation, in microseconds: this process (the evaluators, the idle
	// ingest tier and the broker) and every postgres process of the machine.
	CPUPerApplied   float64 `json:"process_cpu_us_per_attestation"`
	PGCPUPerApplied float64 `json:"postgres_cpu_us_per_attestation"`
	// Deadlocks is how many deadlock errors the product logged; DatabaseDeadlocks the database's
	// own count over the run (pg_stat_database, which includes other clients of that database).
	Deadlocks         int   `json:"deadlocks_logged"`
	DatabaseDeadlocks int64 `json:"database_deadlocks"`
}

// runDistributedApart measures the distributed evaluator alone with 1 and 2 evaluate tiers.
func runDistributedApart(ctx context.Context, cfg Config, body []byte, contentType string) (*DistributedApart, error) {
	out := &DistributedApart{}
	for _, n := range []int{1, 2} {
		fmt.Fprintf(cfg.Progress, "bench: phase 5: distributed evaluator alone, %d evaluate tier(s)\n", n)
		r, err := runDistributedBacklog(ctx, cfg, body, contentType, n)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Progress, "bench: phase 5: %d evaluator(s) applied %d in %.1f s (%.0f/s), %d deadlocks logged\n",
			n, r.Backlog, r.Seconds, r.PerSecond, r.Deadlocks)
		out.Runs = append(out.Runs, r)
	}
	for _, n := range []int{1, 2} {
		fmt.Fprintf(cfg.Progress, "bench: phase 6: distributed ingest at full rate with %d evaluate tier(s)\n", n)
		r, err := runDistributedTogether(ctx, cfg, body, contentType, n)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Progress, "bench: phase 6: %d evaluator(s): %.0f/s accepted, largest backlog %d, drained in %.1f s\n",
			n, r.Ingest.PerSecond, r.Evaluator.MaxBacklog, r.Evaluator.DrainSeconds)
		out.Together = append(out.Together, r)
	}
	return out, nil
}

// distEnv is one distributed run's world: a fresh schema of the PostgreSQL at --postgres, a
// kfake broker, and the configuration the tiers start with.
type distEnv struct {
	admin   *sql.DB
	schema  string
	acfg    app.Config
	secret  string
	logs    deadlockCounter
	cluster *kfake.Cluster
}

func newDistEnv(ctx context.Context, cfg Config) (*distEnv, error) {
	admin, err := sql.Open("pgx", cfg.Postgres)
	if err == nil {
		err = admin.PingContext(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: PostgreSQL at --postgres: %w", err)
	}
	e := &distEnv{admin: admin, schema: fmt.Sprintf("vt_bench_%d", time.Now().UnixNano())}
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+e.schema); err != nil {
		admin.Close()
		return nil, fmt.Errorf("bench: create schema: %w", err)
	}
	u, err := url.Parse(cfg.Postgres)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("bench: --postgres must be a URL: %w", err)
	}
	q := u.Query()
	q.Set("search_path", e.schema)
	u.RawQuery = q.Encode()
	if e.cluster, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(int(kafkabus.DefaultPartitions))); err != nil {
		e.close()
		return nil, fmt.Errorf("bench: kfake: %w", err)
	}
	e.logs = newDeadlockCounter(newLogCounter().logger().Handler())
	e.secret = app.NewSecret()
	e.acfg = app.Config{Addr: "127.0.0.1:0", Postgres: u.String(), BootstrapOrg: benchOrg, BootstrapToken: e.secret,
		Log: slog.New(e.logs), Kafka: kafkabus.Config{Brokers: e.cluster.ListenAddrs()}}
	return e, nil
}

func (e *distEnv) close() {
	if e.cluster != nil {
		e.cluster.Close()
	}
	_, _ = e.admin.Exec("DROP SCHEMA " + e.schema + " CASCADE")
	e.admin.Close()
}

// count is how many messages of the evidence topic the evaluators have handled: the sum of
// the positions they record (store.Progress), one small row a partition. A COUNT(*) of the
// attestations, polled every pollEvery, scanned the whole table each time: at 100,000 rows 15 ms
// of PostgreSQL's CPU a poll, which the bench then counted as the evaluators' (about 60 us an
// attestation, a seventh of PostgreSQL's share).
func (e *distEnv) count(ctx context.Context) (int, error) {
	var n int64
	err := e.admin.QueryRowContext(ctx, `SELECT COALESCE(SUM(next_offset), 0) FROM `+e.schema+`.bus_positions WHERE topic = $1`,
		contract.TopicEvidence).Scan(&n)
	return int(n), err
}

// published is how many messages the evidence topic holds: its partitions' end offsets.
func (e *distEnv) published(ctx context.Context) (int, error) {
	offsets, err := kafkabus.NewOffsets(e.acfg.Kafka)
	if err != nil {
		return 0, err
	}
	defer offsets.Close()
	ends, err := offsets.End(ctx, contract.TopicEvidence)
	if err != nil {
		return 0, fmt.Errorf("bench: end offsets: %w", err)
	}
	var n int64
	for _, end := range ends {
		n += end
	}
	return int(n), nil
}

// start starts the ingest tier, prepares the flow and trails through it (applied by an
// evaluator started for that and stopped again), and returns the ingest tier and the count of
// messages the preparation published: count minus it is the attestations handled since, every
// message after the preparation's being an attestation.
func (e *distEnv) start(ctx context.Context, cfg Config, client *http.Client, acfg app.Config) (*app.Running, int, error) {
	ev, err := app.StartEvaluate(ctx, acfg)
	if err != nil {
		return nil, 0, fmt.Errorf("bench: start evaluate: %w", err)
	}
	in, err := app.StartIngest(ctx, acfg)
	if err != nil {
		ev.Close()
		return nil, 0, fmt.Errorf("bench: start ingest: %w", err)
	}
	err = prepare(ctx, client, "http://"+in.Addr, e.secret, cfg.Trails) // the evaluator applies the flow and trails
	if cerr := ev.Close(); err == nil {
		err = cerr
	}
	var prepared int
	if err == nil {
		prepared, err = e.published(ctx)
	}
	if err != nil {
		in.Close()
		return nil, 0, err
	}
	return in, prepared, nil
}

func runDistributedBacklog(ctx context.Context, cfg Config, body []byte, contentType string, evaluators int) (DistributedRun, error) {
	run := DistributedRun{Evaluators: evaluators}
	env, err := newDistEnv(ctx, cfg)
	if err != nil {
		return run, err
	}
	defer env.close()
	client := newClient(cfg.Concurrency)
	defer client.CloseIdleConnections()
	// Ingest alone fills the backlog with no evaluator running: nothing may hold it back.
	acfg := env.acfg
	acfg.MaxBacklog = math.MaxInt64
	in, prepared, err := env.start(ctx, cfg, client, acfg)
	if err != nil {
		return run, err
	}
	defer in.Close()
	admin := env.admin

	t := &target{client: client, url: trailURLs("http://"+in.Addr, benchOrg, benchFlow, cfg.Trails), token: env.secret,
		contentType: contentType, body: body, want: 201}
	var accepted atomic.Int64
	hammer(ctx, t, cfg.Concurrency, cfg.Warmup, &accepted)
	run.Ingest = hammer(ctx, t, cfg.Concurrency, cfg.Duration, &accepted)
	if ctx.Err() != nil {
		return run, ctx.Err()
	}
	run.Backlog = int(accepted.Load())

	dl0, _ := databaseDeadlocks(ctx, admin)
	for range evaluators {
		e, err := app.StartEvaluate(ctx, acfg)
		if err != nil {
			return run, fmt.Errorf("bench: start evaluate: %w", err)
		}
		defer e.Close()
	}
	p := &progress{st: in.Store, count: func(ctx context.Context) (int, error) {
		n, err := env.count(ctx)
		// Below zero while some partition's position has not passed the preparation's messages.
		return max(n-prepared, 0), err
	}}
	// The clock starts at the first applied attestation: joining the consumer group takes a few
	// seconds whatever the backlog, and is not the evaluator's rate.
	for run.AppliedAtStart == 0 {
		if run.AppliedAtStart, err = p.total(ctx); err != nil {
			return run, err
		}
		if !sleepFor(ctx, 10*time.Millisecond) {
			return run, ctx.Err()
		}
	}
	cpu0, _ := processCPU()
	pg0 := postgresCPU()
	start := time.Now()
	if err := p.waitIdle(ctx, run.Backlog, cfg.DrainTimeout); err != nil {
		return run, fmt.Errorf("bench: distributed evaluator alone: %w", err)
	}
	run.Seconds = time.Since(start).Seconds()
	measured := run.Backlog - run.AppliedAtStart
	run.PerSecond = float64(measured) / run.Seconds
	if cpu1, ok := processCPU(); ok && measured > 0 {
		run.CPUPerApplied = float64((cpu1 - cpu0).Microseconds()) / float64(measured)
	}
	if pg1 := postgresCPU(); pg1 > 0 && measured > 0 {
		run.PGCPUPerApplied = float64((pg1 - pg0).Microseconds()) / float64(measured)
	}
	dl1, _ := databaseDeadlocks(ctx, admin)
	run.DatabaseDeadlocks = dl1 - dl0
	run.Deadlocks = int(env.logs.deadlocks.Load())
	return run, nil
}

// DistributedTogether is the distributed mode's whole pipeline: ingest at full rate with
// Evaluators evaluate tiers running, as in production; Evaluator tells whether they kept up
// (the backlog the store saw during the load, and the drain after it).
type DistributedTogether struct {
	Evaluators        int       `json:"evaluators"`
	Ingest            Phase     `json:"ingest"`
	Evaluator         Evaluator `json:"evaluator"`
	Deadlocks         int       `json:"deadlocks_logged"`
	DatabaseDeadlocks int64     `json:"database_deadlocks"`
	// PGCPUPerOK is the CPU every postgres process used over the load and its drain, in
	// microseconds per 201, and PGCores that time over the same span: beside Ingest's CPU (this
	// process: ingest, the evaluators, the broker and the load generator) it tells whether the
	// machine's cores were full.
	PGCPUPerOK float64 `json:"pg_cpu_us_per_ok,omitempty"`
	PGCores    float64 `json:"pg_cores,omitempty"`
	// CommitsPerOK is the transactions the database committed over the same span per 201, from
	// every client (ingest's reads and marks, the evaluators' batches and saves, the bench's
	// polls): what grows when the evaluators' batches shrink.
	CommitsPerOK float64 `json:"pg_commits_per_ok,omitempty"`
}

func runDistributedTogether(ctx context.Context, cfg Config, body []byte, contentType string, evaluators int) (DistributedTogether, error) {
	run := DistributedTogether{Evaluators: evaluators}
	env, err := newDistEnv(ctx, cfg)
	if err != nil {
		return run, err
	}
	defer env.close()
	client := newClient(cfg.Concurrency)
	defer client.CloseIdleConnections()
	in, prepared, err := env.start(ctx, cfg, client, env.acfg)
	if err != nil {
		return run, err
	}
	defer in.Close()
	for range evaluators {
		e, err := app.StartEvaluate(ctx, env.acfg)
		if err != nil {
			return run, fmt.Errorf("bench: start evaluate: %w", err)
		}
		defer e.Close()
	}
	p := &progress{st: in.Store, count: func(ctx context.Context) (int, error) {
		n, err := env.count(ctx)
		// Below zero while some partition's position has not passed the preparation's messages.
		return max(n-prepared, 0), err
	}}
	t := &target{client: client, url: trailURLs("http://"+in.Addr, benchOrg, benchFlow, cfg.Trails), token: env.secret,
		contentType: contentType, body: body, want: 201}
	var warm atomic.Int64
	hammer(ctx, t, cfg.Concurrency, cfg.Warmup, &warm)
	// Measure from idle evaluators, so the warm-up's backlog is not counted as the load's.
	if err := p.waitIdle(ctx, int(warm.Load()), cfg.DrainTimeout); err != nil {
		return run, fmt.Errorf("bench: after the warm-up: %w", err)
	}
	if p.base, err = p.total(ctx); err != nil {
		return run, err
	}
	dl0, _ := databaseDeadlocks(ctx, env.admin)
	env.logs.deadlocks.Store(0)
	pg0, start := postgresCPU(), time.Now()
	commits0, commitsErr := databaseCommits(ctx, env.admin)
	run.Ingest, err = measure(ctx, cfg, t, p, fmt.Sprintf("phase 6, %d evaluator(s)", evaluators))
	if pg1 := postgresCPU(); pg1 > 0 && run.Ingest.OK > 0 {
		run.PGCPUPerOK = float64((pg1 - pg0).Microseconds()) / float64(run.Ingest.OK)
		run.PGCores = (pg1 - pg0).Seconds() / time.Since(start).Seconds()
	}
	if commits1, err := databaseCommits(ctx, env.admin); err == nil && commitsErr == nil && run.Ingest.OK > 0 {
		run.CommitsPerOK = float64(commits1-commits0) / float64(run.Ingest.OK)
	}
	run.Evaluator = p.ev
	run.Evaluator.Samples = nil
	if err != nil && err != errNotDrained {
		return run, err
	}
	if run.Ingest.PerSecond > 0 {
		run.Evaluator.VsIngest = run.Evaluator.ApplyPerSecond / run.Ingest.PerSecond
	}
	run.Evaluator.KeptUp = run.Evaluator.Drained && run.Evaluator.DrainSeconds <= 1
	dl1, _ := databaseDeadlocks(ctx, env.admin)
	run.DatabaseDeadlocks = dl1 - dl0
	run.Deadlocks = int(env.logs.deadlocks.Load())
	return run, nil
}

// sleepFor waits d and reports true, or reports false when ctx ends first.
func sleepFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// databaseCommits is the database's count of committed transactions so far. The statistics
// behind it are flushed by each backend within a second or so, which a phase of seconds absorbs.
func databaseCommits(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}

// databaseDeadlocks is the database's count of deadlocks so far.
func databaseDeadlocks(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}

// postgresCPU is the CPU time (user and system) every process named postgres has used so far,
// read from /proc (0 where there is none).
func postgresCPU() time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "postgres" {
			continue
		}
		f := strings.Fields(s[end+1:]) // f[0] is the state; utime and stime are fields 14 and 15
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// deadlockCounter counts the log records that report a PostgreSQL deadlock and passes every
// record on.
type deadlockCounter struct {
	slog.Handler
	deadlocks *atomic.Int64
}

func newDeadlockCounter(h slog.Handler) deadlockCounter {
	return deadlockCounter{Handler: h, deadlocks: new(atomic.Int64)}
}

func (d deadlockCounter) Enabled(context.Context, slog.Level) bool { return true }

func (d deadlockCounter) Handle(ctx context.Context, r slog.Record) error {
	found := strings.Contains(r.Message, "deadlock")
	r.Attrs(func(a slog.Attr) bool {
		v := a.Value.String()
		found = found || strings.Contains(v, "40P01") || strings.Contains(v, "deadlock detected")
		return !found
	})
	if found {
		d.deadlocks.Add(1)
	}
	if !d.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return d.Handler.Handle(ctx, r)
}

func (d deadlockCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return deadlockCounter{Handler: d.Handler.WithAttrs(as), deadlocks: d.deadlocks}
}

func (d deadlockCounter) WithGroup(name string) slog.Handler {
	return deadlockCounter{Handler: d.Handler.WithGroup(name), deadlocks: d.deadlocks}
}
