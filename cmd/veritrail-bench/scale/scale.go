package scale

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/veritrail/veritrail/cmd/veritrail-bench/procmem"
	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/gctune"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// Org is the organization the store is filled in.
const Org = "scale"

// Target is the issue's: every read at the largest size within 1.5x of its time at the smallest.
const Target = 1.5

// Config is what one scale run does.
type Config struct {
	// Sizes are the store sizes measured, in attestations, ascending (default 10k and 1M). Each
	// size is a store of its own, filled from empty, so that all of them can serve at once: the
	// reads are timed alternating between the sizes, request by request, and a machine that
	// slows down for a minute slows every size alike.
	Sizes []int
	// Environments is how many environments the store holds (default 1,000).
	Environments int
	// Requests is how many times each read is timed at each size, one at a time (default 300).
	Requests int
	// Postgres, when set, measures the distributed mode on a fresh schema of this database
	// instead of the embedded one on SQLite.
	Postgres string
	// KeepSchema leaves the PostgreSQL schema in place after the run (its name is printed), to
	// look at the filled store's query plans.
	KeepSchema bool
	// Dir is where the embedded mode's stores go, one data directory per size named by it
	// (default a new temporary one, removed after).
	Dir string
	// URL and Token, when set, make Run measure a running Veritrail (filled before, e.g. by
	// `veritrail-bench fill`) once, with this API key of the organization Org, instead of
	// filling and starting one: for a figure of a separate `serve` process (its /proc).
	URL, Token string
	// Trails is how many trails the running Veritrail's store holds (with URL).
	Trails   int
	Progress io.Writer
}

