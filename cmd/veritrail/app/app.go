// Package app is Veritrail's composition root: the one place that knows which tiers a
// process runs and which adapters they use. `serve` runs every tier on SQLite and the
// embedded bus; `ingest`, `evaluate` and `notify` run one tier each on Kafka and PostgreSQL.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/veritrail/veritrail/evaluate"
	"github.com/veritrail/veritrail/ingest"
	"github.com/veritrail/veritrail/ingest/answers"
	"github.com/veritrail/veritrail/ingest/blobs"
	"github.com/veritrail/veritrail/ingest/consistency"
	"github.com/veritrail/veritrail/internal/bus/backlog"
	"github.com/veritrail/veritrail/internal/bus/batch"
	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/sqlitebus"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/health"
	"github.com/veritrail/veritrail/internal/metrics"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
	"github.com/veritrail/veritrail/internal/tracing"
	"github.com/veritrail/veritrail/notify/catalog"
	"github.com/veritrail/veritrail/policies/template"
)

// EvaluatorGroup is the consumer group of the evaluate tier.
const EvaluatorGroup = "veritrail-evaluate"

// Config is the configuration of every tier, one section each.
type Config struct {
	// Addr is where the HTTP API listens (serve, ingest).
	Addr string
	// AdminAddr is where evaluate and notify serve /metrics, /livez and /readyz; empty serves
	// nothing.
	AdminAddr string
	// DataDir holds the embedded mode's state, bus and attachments.
	DataDir string
	// Postgres is the store of the distributed mode.
	Postgres string
	Kafka    kafkabus.Config
	// Ingest is the ingest tier's section; its AllowPrivateTargets is set from
	// Notify.Notifiers.AllowPrivate, so that a rule is refused when written exactly when its
	// target would be refused when delivered to.
	Ingest ingest.Config
	// Relay tunes the evaluate tier's relay of notification triggers to the bus.
	Relay  evaluate.RelayConfig
	Notify NotifyConfig
	// MaxBacklog bounds, in the distributed mode, how many messages the evaluators may be behind
	// ingest before publishes wait (bus/backlog); zero means backlog.DefaultMax.
	MaxBacklog int64
	// BootstrapOrg and BootstrapToken create an organization and an admin key at first start.
	BootstrapOrg   string
	BootstrapToken string
	Log            *slog.Logger
	// Tracing traces reports from the HTTP request into the evaluator's apply (cmd/veritrail
	// builds it from the OTEL_* variables); nil traces nothing.
	Tracing trace.TracerProvider
	// Now is the clock of key expiry and rate limits; nil means time.Now. Tests move it.
	Now func() time.Time

	// ingestDeps, set only by tests, adjusts the ingest tier's dependencies before it is built
	// (a publisher or an attachment store that fails on demand).
	ingestDeps func(*ingest.Deps)
	// Resolver resolves notification targets' host names when rules are written; nil is the
	// system's. Tests give one that needs no DNS.
	Resolver ingest.Resolver
	// holdEvaluator, when set, delays the embedded evaluator until it is closed: tests use it to
	// read while a backlog is certainly not applied.
	holdEvaluator <-chan struct{}
}

// ingestConfig is the ingest tier's section with the settings it shares with other tiers.
func (cfg Config) ingestConfig() ingest.Config {
	c := cfg.Ingest
	c.AllowPrivateTargets = cfg.Notify.Notifiers.AllowPrivate
	return c
}

// Running is a started process: its API (when it serves one) and how to stop it.
type Running struct {
	API  *ingest.API
	Addr string // the address actually listened on
	// AdminAddr is the admin port's address actually listened on (evaluate, notify).
	AdminAddr string
	Store     store.Store
	// Catalog is the notify tier's notifiers (serve, notify), for status.
	Catalog *catalog.Catalog
	stop    context.CancelFunc
	group   *errgroup.Group
	closers []func() error
}

// Wait blocks until the process stops and returns the first error that stopped it.
func (r *Running) Wait() error { return r.group.Wait() }

