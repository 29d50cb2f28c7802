package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veritrail/veritrail/cmd/veritrail-bench/procmem"
	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/notify/tier"
)

const (
	benchOrg  = "bench"
	benchFlow = "bench"
	// pollEvery is the most often the store is asked for progress, so that measuring the
	// evaluator does not slow it down.
	pollEvery = 100 * time.Millisecond
)

// benchTemplate expects the attestation the load sends, so every apply is followed by a real
// evaluation of the trail.
const benchTemplate = `version: 1
trail:
  attestations:
  - name: smoke
    type: generic
`

// Evaluator is how the evaluator kept pace with the measured ingest load.
type Evaluator struct {
	// Accepted is the number of attestations answered 201 in the measured window.
	Accepted int `json:"accepted"`
	// AppliedDuringLoad were in the store when the load stopped; ApplyPerSecond is their rate.
	AppliedDuringLoad int     `json:"applied_during_load"`
	ApplyPerSecond    float64 `json:"applied_per_second_during_load"`
	VsIngest          float64 `json:"apply_over_ingest"`
	// BacklogAtStop is accepted but not yet applied when the load stopped; MaxBacklog the
	// largest seen by any sample.
	BacklogAtStop int `json:"backlog_at_stop"`
	MaxBacklog    int `json:"max_backlog"`
	// Drained tells whether everything accepted was applied within the drain timeout;
	// DrainSeconds is how long after the load stopped that took (100 ms resolution), and
	// DrainPerSecond the apply rate meanwhile, with the evaluator alone on the machine (only
	// when the drain lasted a second or more).
	Drained        bool    `json:"drained"`
	DrainSeconds   float64 `json:"drain_seconds"`
	DrainPerSecond float64 `json:"drain_applied_per_second,omitempty"`
	// EvaluatedSeconds is when, after the load stopped, no trail was left dirty.
	EvaluatedSeconds float64 `json:"evaluated_seconds"`
	// OverallPerSecond is accepted over the load window plus the drain.
	OverallPerSecond float64 `json:"overall_applied_per_second"`
	KeptUp           bool    `json:"kept_up"`
	// Samples are the polls: seconds since the load started, accepted so far, applied so far.
	Samples []Sample `json:"samples,omitempty"`
}

// Sample is one poll of the store during the ingest phase.
type Sample struct {
	T        float64 `json:"t"`
	Accepted int     `json:"accepted"`
	Applied  int     `json:"applied"`
}

// product is the embedded Veritrail one bench phase measures.
type product struct {
	r      *app.Running
	dir    string
	logs   *logCounter
	secret string
	base   string
	// writerBase, when set, is where the assert phases' writers send their writes (a second
	// ingest process, in the distributed mode).
	writerBase string
	client     *http.Client
	// closeFn, when set, stops what startDistributed started (the tiers, Kafka, the schema).
	closeFn func() error
}

// startProduct starts Veritrail in this process on a temporary data directory, with a
// bootstrap organization and key, and a client with one connection per bench client.
func startProduct(ctx context.Context, cfg Config) (*product, error) {
	dir, err := os.MkdirTemp("", "veritrail-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: data dir: %w", err)
	}
	pr, err := startProductIn(ctx, cfg, dir, app.NewSecret())
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return pr, nil
}

// startProductIn is startProduct on a given data directory and key.
func startProductIn(ctx context.Context, cfg Config, dir, secret string) (*product, error) {
	pr := &product{dir: dir, logs: newLogCounter(), secret: secret}
	var err error
	pr.r, err = app.StartEmbedded(ctx, app.Config{Addr: "127.0.0.1:0", DataDir: dir, BootstrapOrg: benchOrg,
		BootstrapToken: pr.secret, Log: pr.logs.logger(),
		// The notify phase's webhook listens on loopback.
		Notify: app.NotifyConfig{Notifiers: tier.NotifiersConfig{AllowPrivate: true}}})
	if err != nil {
		return nil, fmt.Errorf("bench: start embedded: %w", err)
	}
	pr.base = "http://" + pr.r.Addr
	pr.client = newClient(cfg.Concurrency)
	return pr, nil
}