// Probe is one read's times at one size.
type Probe struct {
	Name  string  `json:"name"`
	Path  string  `json:"path"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	Bytes int     `json:"bytes"`
}

// Size is everything measured at one store size.
type Size struct {
	Attestations int     `json:"attestations"`
	Trails       int     `json:"trails"`
	FillSeconds  float64 `json:"fill_seconds"`
	// Probes are the reads timed alternating with the other sizes' (with one size, alone): the
	// ratios between sizes are taken from these.
	Probes []Probe `json:"probes"`
	// Alone are the same reads timed with only this size's product running, first, which also
	// warms its caches; the resident set below is read after them.
	Alone []Probe `json:"alone,omitempty"`
	// RSS and HWM are the process's resident set after the reads alone and its peak since the
	// product started (the fills' peak is cleared first), in MB; the load generator is in it.
	RSSMB float64 `json:"rss_mb"`
	HWMMB float64 `json:"hwm_mb"`
	// StoreMB is the SQLite files' size (embedded mode).
	StoreMB float64 `json:"store_mb,omitempty"`
}

// Result is one scale run.
type Result struct {
	Mode string `json:"mode"`
	// GC is how the garbage collector ran: as the veritrail command sets it (package gctune).
	GC    string `json:"gc"`
	Sizes []Size `json:"sizes"`
}

func (c *Config) defaults() error {
	if len(c.Sizes) == 0 {
		c.Sizes = []int{10_000, 1_000_000}
	}
	if !slices.IsSorted(c.Sizes) || c.Sizes[0] < chunkTrails*AttestationsPerTrail {
		return fmt.Errorf("scale: sizes must ascend from at least %d attestations", chunkTrails*AttestationsPerTrail)
	}
	if c.Environments <= 0 {
		c.Environments = 1000
	}
	if c.Requests <= 0 {
		c.Requests = 300
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return nil
}

// deployment is where the store lives and how to start the product on it.
type deployment interface {
	openStore(ctx context.Context) (*sqlstore.Store, error)
	start(ctx context.Context) (base string, stop func() error, err error)
	storeMB() float64
	// maintain does after a fill what the database's own upkeep would have done by then.
	maintain(ctx context.Context) error
	close() error
}

// Run fills a store of each size, times the reads at each size alone (and reads the resident
// set), then times them at all sizes at once, alternating.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.URL != "" {
		sz := Size{Trails: cfg.Trails, Attestations: cfg.Trails * AttestationsPerTrail}
		got, err := measure(ctx, cfg, []string{strings.TrimSuffix(cfg.URL, "/")}, cfg.Token, []int{cfg.Trails})
		if err != nil {
			return nil, err
		}
		sz.Probes = got[0]
		return &Result{Mode: "a running Veritrail at " + cfg.URL, Sizes: []Size{sz}}, nil
	}
	secret := app.NewSecret()
	res := &Result{Mode: "embedded (SQLite)"}
	if cfg.Postgres != "" {
		res.Mode = "distributed (PostgreSQL, kfake)"
	}
	// The product in this process runs as the veritrail command runs it, which the resident set
	// at each size depends on.
	gc, restoreGC := gctune.Apply(gctune.OS())
	defer restoreGC()
	res.GC = gc.String()
	root := cfg.Dir
	if cfg.Postgres == "" && root == "" {
		d, err := os.MkdirTemp("", "veritrail-scale-")
		if err != nil {
			return nil, fmt.Errorf("scale: data dir: %w", err)
		}
		root = d
		defer os.RemoveAll(d)
	}
	deps := make([]deployment, 0, len(cfg.Sizes))
	defer func() {
		for _, d := range deps {
			_ = d.close()
		}
	}()
	for _, size := range cfg.Sizes {
		d, err := newDeployment(ctx, cfg, root, size, secret)
		if err != nil {
			return nil, err
		}
		deps = append(deps, d)
		// Bootstrap the organization and its key as the product does.
		_, stop, err := d.start(ctx)
		if err != nil {
			return nil, err
		}
		if err := stop(); err != nil {
			return nil, fmt.Errorf("scale: stop after bootstrap: %w", err)
		}
		to := size / AttestationsPerTrail
		fmt.Fprintf(cfg.Progress, "scale: filling a store of %d attestations (%d trails)\n", size, to)
		began := time.Now()
		if err := fill(ctx, d, cfg, to); err != nil {
			return nil, err
		}
		sz := Size{Attestations: size, Trails: to, FillSeconds: time.Since(began).Seconds()}
		if err := d.maintain(ctx); err != nil {
			return nil, err
		}
		res.Sizes = append(res.Sizes, sz)
	}
	// Each size alone: its resident set, and its caches warmed.
	for i, d := range deps {
		sz := &res.Sizes[i]
		runtime.GC()
		debug.FreeOSMemory()
		procmem.ClearPeak()
		base, stop, err := d.start(ctx)
		if err != nil {
			return nil, err
		}
		var alone [][]Probe
		alone, err = measure(ctx, cfg, []string{base}, secret, []int{sz.Trails})
		u := procmem.Read()
		sz.RSSMB, sz.HWMMB = u.RSSMB, u.HWMMB
		if serr := stop(); err == nil && serr != nil {
			err = fmt.Errorf("scale: stop: %w", serr)
		}
		if err != nil {
			return nil, err
		}
		sz.Alone = alone[0]
		sz.StoreMB = d.storeMB()
		progressOf(cfg.Progress, sz.Attestations, "alone", sz.Alone)
	}
	if len(deps) == 1 {
		res.Sizes[0].Probes, res.Sizes[0].Alone = res.Sizes[0].Alone, nil
		return res, nil
	}
	// All sizes at once, the reads alternating between them.
	bases, trails := make([]string, len(deps)), make([]int, len(deps))
	var stops []func() error
	stopAll := func() error {
		var errs []error
		for _, stop := range stops {
			errs = append(errs, stop())
		}
		stops = nil
		return errors.Join(errs...)
	}
	defer stopAll()
	for i, d := range deps {
		base, stop, err := d.start(ctx)
		if err != nil {
			return nil, err
		}
		bases[i], trails[i], stops = base, res.Sizes[i].Trails, append(stops, stop)
	}
	together, err := measure(ctx, cfg, bases, secret, trails)
	if serr := stopAll(); err == nil && serr != nil {
		err = fmt.Errorf("scale: stop: %w", serr)
	}
	if err != nil {
		return nil, err
	}
	for i := range res.Sizes {
		res.Sizes[i].Probes = together[i]
		progressOf(cfg.Progress, res.Sizes[i].Attestations, "alternating", together[i])
	}
	return res, nil
}

// newDeployment makes size's store: a data directory under root, or a schema of its own (with
// a broker of its own, so that the sizes' consumer groups do not meet).
func newDeployment(ctx context.Context, cfg Config, root string, size int, secret string) (deployment, error) {
	if cfg.Postgres == "" {
		dir := filepath.Join(root, fmt.Sprint(size))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("scale: data dir: %w", err)
		}
		return &embedded{dir: dir, secret: secret}, nil
	}
	d, err := newDistributed(ctx, cfg.Postgres, secret)
	if err != nil {
		return nil, err
	}
	d.keep = cfg.KeepSchema
	if cfg.KeepSchema {
		fmt.Fprintf(cfg.Progress, "scale: the store of %d attestations is schema %s, kept after the run\n", size, d.schema)
	}
	return d, nil
}

// progressOf writes one size's read times, timed how, to the progress writer.
func progressOf(w io.Writer, size int, how string, ps []Probe) {
	for _, p := range ps {
		fmt.Fprintf(w, "scale: %d attestations, %s: %-34s p50 %7.2f ms  p99 %7.2f ms\n", size, how, p.Name, p.P50ms, p.P99ms)
	}
}

// fill fills d's empty store with trails trails and their attestations.
func fill(ctx context.Context, d deployment, cfg Config, trails int) error {
	st, err := d.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	org, err := st.OrgByName(ctx, Org)
	if err != nil {
		return fmt.Errorf("scale: the organization: %w", err)
	}
	return Fill(ctx, FillConfig{Store: st, OrgID: org.ID, ToTrail: trails, Environments: cfg.Environments,
		Progress: cfg.Progress})
}

// probes are the reads measured; trails is how many the store holds.
func probes(trails int) []Probe {
	perFlow := trails / Flows
	deep := max(1, perFlow/20/2) // the page halfway through a flow's trails, 20 a page
	// Trail 0 and its artifact are in every size's store, running in the big environment.
	return []Probe{
		{Name: "assert (environment scope)", Path: "/api/v2/asserts/" + Org + "/fingerprint/" + Fingerprint(999) + "?environment_name=" + EnvName(0)},
		{Name: "get trail", Path: "/api/v2/trails/" + Org + "/" + FlowName(0) + "/" + TrailName(0)},
		{Name: "list trails, first page", Path: "/api/v2/trails/" + Org + "?page=1&per_page=20"},
		{Name: "list trails of a flow, first page", Path: "/api/v2/trails/" + Org + "?flow=" + FlowName(0) + "&page=1&per_page=20"},
		{Name: "list trails of a flow, middle page", Path: fmt.Sprintf("/api/v2/trails/%s?flow=%s&page=%d&per_page=20", Org, FlowName(0), deep)},
		{Name: "environment events, first page", Path: "/api/v2/environments/" + Org + "/" + EnvName(1) + "/events"},
		{Name: "web: environment page (200 running)", Path: "/" + Org + "/environments/" + EnvName(0)},
		{Name: "web: trail page", Path: "/" + Org + "/flows/" + FlowName(0) + "/trails/" + TrailName(0)},
		{Name: "web: flow page", Path: "/" + Org + "/flows/" + FlowName(0)},
		{Name: "web: organization page", Path: "/" + Org},
	}
}

// measure times each probe Requests times at each of bases, one request at a time and
// alternating between the bases, after a few unmeasured; trails[b] is how many trails base b's
// store holds (a flow's middle page is its own). It answers each base's probes.
func measure(ctx context.Context, cfg Config, bases []string, secret string, trails []int) ([][]Probe, error) {
	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	out := make([][]Probe, len(bases))
	for b := range bases {
		out[b] = probes(trails[b])
	}
	lat := make([][]time.Duration, len(bases))
	for i := range out[0] {
		for b := range bases {
			lat[b] = lat[b][:0]
		}
		for k := range cfg.Requests + 10 {
			for b, base := range bases {
				p := &out[b][i]
				began := time.Now()
				n, err := get(ctx, client, base+p.Path, secret)
				if err != nil {
					return nil, fmt.Errorf("scale: %s: %w", p.Name, err)
				}
				if k >= 10 {
					lat[b] = append(lat[b], time.Since(began))
				}
				p.Bytes = n
			}
		}
		for b := range bases {
			slices.Sort(lat[b])
			q := &out[b][i]
			q.P50ms = ms(lat[b][len(lat[b])/2])
			q.P99ms = ms(lat[b][min(len(lat[b])-1, len(lat[b])*99/100)])
		}
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func get(ctx context.Context, client *http.Client, u, secret string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, strings.TrimSpace(string(b[:min(len(b), 300)])))
	}
	return len(b), nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// embedded is `serve`'s layout: the store is state.db in the data directory.
type embedded struct {
	dir, secret string
}

func (e *embedded) openStore(ctx context.Context) (*sqlstore.Store, error) {
	return sqlstore.OpenSQLite(ctx, filepath.Join(e.dir, "state.db"))
}

func (e *embedded) start(ctx context.Context) (string, func() error, error) {
	r, err := app.StartEmbedded(ctx, app.Config{Addr: "127.0.0.1:0", DataDir: e.dir, BootstrapOrg: Org,
		BootstrapToken: e.secret, Log: quiet()})
	if err != nil {
		return "", nil, fmt.Errorf("scale: start embedded: %w", err)
	}
	return "http://" + r.Addr, r.Close, nil
}

func (e *embedded) storeMB() float64 {
	var n int64
	for _, f := range []string{"state.db", "state.db-wal"} {
		if fi, err := os.Stat(filepath.Join(e.dir, f)); err == nil {
			n += fi.Size()
		}
	}
	return float64(n) / (1 << 20)
}

// maintain does nothing: SQLite has no background upkeep, and the product runs none.
func (e *embedded) maintain(context.Context) error { return nil }

// close leaves the data directory: Run removes a temporary root, and keeps Dir.
func (e *embedded) close() error { return nil }

// distributed is the ingest and evaluate tiers on a fresh schema and an in-process Kafka.
type distributed struct {
	admin       *sql.DB
	schema, dsn string
	keep        bool // KeepSchema
	secret      string
	cluster     *kfake.Cluster
}

func newDistributed(ctx context.Context, pg, secret string) (*distributed, error) {
	admin, err := sql.Open("pgx", pg)
	if err == nil {
		err = admin.PingContext(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("scale: PostgreSQL at --postgres: %w", err)
	}
	d := &distributed{admin: admin, schema: fmt.Sprintf("vt_scale_%d", time.Now().UnixNano()), secret: secret}
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+d.schema); err != nil {
		admin.Close()
		return nil, fmt.Errorf("scale: create schema: %w", err)
	}
	u, err := url.Parse(pg)
	if err != nil {
		_ = d.close()
		return nil, fmt.Errorf("scale: --postgres must be a URL: %w", err)
	}
	q := u.Query()
	q.Set("search_path", d.schema)
	u.RawQuery = q.Encode()
	d.dsn = u.String()
	if d.cluster, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(4)); err != nil {
		_ = d.close()
		return nil, fmt.Errorf("scale: kfake: %w", err)
	}
	return d, nil
}

func (d *distributed) openStore(ctx context.Context) (*sqlstore.Store, error) {
	return sqlstore.OpenPostgres(ctx, d.dsn)
}

func (d *distributed) start(ctx context.Context) (string, func() error, error) {
	cfg := app.Config{Addr: "127.0.0.1:0", Postgres: d.dsn, BootstrapOrg: Org, BootstrapToken: d.secret, Log: quiet(),
		Kafka: kafkabus.Config{Brokers: d.cluster.ListenAddrs(), Partitions: 4}}
	ev, err := app.StartEvaluate(ctx, cfg)
	if err != nil {
		return "", nil, fmt.Errorf("scale: start evaluate: %w", err)
	}
	in, err := app.StartIngest(ctx, cfg)
	if err != nil {
		return "", nil, errors.Join(fmt.Errorf("scale: start ingest: %w", err), ev.Close())
	}
	return "http://" + in.Addr, func() error { return errors.Join(in.Close(), ev.Close()) }, nil
}

func (d *distributed) storeMB() float64 {
	var n int64
	if err := d.admin.QueryRow(`SELECT COALESCE(SUM(pg_total_relation_size(quote_ident(schemaname)||'.'||quote_ident(tablename))), 0)
		FROM pg_tables WHERE schemaname = $1`, d.schema).Scan(&n); err != nil {
		return 0
	}
	return float64(n) / (1 << 20)
}

// maintain vacuums and analyzes the schema's tables, as autovacuum does on a server that runs
// it (the default): a store filled in minutes on a server without it keeps the planner's
// statistics of an empty one (a flow's first page took 18 ms instead of 0.25 ms at 300k).
func (d *distributed) maintain(ctx context.Context) error {
	rows, err := d.admin.QueryContext(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1`, d.schema)
	if err != nil {
		return fmt.Errorf("scale: list tables: %w", err)
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return fmt.Errorf("scale: list tables: %w", err)
		}
		tables = append(tables, t)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("scale: list tables: %w", err)
	}
	for _, t := range tables {
		if _, err := d.admin.ExecContext(ctx, "VACUUM (ANALYZE) "+d.schema+"."+t); err != nil {
			return fmt.Errorf("scale: vacuum %s: %w", t, err)
		}
	}
	return nil
}