// Close stops every tier and releases the adapters.
func (r *Running) Close() error {
	r.stop()
	err := r.group.Wait()
	if errors.Is(err, context.Canceled) {
		// The tier was cut off by this stop, not failing on its own.
		err = nil
	}
	for i := len(r.closers) - 1; i >= 0; i-- {
		err = errors.Join(err, r.closers[i]())
	}
	return err
}

func (r *Running) onClose(f func() error) { r.closers = append(r.closers, f) }

func newRunning(ctx context.Context) (*Running, context.Context) {
	ctx, stop := context.WithCancel(ctx)
	g, ctx := errgroup.WithContext(ctx)
	return &Running{stop: stop, group: g}, ctx
}

// StartEmbedded runs every tier in this process on the data directory: SQLite state, the
// SQLite bus and attachments on disk.
func StartEmbedded(ctx context.Context, cfg Config) (*Running, error) {
	log := logger(cfg)
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	r, ctx := newRunning(ctx)
	fail := func(err error) (*Running, error) {
		_ = r.Close()
		return nil, err
	}
	reg := metrics.NewRegistry()
	notifyMetrics := metrics.NewNotify(reg)
	if err := startCatalog(ctx, r, cfg, notifyMetrics); err != nil {
		return fail(err)
	}
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(cfg.DataDir, "state.db"))
	if err != nil {
		return fail(err)
	}
	r.Store = st
	r.onClose(st.Close)
	busDB, err := sqlitebus.Open(filepath.Join(cfg.DataDir, "bus.db"))
	if err != nil {
		return fail(err)
	}
	r.onClose(busDB.Close)
	wlog := watermill.NewSlogLogger(log)
	bus, err := sqlitebus.New(busDB, EmbeddedBusConfig(), wlog)
	if err != nil {
		return fail(err)
	}
	r.onClose(bus.Close)
	busPub, err := bus.Publisher()
	if err != nil {
		return fail(err)
	}
	pub := metrics.NewPublishing(reg).Publisher(busPub, contract.TopicEvidence, contract.TopicTriggers)
	sub, err := bus.Subscriber(EvaluatorGroup)
	if err != nil {
		return fail(err)
	}
	notifySub, err := bus.Subscriber(NotifyGroup)
	if err != nil {
		return fail(err)
	}
	bl, err := blobs.NewDir(filepath.Join(cfg.DataDir, "blobs"))
	if err != nil {
		return fail(err)
	}
	if err := bootstrap(ctx, st, cfg, true, os.Stdout); err != nil {
		return fail(err)
	}
	// The evaluator's commits move the counts assert answers are kept by, around each commit.
	changes := answers.NewChanges()
	api := newAPI(cfg, ingest.Deps{Store: st, Publisher: pub, Blobs: bl, Log: log, Identities: st, Sessions: st, Now: cfg.Now, Notifications: st,
		Changes: changes, Ready: []ingest.ReadyCheck{{Name: "store", Pinger: st}, {Name: "bus", Pinger: bus}}, Classify: st.Classify,
		Resolver: cfg.Resolver, Metrics: reg, Tracing: cfg.Tracing, Hurry: bus.Hurry})
	r.API = api
	evMetrics := metrics.NewEvaluator(reg)
	metrics.Backlog(reg, func() float64 { return float64(bus.Behind(contract.TopicEvidence)) })
	// SQLite has one writer, the evaluator: it evaluates each batch's trails in the batch's transaction.
	ev, err := evaluate.New(evaluate.Config{EvaluateInApply: true}, evaluate.Deps{
		Store: changes.Watch(st), Engine: template.NewEngine(template.EngineOptions{}), Log: log, Evaluated: api.Evaluated,
		Triggered: runRelay(ctx, r, cfg, st, pub, log), Metrics: evMetrics, Tracer: tracer(cfg, "evaluate"),
	})
	if err != nil {
		return fail(err)
	}
	// Before anything serves: the first reads wait for what the previous process acknowledged and
	// did not finish.
	if err := awaitBacklog(ctx, bus, st, api.Tracker(), log); err != nil {
		return fail(err)
	}
	if cfg.holdEvaluator == nil {
		if err := runEvaluator(ctx, r, cfg, ev, ev.HandleBatch, sub, 0, evMetrics, log); err != nil {
			return fail(err)
		}
	} else {
		r.group.Go(func() error {
			select {
			case <-cfg.holdEvaluator:
				return runEvaluator(ctx, r, cfg, ev, ev.HandleBatch, sub, 0, evMetrics, log)
			case <-ctx.Done():
				return nil
			}
		})
	}
	if err := runNotify(ctx, r, cfg, st, notifySub, notifyMetrics, log); err != nil {
		return fail(err)
	}
	op := newOperator(cfg, reg, st, []health.Check{{Name: "store", Pinger: st}, {Name: "bus", Pinger: bus}}, log)
	if err := serveHTTP(ctx, r, cfg, op, api.Handler(), log); err != nil {
		return fail(err)
	}
	return r, nil
}

