// Package faults is the fault harness: it runs Veritrail as real, separate OS processes
// (distributed: a Kafka-protocol broker, one ingest and two evaluate processes on a fresh schema
// of a PostgreSQL database; embedded: one serve process), drives a load of concurrent writers
// through the HTTP API as the Kosli CLI does, and meanwhile kills processes with SIGKILL and
// restarts them, and ends the processes' PostgreSQL connections. Then it waits for the
// evaluators to drain and checks, from the store directly and through the API, that every
// attestation answered 201 is stored exactly once, one that failed ambiguously at most once,
// and that every trail's compliance is what its attestations imply. Beside the load it reports
// environment snapshots and flips the compliance of the trails of the artifacts they run, and
// after the drain checks that a final snapshot of each environment shows every artifact with
// its trail's compliance (snapshots.go). The Report also gives
// throughput, the evaluators' backlog over time, deadlocks, read-your-writes timeouts and any
// process that exited on its own.
//
// Processes are started through a Launcher that re-executes a binary in a child role: a test
// binary's TestMain, or a command's main, calls RunChild when IsChild reports true. The go test
// of this package runs a short schedule; cmd/veritrail-bench's `faults` subcommand runs long ones.
package faults

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/ingest/consistency"
	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/contract"
)

// Mode is how Veritrail runs under the harness.
type Mode string

// The modes.
const (
	Distributed Mode = "distributed" // broker, ingest, evaluators on PostgreSQL
	Embedded    Mode = "embedded"    // one serve process on a data directory
)

// Config is one run. Zero fields take the defaults given.
type Config struct {
	Mode   Mode
	Launch Launcher // required
	// Postgres is a postgres:// URL of a database the run creates a schema in and drops
	// afterwards (distributed mode).
	Postgres string
	// Dir holds the processes' logs and data directories; it must exist.
	Dir string
	// Writers are the concurrent clients (default 32).
	Writers int
	// Rate bounds the requests a second of all writers together; 0 sends as fast as answered.
	Rate float64
	// Keys is how many API keys the writers use, writer i key i%Keys (default: one each, as
	// pipelines have; 1 makes every writer's read-your-writes wait for everyone's writes).
	Keys int
	// Ahead is how many trails a writer begins before it attests the first of them (default
	// 4; negative: none, each trail attested right after its begin, as one pipeline does). An
	// attestation whose trail is not applied yet waits for the key's writes, so with none
	// ahead the writers go only as fast as the evaluators apply; ahead, they go as fast as
	// ingest accepts while the evaluators keep up, and the backlog shows when they do not.
	Ahead int
	// The fault schedule runs Rounds rounds (default 1) and more until Duration has passed
	// since the load began. A round is every fault once: in the distributed mode kill -9 of an
	// evaluator (the next one each round), of the broker and of ingest, and the end of the
	// processes' PostgreSQL connections; in the embedded mode kill -9 of serve.
	Duration time.Duration
	Rounds   int
	// A fault comes at a random moment: after Step/2 to 3*Step/2 more 201s (default 200) and,
	// with FaultEvery, a random 0.5 to 1.5 times FaultEvery. After a fault the writes must get
	// Step 201s, and the store must apply something, within StepTimeout (default 30 s).
	Step        int
	FaultEvery  time.Duration
	StepTimeout time.Duration
	// DrainTimeout bounds the wait for the evaluators after the load (default 60 s).
	DrainTimeout time.Duration
	// Evaluators (default 2) and Partitions of the Kafka topics (default 4), distributed mode.
	Evaluators int
	Partitions int32
	// Seed makes the writers' plans and the schedule's moments repeatable; 0 picks one.
	Seed uint64
	// SampleEvery is how often the backlog is sampled (default 1 s).
	SampleEvery time.Duration
	// Progress gets a line per fault; nil discards them.
	Progress io.Writer
}