func (d *distributed) close() error {
	if d.cluster != nil {
		d.cluster.Close()
	}
	if d.keep {
		return d.admin.Close()
	}
	_, err := d.admin.Exec("DROP SCHEMA " + d.schema + " CASCADE")
	return errors.Join(err, d.admin.Close())
}

// WriteTable prints the run: each read's p50 and p99 at each size, timed alternating, and the
// largest size's p50 over the smallest's, alternating and (the last column) each alone.
func (r *Result) WriteTable(w io.Writer) error {
	if len(r.Sizes) == 0 {
		return nil
	}
	fmt.Fprintf(w, "mode: %s\n", r.Mode)
	fmt.Fprintf(w, "gc: %s\n", r.GC)
	for _, s := range r.Sizes {
		fmt.Fprintf(w, "%d attestations over %d trails: filled in %.0f s; resident %.0f MB, peak %.0f MB; store %.0f MB\n",
			s.Attestations, s.Trails, s.FillSeconds, s.RSSMB, s.HWMMB, s.StoreMB)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	first, last := r.Sizes[0], r.Sizes[len(r.Sizes)-1]
	fmt.Fprint(tw, "read\t")
	for _, s := range r.Sizes {
		fmt.Fprintf(tw, "p50 ms @%d\tp99 ms @%d\t", s.Attestations, s.Attestations)
	}
	if len(r.Sizes) == 1 {
		fmt.Fprint(tw, "\n")
		for _, p := range first.Probes {
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t\n", p.Name, p.P50ms, p.P99ms)
		}
		return tw.Flush()
	}
	fmt.Fprint(tw, "p50 ratio\tverdict\talone\t\n")
	for i, p := range first.Probes {
		fmt.Fprintf(tw, "%s\t", p.Name)
		for _, s := range r.Sizes {
			fmt.Fprintf(tw, "%.2f\t%.2f\t", s.Probes[i].P50ms, s.Probes[i].P99ms)
		}
		ratio := last.Probes[i].P50ms / p.P50ms
		verdict := "met"
		if ratio > Target {
			verdict = "MISSED"
		}
		alone := "-"
		if len(first.Alone) == len(first.Probes) && len(last.Alone) == len(first.Probes) {
			alone = fmt.Sprintf("%.2fx", last.Alone[i].P50ms/first.Alone[i].P50ms)
		}
		fmt.Fprintf(tw, "%.2fx\t%s\t%s\t\n", ratio, verdict, alone)
	}
	return tw.Flush()
}