func (pr *product) close() {
	pr.client.CloseIdleConnections()
	if pr.closeFn != nil {
		_ = pr.closeFn() // a bench that ran has nothing left to report about its teardown
		return
	}
	pr.r.Close()
	os.RemoveAll(pr.dir)
}

// runIngest starts the embedded product on a temporary data directory, prepares a flow and
// its trails, warms up until the evaluator is idle again, then measures the load and the
// evaluator's drain.
func runIngest(ctx context.Context, cfg Config, body []byte, contentType string, res *Result) error {
	pr, err := startProduct(ctx, cfg)
	if err != nil {
		return err
	}
	defer pr.close()
	r, dir, logs, secret, base, client := pr.r, pr.dir, pr.logs, pr.secret, pr.base, pr.client
	fmt.Fprintf(cfg.Progress, "bench: phase 2: embedded Veritrail on %s (data in %s), %d trails\n", r.Addr, dir, cfg.Trails)
	if err := prepare(ctx, client, base, secret, cfg.Trails); err != nil {
		return err
	}
	org, err := r.Store.OrgByName(ctx, benchOrg)
	if err != nil {
		return fmt.Errorf("bench: look up organization: %w", err)
	}
	counter, err := openAttestationCount(dir, org.ID)
	if err != nil {
		return err
	}
	defer counter.Close()
	p := &progress{st: r.Store, count: counter.count}

	t := &target{client: client, url: trailURLs(base, benchOrg, benchFlow, cfg.Trails), token: secret,
		contentType: contentType, body: body, want: 201}
	var warm atomic.Int64
	hammer(ctx, t, cfg.Concurrency, cfg.Warmup, &warm)
	// Measure from an idle evaluator, so the warm-up's backlog is not counted as the load's.
	if err := p.waitIdle(ctx, int(warm.Load()), cfg.DrainTimeout); err != nil {
		return fmt.Errorf("bench: after the warm-up: %w", err)
	}
	if p.base, err = p.total(ctx); err != nil {
		return err
	}
	logs.reset() // count what the measured load causes, not the setup

	stopProfile, err := startProfileOf(cfg, ProfileCombined)
	if err != nil {
		return err
	}
	res.Ingest, err = measure(ctx, cfg, t, p, "phase 2")
	stopProfile()
	res.Evaluator = p.ev
	res.ProductLog = logs.counts()
	res.Resident = procmem.Read()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if res.Ingest.OK == 0 {
		return fmt.Errorf("bench: ingest accepted no attestation: %s", res.Ingest.FirstErr)
	}
	if err != nil && err != errNotDrained {
		return err
	}
	ev := p.ev
	fmt.Fprintf(cfg.Progress, "bench: phase 3: evaluator applied %.0f/s during the load, drained %v after %.1f s\n",
		ev.ApplyPerSecond, ev.Drained, ev.DrainSeconds)
	return nil
}

// startProfileOf is startProfile for phase of Run: a no-op unless cfg.ProfilePhase names it.
func startProfileOf(cfg Config, phase string) (stop func(), err error) {
	if cfg.ProfilePhase != phase {
		return func() {}, nil
	}
	return startProfile(cfg)
}

// startProfile starts the CPU profile and the execution trace that were asked for; stop ends
// them (a no-op without).
func startProfile(cfg Config) (stop func(), err error) {
	stops := []func(){}
	if cfg.CPUProfile != nil {
		if err := pprof.StartCPUProfile(cfg.CPUProfile); err != nil {
			return nil, fmt.Errorf("bench: cpu profile: %w", err)
		}
		stops = append(stops, pprof.StopCPUProfile)
	}
	if cfg.ExecTrace != nil {
		if err := trace.Start(cfg.ExecTrace); err != nil {
			for _, f := range stops {
				f()
			}
			return nil, fmt.Errorf("bench: execution trace: %w", err)
		}
		stops = append(stops, trace.Stop)
	}
	return func() {
		for _, f := range stops {
			f()
		}
	}, nil
}