func (c Config) withDefaults() (Config, error) {
	if c.Mode != Distributed && c.Mode != Embedded {
		return c, fmt.Errorf("faults: mode must be %q or %q, got %q", Distributed, Embedded, c.Mode)
	}
	if c.Launch == nil {
		return c, errors.New("faults: no launcher")
	}
	if c.Mode == Distributed && c.Postgres == "" {
		return c, errors.New("faults: the distributed mode needs a PostgreSQL URL")
	}
	if st, err := os.Stat(c.Dir); err != nil || !st.IsDir() {
		return c, fmt.Errorf("faults: work directory %q: %v", c.Dir, err)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Writers, 32)
	def(&c.Rounds, 1)
	def(&c.Step, 200)
	def(&c.Evaluators, 2)
	def(&c.Keys, c.Writers)
	switch {
	case c.Ahead == 0:
		c.Ahead = 4
	case c.Ahead < 0:
		c.Ahead = 0
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	dur(&c.StepTimeout, 30*time.Second)
	dur(&c.DrainTimeout, time.Minute)
	dur(&c.SampleEvery, time.Second)
	if c.Partitions <= 0 {
		c.Partitions = 4
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c, nil
}

// startTimeout bounds a process's start (PostgreSQL migrations, joining the broker).
const startTimeout = time.Minute

// The patterns counted in the processes' logs.
const (
	deadlockPattern = "deadlock detected"
	rywPattern      = consistency.TimedOut
)

// harness is one run.
type harness struct {
	cfg   Config
	rng   *rand.Rand
	sup   *supervisor
	pg    *pgRun  // distributed
	db    *sql.DB // the store, read directly
	c     *client
	led   *ledger
	snaps *snapLoad // the environment snapshots exercised beside the load
	start time.Time // of the load; the times in the report count from the run's start (sup.start)

	front      *proc // ingest or serve: what the writers talk to
	broker     *proc
	brokers    []string // the broker's address (distributed)
	evaluators []*proc

	mu       sync.Mutex
	samples  []Sample
	problems []string
	faults   []Fault
}

// Run runs the harness once. An error means the run could not be made (PostgreSQL
// unreachable, a process that never started); what the run found is in the Report.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	h := &harness{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0xfa17)), led: newLedger()}
	h.sup = &supervisor{launch: cfg.Launch, logDir: filepath.Join(cfg.Dir, "logs"), start: time.Now()}
	if err := os.MkdirAll(h.sup.logDir, 0o750); err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	defer func() { err = errors.Join(err, h.teardown()) }()
	org, token := "faults", app.NewSecret()
	if cfg.Mode == Distributed {
		err = h.startDistributed(ctx, org, token)
	} else {
		err = h.startEmbedded(ctx, org, token)
	}
	if err != nil {
		return nil, err
	}
	h.c = newClient("http://"+h.front.spec.Addr+"/api/v2", org, token, cfg.Writers+8)
	if err := h.createFlow(ctx); err != nil {
		return nil, err
	}
	h.snaps = newSnapLoad(h.c, h.led, cfg.Seed)
	if err := h.snaps.setup(ctx); err != nil {
		return nil, err
	}
	var deadlocksBefore int64
	if h.pg != nil {
		if deadlocksBefore, err = h.pg.deadlocks(ctx); err != nil {
			return nil, err
		}
	}

	lim := rate.NewLimiter(rate.Inf, 1)
	if cfg.Rate > 0 {
		lim = rate.NewLimiter(rate.Limit(cfg.Rate), max(1, cfg.Writers/4))
	}
	clients, err := h.writerKeys(ctx)
	if err != nil {
		return nil, err
	}
	ld := &load{clients: clients, l: h.led, lim: lim, seed: cfg.Seed, writers: cfg.Writers, ahead: cfg.Ahead}
	h.snaps.lim = lim
	h.start = time.Now()
	fmt.Fprintf(cfg.Progress, "faults: %s mode, %d writers, seed %d, logs in %s\n", cfg.Mode, cfg.Writers, cfg.Seed, h.sup.logDir)
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { h.sample(sctx); close(sampled) }()
	ld.start(ctx)
	h.snaps.start(ctx)
	h.schedule(ctx)
	h.snaps.stop.Store(true)
	ld.finish()
	h.snaps.finish()
	loadSecs := time.Since(h.start).Seconds()
	endSample := h.sampleNow(ctx)
	h.progress("load stopped: %d attestations answered 201", h.led.acked.Load())
	if !h.revive(ctx) {
		h.problem("the drain and the checks ran with a process down")
	}
	drained, drainSecs, why := h.drain(ctx)
	stopSampling()
	<-sampled
	h.progress("drain: %v after %.1f s %s", drained, drainSecs, why)

	vctx := context.WithoutCancel(ctx)
	rep = h.report(vctx, cfg, loadSecs, endSample, drained, drainSecs, why, deadlocksBefore)
	return rep, nil
}

// startDistributed starts the broker, the evaluators (together, as an operator would) and
// ingest, each a process of its own, on a fresh schema.
func (h *harness) startDistributed(ctx context.Context, org, token string) error {
	pg, err := newPGRun(ctx, h.cfg.Postgres)
	if err != nil {
		return err
	}
	h.pg = pg
	if h.db, err = pg.harnessDB(); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	h.broker = h.sup.add("broker", childSpec{Role: roleBroker, Port: port, DataDir: filepath.Join(h.cfg.Dir, "broker"),
		Partitions: h.cfg.Partitions})
	if err := h.broker.startProc(ctx, startTimeout); err != nil {
		return err
	}
	brokers := []string{fmt.Sprintf("127.0.0.1:%d", port)}
	h.brokers = brokers
	for i := range h.cfg.Evaluators {
		name := fmt.Sprintf("evaluate-%d", i+1)
		// Each evaluator keeps its static member ID across restarts, as a pod keeps its name.
		h.evaluators = append(h.evaluators, h.sup.add(name, childSpec{Role: roleEvaluate, Postgres: pg.dsn(name),
			Brokers: brokers, Partitions: h.cfg.Partitions, Org: org, Token: token, Instance: name}))
	}
	errs := make([]error, len(h.evaluators))
	var wg sync.WaitGroup
	for i, p := range h.evaluators {
		wg.Go(func() { errs[i] = p.startProc(ctx, startTimeout) })
	}
	wg.Wait()
	for i, p := range h.evaluators {
		if errs[i] != nil && !h.restart(ctx, p) { // the failed start is in the report as an exit
			return fmt.Errorf("faults: %s did not start: %w", p.name, errs[i])
		}
	}
	addrPort, err := freePort()
	if err != nil {
		return err
	}
	h.front = h.sup.add("ingest", childSpec{Role: roleIngest, Addr: fmt.Sprintf("127.0.0.1:%d", addrPort), Postgres: pg.dsn("ingest"),
		Brokers: brokers, Partitions: h.cfg.Partitions, Org: org, Token: token})
	return h.front.startProc(ctx, startTimeout)
}

// startEmbedded starts serve on a data directory and reads its state.db directly.
func (h *harness) startEmbedded(ctx context.Context, org, token string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	dir := filepath.Join(h.cfg.Dir, "serve")
	h.front = h.sup.add("serve", childSpec{Role: roleServe, Addr: fmt.Sprintf("127.0.0.1:%d", port), DataDir: dir, Org: org, Token: token})
	if err := h.front.startProc(ctx, startTimeout); err != nil {
		return err
	}
	h.db, err = openSQLite(filepath.Join(dir, "state.db"))
	return err
}

// createFlow creates the run's flow with its template and waits until it can be read.
func (h *harness) createFlow(ctx context.Context) error {
	deadline := time.Now().Add(startTimeout)
	for {
		a := h.c.multipart(ctx, http.MethodPut, "/flows/"+h.c.org+"/template_file",
			map[string]any{"name": flowName, "description": "fault harness"}, "template_file", "template.yml", []byte(flowTemplate))
		if a.status == http.StatusCreated || a.status == http.StatusOK {
			if g := h.c.get(ctx, "/flows/"+h.c.org+"/"+flowName); g.status == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("faults: create the flow: %d %s %v", a.status, clip(a.body, 300), a.err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writerKeys makes a service account with Keys API keys (member role) and returns a client
// for each. Identities are written by ingest directly in the store: no wait for the evaluator.
func (h *harness) writerKeys(ctx context.Context) ([]*client, error) {
	const account = "faults-writers"
	a := h.c.do(ctx, http.MethodPost, "/service-accounts/"+h.c.org, "application/json",
		[]byte(`{"name":"`+account+`","privilege":"member","description":"fault harness writers"}`))
	if a.status != http.StatusCreated {
		return nil, fmt.Errorf("faults: create the writers' service account: %d %s %v", a.status, a.body, a.err)
	}
	clients := make([]*client, 0, h.cfg.Keys)
	for range h.cfg.Keys {
		a := h.c.do(ctx, http.MethodPost, "/service-accounts/"+h.c.org+"/"+account+"/api-keys", "application/json", []byte("null"))
		var key struct {
			Key string `json:"key"`
		}
		if a.status != http.StatusCreated || json.Unmarshal([]byte(a.body), &key) != nil || key.Key == "" {
			return nil, fmt.Errorf("faults: create a writer's API key: %d %s %v", a.status, a.body, a.err)
		}
		clients = append(clients, h.c.as(key.Key))
	}
	return clients, nil
}

// step is one fault: it does it (and undoes it) and describes what happened.
type step struct {
	name string
	run  func(ctx context.Context) string
}

// round is the faults of one round of the schedule.
func (h *harness) round(r int) []step {
	if h.cfg.Mode == Embedded {
		return []step{{"kill -9 serve", h.killAndRestart(h.front, false)}}
	}
	ev := h.evaluators[r%len(h.evaluators)]
	return []step{
		{"kill -9 " + ev.name, h.killAndRestart(ev, true)},
		{"kill -9 broker", h.killBroker},
		{"terminate the PostgreSQL backends", h.terminateBackends},
		{"kill -9 ingest", h.killAndRestart(h.front, false)},
	}
}

// schedule runs the faults at random moments while the load runs.
func (h *harness) schedule(ctx context.Context) {
	for r := 0; ; r++ {
		for _, s := range h.round(r) {
			if ctx.Err() != nil || (r >= h.cfg.Rounds && time.Since(h.start) >= h.cfg.Duration) {
				return
			}
			h.randomMoment(ctx)
			if !h.revive(ctx) {
				h.problem("the fault schedule stopped early: a process could not be restarted")
				return
			}
			at := h.sup.since()
			h.progress("fault: %s", s.name)
			storedBefore := h.storedNow(ctx)
			f := Fault{AtSeconds: round1(at), Fault: s.name, Detail: s.run(ctx)}
			// Recovered: the writes get a step of 201s and the store applies something.
			mark, since := h.led.acked.Load(), time.Now()
			var wrote, applied bool
			var looked time.Time
			waitFor(ctx, h.cfg.StepTimeout, func() bool {
				if !wrote && h.led.acked.Load()-mark >= int64(h.cfg.Step) {
					wrote = true
					f.RecoveredSeconds = round1(time.Since(since).Seconds())
				}
				if !applied && time.Since(looked) >= 100*time.Millisecond { // the store is asked less often
					looked = time.Now()
					applied = h.storedNow(ctx) > storedBefore
				}
				return wrote && applied
			})
			f.Recovered = wrote
			if !wrote {
				f.RecoveredSeconds = round1(time.Since(since).Seconds())
				h.problem("after %s at +%.1f s the writes did not recover: %d of %d 201s within %v",
					s.name, at, h.led.acked.Load()-mark, h.cfg.Step, h.cfg.StepTimeout)
			}
			if !applied {
				f.Detail += "; nothing applied since"
				h.problem("after %s at +%.1f s the evaluators applied nothing within %v", s.name, at, h.cfg.StepTimeout)
			}
			h.mu.Lock()
			h.faults = append(h.faults, f)
			h.mu.Unlock()
			h.progress("  %s; writes recovered %v in %.1f s", f.Detail, f.Recovered, f.RecoveredSeconds)
		}
	}
}

// randomMoment waits for a random number of 201s and, with FaultEvery, a random time.
func (h *harness) randomMoment(ctx context.Context) {
	n := h.cfg.Step/2 + h.rng.IntN(h.cfg.Step+1)
	h.waitCreated(ctx, n, h.cfg.StepTimeout)
	if h.cfg.FaultEvery > 0 {
		d := time.Duration((0.5 + h.rng.Float64()) * float64(h.cfg.FaultEvery))
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// killAndRestart kills p; an evaluator stays down while the writes get a step of 201s (the
// other evaluators take its partitions), ingest and serve come back at once.
func (h *harness) killAndRestart(p *proc, stayDown bool) func(context.Context) string {
	return func(ctx context.Context) string {
		p.kill()
		down := time.Now()
		detail := ""
		if stayDown {
			_, _, got := h.waitCreated(ctx, h.cfg.Step, h.cfg.StepTimeout)
			detail = fmt.Sprintf("%d 201s while it was down, ", got)
		}
		if !h.restart(ctx, p) {
			return detail + "restart failed"
		}
		return fmt.Sprintf("%sback after %.1f s (start %d)", detail, time.Since(down).Seconds(), p.startCount())
	}
}

// killBroker kills the broker and restarts it on the same port and data directory once the
// writes have felt it (or 10 s passed).
func (h *harness) killBroker(ctx context.Context) string {
	notOK, acked := h.led.notOK.Load(), h.led.acked.Load()
	h.broker.kill()
	down := time.Now()
	felt := waitFor(ctx, 10*time.Second, func() bool { return h.led.notOK.Load() > notOK })
	during := h.led.acked.Load() - acked
	if !h.restart(ctx, h.broker) {
		return "restart failed"
	}
	return fmt.Sprintf("down %.1f s, writes failed meanwhile: %v, %d 201s meanwhile (some were in flight)",
		time.Since(down).Seconds(), felt, during)
}

// terminateBackends ends every PostgreSQL connection of the run's processes.
func (h *harness) terminateBackends(ctx context.Context) string {
	n, err := h.pg.terminateBackends(ctx)
	if err != nil {
		h.problem("%v", err)
		return err.Error()
	}
	if n == 0 {
		h.problem("terminating the processes' PostgreSQL connections found none (application_name %s*)", h.pg.appPrefix())
	}
	return fmt.Sprintf("%d backends terminated", n)
}

// restartAttempts is how often the harness tries to start a process again, as a supervisor
// (systemd, Kubernetes) would.
const restartAttempts = 3

// restart starts p again, up to restartAttempts times; a start that fails is in the report as
// an exit (or, when it hung, as a problem here).
func (h *harness) restart(ctx context.Context, p *proc) bool {
	var err error
	for range restartAttempts {
		if err = p.startProc(ctx, startTimeout); err == nil {
			return true
		}
		p.kill() // a start that timed out may still run
		if ctx.Err() != nil {
			break
		}
	}
	h.problem("%s could not be restarted (%d attempts): %v", p.name, restartAttempts, err)
	return false
}

// revive restarts every process that is not running (it exited on its own), as a supervisor
// would, and reports whether all run.
func (h *harness) revive(ctx context.Context) bool {
	h.sup.mu.Lock()
	procs := append([]*proc(nil), h.sup.procs...)
	h.sup.mu.Unlock()
	for _, p := range procs {
		if !p.running() {
			h.progress("restarting %s, which is not running", p.name)
			if !h.restart(ctx, p) {
				return false
			}
		}
	}
	return true
}

// waitCreated waits until the writers got n more 201s, and reports whether they did, when,
// and how many they got.
func (h *harness) waitCreated(ctx context.Context, n int, within time.Duration) (bool, float64, int) {
	mark, start := h.led.acked.Load(), time.Now()
	ok := waitFor(ctx, within, func() bool { return h.led.acked.Load()-mark >= int64(n) })
	return ok, time.Since(start).Seconds(), int(h.led.acked.Load() - mark)
}

// waitFor polls cond until it holds, ctx ends or within passes.
func waitFor(ctx context.Context, within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// storedNow is the store's count of attestations (-1 when it cannot be read).
func (h *harness) storedNow(ctx context.Context) int {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := readCounts(qctx, h.db)
	if err != nil {
		return -1
	}
	return c.attestations
}

// sample records the backlog every SampleEvery until ctx ends.
func (h *harness) sample(ctx context.Context) {
	t := time.NewTicker(h.cfg.SampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.sampleNow(ctx)
		}
	}
}

func (h *harness) sampleNow(ctx context.Context) Sample {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	acked := int(h.led.acked.Load())
	c, err := readCounts(qctx, h.db)
	if err != nil {
		return Sample{T: round1(h.sup.since()), Acknowledged: acked, Stored: -1}
	}
	s := Sample{T: round1(h.sup.since()), Acknowledged: acked, Stored: c.attestations,
		Backlog: max(0, acked-c.attestations), DirtyTrails: c.dirty}
	h.mu.Lock()
	h.samples = append(h.samples, s)
	h.mu.Unlock()
	return s
}

// drain waits until every attestation answered 201 is stored, no trail waits for evaluation
// and nothing was applied between two looks, within DrainTimeout.
func (h *harness) drain(ctx context.Context) (bool, float64, string) {
	start := time.Now()
	deadline := start.Add(h.cfg.DrainTimeout)
	prevApplied := -1
	why := ""
	for {
		c, err := readCounts(ctx, h.db)
		switch {
		case err != nil:
			why = err.Error()
		case c.attestations < int(h.led.acked.Load()):
			why = fmt.Sprintf("%d attestations stored of %d answered 201, %d trails waiting for evaluation",
				c.attestations, h.led.acked.Load(), c.dirty)
		case c.dirty > 0:
			why = fmt.Sprintf("%d trails waiting for evaluation", c.dirty)
		case c.applied != prevApplied:
			why = "messages still being applied"
		default:
			sv, err := readStore(ctx, h.db)
			if err != nil {
				why = err.Error()
				break
			}
			missing := ackedNotStored(h.led.snapshot(), sv)
			if missing > 0 {
				why = fmt.Sprintf("%d attestations answered 201 not stored", missing)
				break
			}
			// A request that failed ambiguously may still be on the bus, behind a partition
			// the group is handing over: it would be applied while the checks read.
			behind, err := h.busBehind(ctx)
			if err != nil {
				why = err.Error()
				break
			}
			if behind == 0 {
				return true, time.Since(start).Seconds(), ""
			}
			why = fmt.Sprintf("%d messages on the bus not yet applied", behind)
		}
		if err == nil {
			prevApplied = c.applied
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false, time.Since(start).Seconds(), why
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// busBehind is how many evidence messages the bus holds beyond what the evaluators recorded as
// applied (distributed; the embedded mode's single process moves its bus on restart, and 0).
func (h *harness) busBehind(ctx context.Context) (int64, error) {
	if h.cfg.Mode != Distributed {
		return 0, nil
	}
	offsets, err := kafkabus.NewOffsets(kafkabus.Config{Brokers: h.brokers})
	if err != nil {
		return 0, err
	}
	defer offsets.Close()
	ends, err := offsets.End(ctx, contract.TopicEvidence)
	if err != nil {
		return 0, fmt.Errorf("faults: the bus's end offsets: %w", err)
	}
	rows, err := h.db.QueryContext(ctx, `SELECT part, next_offset FROM bus_positions WHERE topic = $1`, contract.TopicEvidence)
	if err != nil {
		return 0, fmt.Errorf("faults: the evaluators' positions: %w", err)
	}
	defer rows.Close()
	applied := map[int32]int64{}
	for rows.Next() {
		var part int32
		var next int64
		if err := rows.Scan(&part, &next); err != nil {
			return 0, fmt.Errorf("faults: the evaluators' positions: %w", err)
		}
		applied[part] = next
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("faults: the evaluators' positions: %w", err)
	}
	var behind int64
	for part, end := range ends {
		behind += max(end-applied[part], 0)
	}
	return behind, nil
}

// report verifies the store and the API and puts everything the run saw together.
func (h *harness) report(ctx context.Context, cfg Config, loadSecs float64, end Sample, drained bool, drainSecs float64, why string,
	deadlocksBefore int64) *Report {
	r := &Report{Mode: string(cfg.Mode), Seed: cfg.Seed, Writers: cfg.Writers, Keys: cfg.Keys, Ahead: cfg.Ahead, RateLimit: cfg.Rate,
		LoadBeganAtSeconds: round1(h.start.Sub(h.sup.start).Seconds()), LoadSeconds: round1(loadSecs),
		Drained: drained, DrainSeconds: round1(drainSecs), LogDir: h.sup.logDir,
		Trails: h.led.outcomes(kindTrail), Attestations: h.led.outcomes(kindAttestation)}
	if cfg.Mode == Distributed {
		r.Partitions, r.Evaluators = cfg.Partitions, cfg.Evaluators
	}
	if !drained {
		h.problem("the evaluators did not drain within %v after the load: %s", cfg.DrainTimeout, why)
	}

	trails := h.led.snapshot()
	sv, err := readStore(ctx, h.db)
	if err != nil {
		h.problem("reading the store: %v", err)
	} else {
		names := make([]string, 0, len(sv.trails))
		for n := range sv.trails {
			names = append(names, n)
		}
		api := readAPI(ctx, h.c, names)
		st, probs := verify(trails, sv, api)
		r.Stored = st
		for _, p := range probs {
			h.problem("%s", p)
		}
		if after := h.storedNow(ctx); after != len(sv.atts) {
			h.problem("the store changed while it was verified (%d attestations, then %d): the drain ended early", len(sv.atts), after)
		}
	}
	r.Snapshots = h.checkSnapshots(ctx)

	r.Throughput.CreatedPerSecond = round1(float64(r.Attestations.Created) / loadSecs)
	if end.Stored >= 0 {
		r.Throughput.AppliedPerSecondInLoad = round1(float64(end.Stored) / loadSecs)
	}
	r.Throughput.AppliedPerSecond = round1(float64(r.Stored.Attestations) / (loadSecs + drainSecs))
	h.mu.Lock()
	r.Backlog.Samples = append([]Sample(nil), h.samples...)
	h.mu.Unlock()
	r.Backlog.AtLoadEnd = end.Backlog
	for _, s := range r.Backlog.Samples {
		if s.Backlog > r.Backlog.Max {
			r.Backlog.Max, r.Backlog.MaxAtSeconds = s.Backlog, s.T
		}
	}

	if h.pg != nil {
		if after, err := h.pg.deadlocks(ctx); err == nil {
			r.Deadlocks.PGStatDatabase = after - deadlocksBefore
		}
	}
	h.sup.mu.Lock()
	procs := append([]*proc(nil), h.sup.procs...)
	h.sup.mu.Unlock()
	for _, p := range procs {
		counts, errLines, first, err := scanLog(p.logPath, []string{deadlockPattern, rywPattern})
		if err != nil {
			h.problem("reading the log of %s: %v", p.name, err)
		}
		p.mu.Lock()
		starts := p.starts
		p.mu.Unlock()
		r.Processes = append(r.Processes, Process{Name: p.name, Starts: starts, ErrorLines: errLines,
			Deadlocks: counts[deadlockPattern], RYWTimeouts: counts[rywPattern], Log: p.logPath})
		r.Deadlocks.InLogs += counts[deadlockPattern]
		if r.Deadlocks.First == "" {
			r.Deadlocks.First = first[deadlockPattern]
		}
		r.ReadYourWritesTimeouts += counts[rywPattern]
	}
	if r.Deadlocks.InLogs > 0 {
		h.problem("the processes logged %d PostgreSQL deadlocks, e.g. %s", r.Deadlocks.InLogs, r.Deadlocks.First)
	}
	if r.ReadYourWritesTimeouts > 0 {
		h.problem("%d read-your-writes waits timed out: reads were answered without the caller's acknowledged writes", r.ReadYourWritesTimeouts)
	}
	if n := r.Trails.Refused + r.Attestations.Refused + r.Snapshots.Reports.Refused + r.Snapshots.Evidence.Refused +
		r.Snapshots.FinalReports.Refused; n > 0 {
		h.problem("%d valid requests were refused with a 4xx (see the examples)", n)
	}
	h.led.mu.Lock()
	r.MissingRetryAfter = h.led.missingRetry
	h.led.mu.Unlock()
	if r.MissingRetryAfter > 0 {
		h.problem("%d answers 503 or 429 came without Retry-After", r.MissingRetryAfter)
	}
	r.UnexpectedExits = h.sup.unexpectedExits()
	for _, e := range r.UnexpectedExits {
		h.problem("%s (start %d) exited on its own at +%.1f s (%s): %s", e.Process, e.Start, e.AtSeconds, e.Status, e.LastError)
	}
	h.mu.Lock()
	r.Faults = append([]Fault(nil), h.faults...)
	r.Problems = append([]string{}, h.problems...)
	h.mu.Unlock()
	r.Examples = h.led.exampleAnswers()
	sort.SliceStable(r.Processes, func(i, j int) bool { return r.Processes[i].Name < r.Processes[j].Name })
	r.Passed = len(r.Problems) == 0
	return r
}

func (h *harness) problem(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.problems = append(h.problems, fmt.Sprintf(format, args...))
}

func (h *harness) progress(format string, args ...any) {
	fmt.Fprintf(h.cfg.Progress, "+%5.1fs %s\n", h.sup.since(), fmt.Sprintf(format, args...))
}

// teardown kills every process and drops the schema.
func (h *harness) teardown() error {
	h.sup.killAll()
	var errs []error
	if h.c != nil {
		h.c.http.CloseIdleConnections()
	}
	if h.db != nil {
		errs = append(errs, h.db.Close())
	}
	if h.pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs = append(errs, h.pg.close(ctx))
	}
	return errors.Join(errs...)
}