// newAPI builds the ingest tier.
func newAPI(cfg Config, d ingest.Deps) *ingest.API {
	if cfg.ingestDeps != nil {
		cfg.ingestDeps(&d)
	}
	return ingest.New(cfg.ingestConfig(), d)
}

// awaitBacklog makes reads wait for what a previous process on the data directory acknowledged
// and did not finish before it stopped (a kill -9 right after a 201): the evidence messages the
// evaluator's group has not acked, in the bus's journal or its table, and the trails it applied
// messages to without evaluating them. Each organization's reads wait for its own, and only
// until they are applied and evaluated.
func awaitBacklog(ctx context.Context, bus *sqlitebus.Bus, st store.Store, tr *consistency.Tracker, log *slog.Logger) error {
	messages := 0
	err := bus.Unacked(ctx, EvaluatorGroup, contract.TopicEvidence, func(id string, md message.Metadata) error {
		if org := md.Get(contract.MetaOrg); org != "" {
			tr.Published(org, id)
			messages++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the evaluator's backlog: %w", err)
	}
	dirty, err := st.PendingEvaluations(ctx, "")
	if err != nil {
		return fmt.Errorf("read the trails awaiting evaluation: %w", err)
	}
	for _, d := range dirty {
		tr.Unevaluated(d.OrgID, d.TrailID, d.Generation)
	}
	if messages > 0 || len(dirty) > 0 {
		log.Info("veritrail: reads wait for the backlog left by the previous process", "messages", messages, "trails", len(dirty))
	}
	return nil
}

// StartIngest runs the ingest tier on Kafka and PostgreSQL.
func StartIngest(ctx context.Context, cfg Config) (*Running, error) {
	log := logger(cfg)
	r, ctx := newRunning(ctx)
	fail := func(err error) (*Running, error) {
		_ = r.Close()
		return nil, err
	}
	st, bl, err := openPostgres(ctx, r, cfg)
	if err != nil {
		return fail(err)
	}
	if err := kafkabus.EnsureTopics(ctx, cfg.Kafka, contract.TopicEvidence); err != nil {
		return fail(err)
	}
	reg := metrics.NewRegistry()
	pub, err := kafkabus.NewPublisher(cfg.Kafka, watermill.NewSlogLogger(log))
	if err != nil {
		return fail(err)
	}
	r.onClose(pub.Close)
	if err := bootstrap(ctx, st, cfg, false, os.Stdout); err != nil {
		return fail(err)
	}
	// The evaluator announces its commits through PostgreSQL; asserts are answered from memory
	// while nothing they depend on was announced.
	changes := answers.NewAnnouncedChanges()
	go st.ListenChanges(ctx, changes, log)
	// Reads here wait for what other ingest processes acknowledged: their marks in the store,
	// the bus's end offsets, the evaluator's positions.
	offsets, err := kafkabus.NewOffsets(cfg.Kafka)
	if err != nil {
		return fail(err)
	}
	r.onClose(offsets.Close)
	ends := func(ctx context.Context) (map[int32]int64, error) { return offsets.End(ctx, contract.TopicEvidence) }
	peers := consistency.NewPeers(consistency.PeersConfig{Process: uuid.NewString(), Store: st, Topic: contract.TopicEvidence, EndOffsets: ends,
		Poll: cfg.Ingest.ConsistencyPoll, Log: log})
	// Ingest accepts evidence faster than an evaluator applies it: publishes wait while the
	// evaluators are more than MaxBacklog messages behind (all ingest processes together).
	held := backlog.New(metrics.NewPublishing(reg).Publisher(pub, contract.TopicEvidence), backlog.Config{Topic: contract.TopicEvidence, Ends: ends, Max: cfg.MaxBacklog, Log: log,
		Positions: func(ctx context.Context) (map[int32]int64, error) { return st.Positions(ctx, contract.TopicEvidence) }})
	r.group.Go(func() error {
		held.Run(ctx)
		return nil
	})
	api := newAPI(cfg, ingest.Deps{Store: st, Publisher: held, Blobs: bl, Log: log, Identities: st, Sessions: st, Now: cfg.Now,
		Notifications: st, Changes: changes, Peers: peers, Classify: st.Classify, Resolver: cfg.Resolver,
		Ready: []ingest.ReadyCheck{{Name: "store", Pinger: st}, {Name: "bus", Pinger: pub}}, Metrics: reg, Tracing: cfg.Tracing})
	r.API = api
	r.group.Go(func() error {
		peers.Run(ctx)
		return nil
	})
	op := newOperator(cfg, reg, st, []health.Check{{Name: "store", Pinger: st}, {Name: "bus", Pinger: pub}}, log)
	if err := serveHTTP(ctx, r, cfg, op, api.Handler(), log); err != nil {
		return fail(err)
	}
	return r, nil
}

// StartEvaluate runs the evaluate tier on Kafka and PostgreSQL.
func StartEvaluate(ctx context.Context, cfg Config) (*Running, error) {
	log := logger(cfg)
	r, ctx := newRunning(ctx)
	fail := func(err error) (*Running, error) {
		_ = r.Close()
		return nil, err
	}
	st, _, err := openPostgres(ctx, r, cfg)
	if err != nil {
		return fail(err)
	}
	if err := kafkabus.EnsureTopics(ctx, cfg.Kafka, contract.TopicEvidence, contract.TopicTriggers); err != nil {
		return fail(err)
	}
	kcfg := cfg.Kafka
	if kcfg.ConsumerGroup == "" {
		kcfg.ConsumerGroup = EvaluatorGroup
	}
	if kcfg.MaxInFlight == 0 {
		// A batch transaction applies what the partitions have ready, not one message of each.
		kcfg.MaxInFlight = evaluateBatch
	}
	wlog := watermill.NewSlogLogger(log)
	sub, err := kafkabus.NewSubscriber(kcfg, wlog)
	if err != nil {
		return fail(err)
	}
	kpub, err := kafkabus.NewPublisher(cfg.Kafka, wlog)
	if err != nil {
		return fail(err)
	}
	r.onClose(kpub.Close)
	reg := metrics.NewRegistry()
	pub := metrics.NewPublishing(reg).Publisher(kpub, contract.TopicTriggers)
	evMetrics := metrics.NewEvaluator(reg)
	offsets, err := kafkabus.NewOffsets(cfg.Kafka)
	if err != nil {
		return fail(err)
	}
	r.onClose(offsets.Close)
	metrics.ConsumerLag(reg, func(ctx context.Context) (map[int32]int64, error) {
		return evidenceLag(ctx, offsets, st)
	})
	ev, err := evaluate.New(evaluate.Config{}, evaluate.Deps{Store: st, Engine: template.NewEngine(template.EngineOptions{}), Log: log,
		Triggered: runRelay(ctx, r, cfg, st, pub, log), Metrics: evMetrics, Tracer: tracer(cfg, "evaluate")})
	if err != nil {
		return fail(err)
	}
	// How far each partition is applied, for reads at the ingest processes (read after write).
	positions := newPositionRecorder(st, contract.TopicEvidence, log)
	r.group.Go(func() error { return positions.run(ctx) })
	handle := func(ctx context.Context, msgs []*message.Message) (int, error) {
		n, err := ev.HandleBatch(ctx, msgs)
		positions.handled(msgs[:n])
		return n, err
	}
	if err := runEvaluator(ctx, r, cfg, ev, handle, sub, distributedBatchWindow, evMetrics, log); err != nil {
		return fail(err)
	}
	op := newOperator(cfg, reg, st, []health.Check{{Name: "store", Pinger: st}, {Name: "bus", Pinger: kpub}}, log)
	if err := serveAdmin(ctx, r, cfg, op, log); err != nil {
		return fail(err)
	}
	return r, nil
}

func openPostgres(ctx context.Context, r *Running, cfg Config) (*sqlstore.Store, blobs.Store, error) {
	if cfg.Postgres == "" {
		return nil, nil, errors.New("the distributed mode needs --postgres (VERITRAIL_POSTGRES)")
	}
	st, err := sqlstore.OpenPostgres(ctx, cfg.Postgres)
	if err != nil {
		return nil, nil, err
	}
	r.Store = st
	r.onClose(st.Close)
	bl, err := blobs.NewSQL(ctx, st.DB())
	if err != nil {
		return nil, nil, err
	}
	return st, bl, nil
}

// runEvaluator consumes the evidence topic in batches (bus/batch owns acks, retries and panic
// recovery) and runs the evaluation loop and the replays of rejected messages beside it. A batch
// is applied in one transaction: up to the subscriber's window of messages (on Kafka, a window
// per partition).
func runEvaluator(ctx context.Context, r *Running, cfg Config, ev *evaluate.Evaluator, handle batch.Handler, sub message.Subscriber,
	window time.Duration, m *metrics.Evaluator, log *slog.Logger) error {
	msgs, err := sub.Subscribe(ctx, contract.TopicEvidence)
	if err != nil {
		return fmt.Errorf("evaluate: subscribe to %s: %w", contract.TopicEvidence, err)
	}
	r.onClose(sub.Close)
	r.group.Go(func() error { return ev.Run(ctx) })
	r.group.Go(func() error { return ev.RunReplays(ctx) })
	applyTracer := tracer(cfg, "evaluate")
	timed := func(ctx context.Context, msgs []*message.Message) (int, error) {
		spans := applySpans(ctx, applyTracer, msgs)
		start := time.Now()
		n, err := handle(ctx, msgs)
		m.Batch(n, time.Since(start), err != nil)
		for i, span := range spans {
			if i >= n {
				span.SetStatus(codes.Error, "not applied in this batch; retried")
			}
			span.End()
		}
		return n, err
	}
	r.group.Go(func() error {
		batch.Consume(ctx, msgs, batch.Config{MaxBatch: evaluateBatch, Window: window}, timed, log)
		if ctx.Err() == nil {
			return fmt.Errorf("evaluate: the subscription to %s ended", contract.TopicEvidence)
		}
		return nil
	})
	return nil
}

// evaluateBatch bounds the messages the evaluator applies in one transaction; the embedded bus
// delivers that many ahead of their acks. Larger batches than the 64 of before cost the same per
// message applied alone, but under ingest load they let the evaluator take what piled up during
// a commit in one transaction (docs/PERFORMANCE.md, 2026-11-26 04:00).
const evaluateBatch = 256

// serveHTTP serves the API on cfg.Addr, with the operator routes in front of it. The server's
// ReadTimeout and WriteTimeout stay unset:
// they are fixed per request, and ingest sets deadlines that follow each request's progress
// instead (limits.Limits: a body must keep a minimum rate, a response write likewise, and a
// long read-your-writes wait before the answer is not cut off). Headers must arrive within
// 10 s, and a keep-alive connection is closed after --idle-timeout without a request.
func serveHTTP(ctx context.Context, r *Running, cfg Config, op operator, h http.Handler, log *slog.Logger) error {
	addr, err := listenAndServe(ctx, r, cfg.Addr, op.routes(h), cfg.Ingest.Limits.IdleTimeout, "api", log)
	if err != nil {
		return err
	}
	r.Addr = addr
	return nil
}

// logger is the process's logger; with tracing on, a line logged with a traced context names
// its trace and span.
func logger(cfg Config) *slog.Logger {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	if cfg.Tracing != nil {
		log = slog.New(tracing.LogHandler(log.Handler()))
	}
	return log
}

// distributedBatchWindow is how long the distributed evaluator holds a batch open for more
// messages (batch.Config Window). Each batch is a PostgreSQL transaction of several round trips
// and a commit, and below full load an evaluator otherwise applies what one fetch brought: with
// two evaluators sharing the load the bench measured 0.49-0.63 database commits a 201 and 149-188
// us of PostgreSQL CPU, against 0.38-0.43 and 125-160 us with this window (docs/PERFORMANCE.md,
// 2026-11-27 12:32-12:50). It delays a message's apply, and so a read after it, by at most this
// much. The embedded evaluator's bus hands over a window of messages and the next only after
// their acks, so a window there would only stall: its batches keep the linger alone, and the
// bus's mover gathers messages instead (sqlitebus moveLingerLoaded).
const distributedBatchWindow = 3 * time.Millisecond

// EmbeddedBusConfig is the embedded bus of `veritrail serve`. One process owns it: a short
// lease lets a restarted process resume quickly after a crash left a message in flight;
// publishes go through the bus's journal, which costs a 201 one write(2) instead of a SQLite
// commit; and since ingest and the evaluator share the cores, ingest is held back while the
// evaluator is more than embeddedMaxLag messages behind (docs/ARCHITECTURE.md, "Embedded bus").
func EmbeddedBusConfig() sqlitebus.Config {
	return sqlitebus.Config{LeaseDuration: 3 * time.Second, MaxInFlight: evaluateBatch, PublishJournal: true,
		MaxLag: embeddedMaxLag, LagGroup: EvaluatorGroup}
}

// embeddedMaxLag is four of the evaluator's largest batches: enough that it always has a full
// batch waiting, little enough that a read-your-writes wait behind it stays short (about
// 0.15 s at the 7,000 applied a second of two cores).
const embeddedMaxLag = 4 * evaluateBatch

// evidenceLag is, per partition of the evidence topic, how many messages the evaluators have
// not applied yet: the end offset minus the position they recorded.
func evidenceLag(ctx context.Context, offsets *kafkabus.Offsets, st *sqlstore.Store) (map[int32]int64, error) {
	ends, err := offsets.End(ctx, contract.TopicEvidence)
	if err != nil {
		return nil, err
	}
	positions, err := st.Positions(ctx, contract.TopicEvidence)
	if err != nil {
		return nil, err
	}
	lag := make(map[int32]int64, len(ends))
	for p, end := range ends {
		lag[p] = max(end-positions[p], 0)
	}
	return lag, nil
}

// tracer is the tracer of the tier named (its instrumentation scope), nil when tracing is off.
func tracer(cfg Config, tier string) trace.Tracer {
	if cfg.Tracing == nil {
		return nil
	}
	return cfg.Tracing.Tracer("github.com/veritrail/veritrail/" + tier)
}

// applySpans starts, for each message that carries a trace context, the span of its apply: a
// consumer span in the trace of the request that published it, put in the message's context,
// where the evaluator finds it (evaluate.Deps.Tracer). A batch applies its messages in one
// transaction, so the spans share its time. None without a tracer.
func applySpans(ctx context.Context, tracer trace.Tracer, msgs []*message.Message) []trace.Span {
	if tracer == nil {
		return nil
	}
	spans := make([]trace.Span, len(msgs))
	for i, msg := range msgs {
		parent := tracing.Extract(ctx, msg.Metadata)
		if !trace.SpanContextFromContext(parent).IsValid() {
			spans[i] = trace.SpanFromContext(ctx) // not traced: a span that records nothing
			continue
		}
		_, spans[i] = tracer.Start(parent, "evaluate.apply", trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attribute.String("messaging.message.id", msg.UUID), attribute.Int("messaging.batch.message_count", len(msgs))))
		msg.SetContext(trace.ContextWithSpan(msg.Context(), spans[i]))
	}
	return spans
}