// measure runs the measured load while following the evaluator's progress until it applied
// everything accepted. It leaves the evaluator's numbers in p.ev and returns errNotDrained
// when the drain timed out.
func measure(ctx context.Context, cfg Config, t *target, p *progress, label string) (Phase, error) {
	var accepted atomic.Int64
	start := time.Now()
	stopped := make(chan time.Time, 1)
	polled := make(chan error, 1)
	go func() { polled <- p.follow(ctx, start, &accepted, stopped, cfg.DrainTimeout) }()
	ph := hammer(ctx, t, cfg.Concurrency, cfg.Duration, &accepted)
	stopped <- time.Now()
	fmt.Fprintf(cfg.Progress, "bench: %s: %.0f/s accepted, p50 %.2f ms, p99 %.2f ms; waiting for the evaluator\n",
		label, ph.PerSecond, ph.P50ms, ph.P99ms)
	return ph, <-polled
}

// prepare creates the flow and the trails, then reads the last trail back: the read waits
// for the caller's own writes, so every trail exists before the load starts.
func prepare(ctx context.Context, client *http.Client, base, secret string, trails int) error {
	flow, _ := json.Marshal(map[string]any{"name": benchFlow, "description": "veritrail bench"})
	if err := call(ctx, client, http.MethodPut, base+"/api/v2/flows/"+benchOrg+"/template_file", secret, 201,
		part{"data_json", "", flow}, part{"template_file", "template.yml", []byte(benchTemplate)}); err != nil {
		return fmt.Errorf("bench: create flow: %w", err)
	}
	for i := range trails {
		tr, _ := json.Marshal(map[string]any{"name": trailName(i), "user_data": map[string]any{}})
		if err := call(ctx, client, http.MethodPut, base+"/api/v2/trails/"+benchOrg+"/"+benchFlow, secret, 201,
			part{"data_json", "", tr}); err != nil {
			return fmt.Errorf("bench: begin trail: %w", err)
		}
	}
	if err := call(ctx, client, http.MethodGet, base+"/api/v2/trails/"+benchOrg+"/"+benchFlow+"/"+trailName(trails-1), secret, 200); err != nil {
		return fmt.Errorf("bench: read trail back: %w", err)
	}
	return nil
}

type part struct {
	name, filename string
	data           []byte
}

// call sends a request as the Kosli CLI does: multipart when there are parts, JSON otherwise.
func call(ctx context.Context, client *http.Client, method, url, secret string, want int, parts ...part) error {
	var buf bytes.Buffer
	contentType := "application/json; charset=utf-8"
	if len(parts) > 0 {
		w := multipart.NewWriter(&buf)
		for _, p := range parts {
			h := textproto.MIMEHeader{}
			if p.filename == "" {
				h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q`, p.name))
			} else {
				h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, p.name, p.filename))
				h.Set("Content-Type", "application/octet-stream")
			}
			pw, err := w.CreatePart(h)
			if err != nil {
				return err
			}
			if _, err := pw.Write(p.data); err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
		contentType = w.FormDataContentType()
	}
	req, err := http.NewRequestWithContext(ctx, method, url, &buf)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
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

// progress follows the evaluator: how many messages of the load it applied (count: attestations,
// or snapshots, since each load sends nothing else) and the dirty trails left to evaluate.
type progress struct {
	st    store.Store
	base  int // applied before the measured load
	ev    Evaluator
	count func(context.Context) (int, error)
}

func (p *progress) total(ctx context.Context) (int, error) { return p.count(ctx) }

// waitIdle waits until want attestations are applied and no trail is dirty, polling every
// pollEvery (first after one period: callers have just polled).
func (p *progress) waitIdle(ctx context.Context, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
		n, err := p.total(ctx)
		if err != nil {
			return err
		}
		if n >= want {
			dirty, err := p.st.DirtyTrails(ctx)
			if err != nil {
				return fmt.Errorf("bench: dirty trails: %w", err)
			}
			if len(dirty) == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errNotDrained
		}
	}
}

// follow polls the store every pollEvery from the start of the load until everything accepted
// is applied and evaluated, filling p.ev. The load's end arrives on stopped; the first poll
// after it (at most pollEvery later) gives the applied count at the stop.
func (p *progress) follow(ctx context.Context, start time.Time, accepted *atomic.Int64, stopped <-chan time.Time,
	timeout time.Duration) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	ev := &p.ev
	var stopAt time.Time
	seenStop := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case at := <-stopped:
			stopAt = at
			continue // the next tick's poll gives the applied count at the stop
		case <-tick.C:
		}
		n, err := p.total(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		s := Sample{T: now.Sub(start).Seconds(), Accepted: int(accepted.Load()), Applied: n - p.base}
		ev.Samples = append(ev.Samples, s)
		ev.MaxBacklog = max(ev.MaxBacklog, s.Accepted-s.Applied)
		if stopAt.IsZero() {
			continue
		}
		if !seenStop {
			seenStop = true
			ev.Accepted = s.Accepted
			ev.AppliedDuringLoad = min(s.Applied, s.Accepted)
			ev.ApplyPerSecond = float64(ev.AppliedDuringLoad) / s.T
			ev.BacklogAtStop = s.Accepted - ev.AppliedDuringLoad
		}
		if s.Applied >= ev.Accepted {
			ev.Drained = true
			ev.DrainSeconds = now.Sub(stopAt).Seconds()
			// Below ten polls the rate would mostly be the polling resolution.
			if d := now.Sub(stopAt); d >= 10*pollEvery {
				ev.DrainPerSecond = float64(ev.BacklogAtStop) / d.Seconds()
			}
			ev.OverallPerSecond = float64(ev.Accepted) / now.Sub(start).Seconds()
			if err := p.waitIdle(ctx, p.base+ev.Accepted, timeout-now.Sub(stopAt)); err != nil {
				return err
			}
			ev.EvaluatedSeconds = time.Since(stopAt).Seconds()
			return nil
		}
		if now.Sub(stopAt) > timeout {
			ev.DrainSeconds = now.Sub(stopAt).Seconds()
			return errNotDrained
		}
	}
}

// LogCount is how often the product logged one message at warning level or above.
type LogCount struct {
	Level   string `json:"level"`
	Message string `json:"message"`
	Count   int    `json:"count"`
	// Example is the error of the first occurrence, if it had one.
	Example string `json:"example,omitempty"`
}

// logCounter keeps the product's warnings out of the bench's output while still reporting
// them: a slow evaluator or a failing check shows up here.
type logCounter struct {
	mu    sync.Mutex
	seen  map[string]*LogCount
	order []string
}

func newLogCounter() *logCounter { return &logCounter{seen: map[string]*LogCount{}} }

func (c *logCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen, c.order = map[string]*LogCount{}, nil
}

func (c *logCounter) counts() []LogCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]LogCount, 0, len(c.order))
	for _, k := range c.order {
		out = append(out, *c.seen[k])
	}
	return out
}

func (c *logCounter) logger() *slog.Logger { return slog.New(countingHandler{c}) }

type countingHandler struct{ c *logCounter }

func (h countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	key := r.Level.String() + "\x00" + r.Message
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	lc, ok := h.c.seen[key]
	if !ok {
		lc = &LogCount{Level: r.Level.String(), Message: r.Message}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" || a.Key == "error" {
				lc.Example = a.Value.String()
				return false
			}
			return true
		})
		h.c.seen[key] = lc
		h.c.order = append(h.c.order, key)
	}
	lc.Count++
	return nil
}

func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }
