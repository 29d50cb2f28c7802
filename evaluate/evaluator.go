// Package evaluate is the evaluate tier: it applies each evidence message from the bus to the
// store (the only writer of evidence) and recomputes the compliance of the trails it touched.
package evaluate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	lru "github.com/hashicorp/golang-lru/v2"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/metrics"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/template"
)

// Config tunes the evaluator.
type Config struct {
	// TemplateCacheSize bounds the parsed templates kept in memory.
	TemplateCacheSize int
	// FactCacheSize bounds the attestation facts of recently evaluated trails kept in memory
	// (about 200 bytes each); 0 means 262,144.
	FactCacheSize int
	// UnknownAttempts is how often a message that fails with an error of unknown class is tried
	// before it is set aside as rejected (see rejected.go); 0 means 5.
	UnknownAttempts int
	// RetryInterval is the first wait between those tries, doubling up to 2 s; 0 means 50 ms.
	RetryInterval time.Duration
	// ReplayPoll is how often RunReplays asks the store for requested replays; 0 means 500 ms.
	ReplayPoll time.Duration
	// StaleDirtAfter is how long a trail may stay dirty before this evaluator evaluates it
	// although it did not apply what dirtied it: the evaluator that did may have died before
	// evaluating (another process of the distributed mode), and nobody else would. 0 means 2 s.
	StaleDirtAfter time.Duration
	// EvaluateInApply evaluates the trails a batch adds to in the batch's own transaction (see
	// evaluateIn) instead of marking them dirty for the evaluation loop. Only for a store with
	// one writer, which this evaluator is (the embedded mode's SQLite): with several, an apply
	// elsewhere could change a trail between this evaluation's reads and its commit.
	EvaluateInApply bool
}

// Deps are what the evaluator needs.
type Deps struct {
	Store  store.Store
	Engine *template.Engine
	// Policies evaluates environment policies; nil makes one with default options.
	Policies *envpolicy.Engine
	Log      *slog.Logger
	// Evaluated is called after each commit that applied messages or saved evaluations, so an
	// in-process read-your-writes waiter can look again at once and an in-process reader that
	// keeps answers knows which to drop. It names the organizations where anything may have
	// changed (messages that touch no trail: flows, environments, snapshots, policies, ...) and,
	// by organization, the artifacts whose trails were evaluated. A message that touches a trail
	// names nothing when it is applied: what readers see of it changes when the trail is
	// evaluated, and that evaluation names the trail's artifacts. May be nil.
	Evaluated func(orgs []string, artifacts map[string][]string)
	// Triggered is called after a commit that may have written notification triggers to the
	// outbox (any message that touches no trail), so the relay publishes them at once rather
	// than at its next poll. May be nil.
	Triggered func()
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Metrics counts policy evaluations; nil counts nothing.
	Metrics *metrics.Evaluator
	// Tracer records the evaluations of traced messages' trails and the OPA evaluations of their
	// applies as spans in the messages' traces; nil records none. A message is traced when its
	// context (message.Message.Context) holds a span: the composition root puts there the span
	// of its apply, which this evaluator's spans and the triggers it enqueues continue.
	Tracer trace.Tracer
}

// Evaluator applies messages and evaluates dirty trails. Apply and evaluation are separate
// steps so that a burst of messages for one trail is evaluated once, not once per message.
type Evaluator struct {
	cfg       Config
	d         Deps
	templates *lru.Cache[string, *template.Template]
	facts     *factCache
	policies  *policyJudge
	applier   applier

	evaluations atomic.Int64 // trail evaluations committed, for tests and metrics
	folds       *foldCache   // the template input of recently evaluated trails

	mu sync.Mutex
	// dirty holds the trails to evaluate, each with the span of the last traced message that
	// dirtied it (its evaluation's parent), or an invalid one.
	dirty map[string]trace.SpanContext
	wake  chan struct{}
}

// foldsKept bounds the folded attestations kept for the trails evaluated last (foldCache): a
// trail's distinct evidence, a few dozen at most for most, so some thousands of trails.
const foldsKept = 1 << 16

// New builds an evaluator.
func New(cfg Config, d Deps) (*Evaluator, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if cfg.TemplateCacheSize <= 0 {
		cfg.TemplateCacheSize = 1024
	}
	if cfg.FactCacheSize <= 0 {
		cfg.FactCacheSize = 1 << 18
	}
	if cfg.UnknownAttempts <= 0 {
		cfg.UnknownAttempts = 5
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 50 * time.Millisecond
	}
	if cfg.ReplayPoll <= 0 {
		cfg.ReplayPoll = 500 * time.Millisecond
	}
	templates, err := lru.New[string, *template.Template](cfg.TemplateCacheSize)
	if err != nil {
		return nil, fmt.Errorf("evaluate: template cache: %w", err)
	}
	facts := newFactCache(cfg.FactCacheSize)
	pj := newPolicyJudge(d.Policies, facts, d.Metrics, d.Tracer)
	if d.Store != nil && d.Store.ConcurrentWriters() {
		pj.rejudges = newStartedRejudges()
	}
	return &Evaluator{
		cfg:       cfg,
		d:         d,
		templates: templates,
		facts:     facts,
		folds:     newFoldCache(foldsKept),
		policies:  pj,
		applier:   applier{policies: pj, lockTrails: d.Store != nil && d.Store.ConcurrentWriters()},
		dirty:     map[string]trace.SpanContext{},
		wake:      make(chan struct{}, 1),
	}, nil
}

// Handle applies one bus message in one transaction. Redelivered messages are skipped. A
// message that can never apply is set aside as rejected and acknowledged, so that it does not
// block its partition; a transient error is returned, so that the consumer retries it (see
// rejected.go).
func (e *Evaluator) Handle(msg *message.Message) error { return e.handle(msg.Context(), msg) }

func (e *Evaluator) handle(ctx context.Context, msg *message.Message) error {
	sc := spanOf(msg)
	ctx = under(ctx, sc)
	env, err := contract.Unmarshal(msg.Payload)
	if err != nil {
		return e.reject(ctx, msg, nil, fmt.Errorf("%w: %w", ErrPermanent, err), store.ClassPermanent)
	}
	var trailID string
	var done bool
	class, err := e.attempt(ctx, func() error {
		return e.d.Store.Update(ctx, func(tx store.Tx) error {
			var err error
			if done, err = tx.Applied(ctx, env.ID); err != nil || done {
				return err
			}
			if trailID, err = e.applyEffects(ctx, tx, env); err != nil {
				return err
			}
			if err := recordAudit(ctx, tx, env, store.AuditApplied); err != nil {
				return err
			}
			return tx.MarkApplied(ctx, env.ID, trailID, e.now())
		})
	})
	switch {
	case err == nil:
		if !done {
			e.afterApply(env, trailID, sc)
		}
		return nil
	case class == store.ClassTransient:
		return fmt.Errorf("evaluate: apply %s %s: %w", env.Kind, env.ID, err)
	}
	return e.reject(ctx, msg, env, err, class)
}

// applyEffects applies env inside tx (apply) and records what readers need to know of it: the
// trail it touched is dirty, or, when it touched none, its organization changed. Handle and
// replays share it.
func (e *Evaluator) applyEffects(ctx context.Context, tx store.Tx, env *contract.Envelope) (string, error) {
	trailID, err := e.applier.apply(ctx, tx, env)
	if err != nil {
		return "", err
	}
	if trailID != "" {
		return trailID, tx.MarkDirty(ctx, trailID)
	}
	return "", tx.Announce(ctx, []string{env.OrgID}, nil)
}

// afterApply tells this process what a committed applyEffects changed.
func (e *Evaluator) afterApply(env *contract.Envelope, trailID string, sc trace.SpanContext) {
	if trailID == "" {
		e.triggered()
		e.notify([]string{env.OrgID}, nil)
		return
	}
	e.markDirty(trailID, sc)
}

// HandleBatch applies msgs in order and returns how many are done (see batch.Handler). It applies
// them all in one transaction, which is what lets the evaluator keep up with ingest; if that
// fails, it applies them one at a time, so that a message that can never apply is set aside on
// its own and the others still apply.
func (e *Evaluator) HandleBatch(ctx context.Context, msgs []*message.Message) (int, error) {
	if len(msgs) == 1 {
		return e.handleEach(ctx, msgs)
	}
	envs := make([]*contract.Envelope, len(msgs))
	for i, m := range msgs {
		env, err := contract.Unmarshal(m.Payload)
		if err != nil {
			return e.handleEach(ctx, msgs) // handle sets it aside
		}
		envs[i] = env
	}
	ids := make([]string, len(envs))
	var spans map[string]trace.SpanContext // by message ID, of the traced messages
	for i, env := range envs {
		ids[i] = env.ID
		if sc := spanOf(msgs[i]); sc.IsValid() {
			if spans == nil {
				spans = make(map[string]trace.SpanContext, len(envs))
			}
			spans[env.ID] = sc
		}
	}
	var traced map[string]trace.SpanContext // by trail, the span of the last traced message that dirtied it
	trails := make([]string, 0, len(msgs))
	var marks []store.AppliedMark
	var audits []store.AuditRecord
	var orgs []string // of the messages that touch no trail: their waiters can look at once
	var inTx inApply  // with Config.EvaluateInApply, the trails evaluated in the batch's transaction
	dirty := trails   // the trails left for the evaluation loop
	err := e.d.Store.Update(ctx, func(tx store.Tx) error {
		trails, marks, audits, orgs = trails[:0], marks[:0], audits[:0], orgs[:0]
		inTx = inApply{}
		clear(traced)
		done, err := tx.AppliedAmong(ctx, ids)
		if err != nil {
			return err
		}
		if e.applier.lockTrails {
			if err := holdBatchTrails(ctx, tx, envs, done); err != nil {
				return err
			}
		}
		applied := func(env *contract.Envelope, trailID string) {
			switch {
			case trailID == "":
				if !slices.Contains(orgs, env.OrgID) {
					orgs = append(orgs, env.OrgID)
				}
			case !slices.Contains(trails, trailID):
				trails = append(trails, trailID)
			}
			if sc, ok := spans[env.ID]; ok && trailID != "" {
				if traced == nil {
					traced = map[string]trace.SpanContext{}
				}
				traced[trailID] = sc
			}
			if r, ok := auditRecord(env, store.AuditApplied); ok {
				audits = append(audits, r)
			}
			marks = append(marks, store.AppliedMark{ID: env.ID, TrailID: trailID, At: e.now()})
		}
		for i := 0; i < len(envs); {
			if envs[i].Kind == contract.KindAttestationReported {
				// A run of attestations, the bulk of what pipelines send, is applied in a few statements.
				var run []*contract.Envelope
				for ; i < len(envs) && envs[i].Kind == contract.KindAttestationReported; i++ {
					if !done[envs[i].ID] { // applied before, or earlier in this batch
						done[envs[i].ID] = true
						run = append(run, envs[i])
					}
				}
				if len(run) == 0 {
					continue
				}
				trailIDs, err := e.applier.applyAttestations(ctx, tx, run)
				if err != nil {
					return fmt.Errorf("%d attestations from %s: %w", len(run), run[0].ID, err)
				}
				for k, env := range run {
					applied(env, trailIDs[k])
				}
				continue
			}
			env := envs[i]
			i++
			if done[env.ID] {
				continue
			}
			done[env.ID] = true
			trailID, err := e.applier.apply(under(ctx, spans[env.ID]), tx, env)
			if err != nil {
				return fmt.Errorf("%s %s: %w", env.Kind, env.ID, err)
			}
			applied(env, trailID)
		}
		dirty = trails
		if e.cfg.EvaluateInApply {
			var err error
			if inTx, err = e.evaluateIn(ctx, tx, trails, traced); err != nil {
				return err
			}
			dirty = inTx.left
		}
		if err := tx.MarkDirtyAll(ctx, dirty); err != nil {
			return err
		}
		if err := tx.InsertAudits(ctx, audits); err != nil {
			return err
		}
		if err := tx.MarkAppliedAll(ctx, marks); err != nil {
			return err
		}
		return tx.Announce(ctx, orgs, nil) // what readers see of the trails changes when they are evaluated
	})
	if err != nil {
		if e.classify(err) != store.ClassPermanent {
			e.d.Log.Warn("evaluate: batch failed; applying its messages one at a time", "messages", len(msgs), "err", err)
		}
		return e.handleEach(ctx, msgs)
	}
	for _, id := range dirty {
		e.markDirty(id, traced[id])
	}
	if len(orgs) > 0 {
		e.triggered()
	}
	// Messages that touch no trail are visible now, and so are those whose trails were evaluated
	// in the transaction; the others once evaluated.
	e.notify(orgs, fingerprintsByOrg(inTx.saved))
	return len(msgs), nil
}

// holdBatchTrails holds (store.Tx HoldTrails) every existing trail the batch's attestations add
// to, in one statement and so in ID order, when they come in more than one run (other messages
// between them). Each run holds its trails in ID order as it applies (applyAttestations), but the
// batch did not: on PostgreSQL, two evaluators applying overlapping batches during a handover
// locked the same trails in different orders and deadlocked
// (TestPostgresBatchesTouchTrailsInOneOrder). A trail begun in the batch is not there yet: its
// row is this transaction's.
func holdBatchTrails(ctx context.Context, tx store.Tx, envs []*contract.Envelope, done map[string]bool) error {
	runs := 0
	var keys []store.TrailKey
	for i, e := range envs {
		if e.Kind != contract.KindAttestationReported {
			continue
		}
		if i == 0 || envs[i-1].Kind != contract.KindAttestationReported {
			runs++
		}
		if e.Attestation != nil && !done[e.ID] {
			keys = append(keys, store.TrailKey{FlowID: e.Attestation.FlowID, Name: e.Attestation.TrailName})
		}
	}
	if runs < 2 || len(keys) == 0 {
		return nil
	}
	ids, err := tx.TrailIDs(ctx, keys)
	if err != nil {
		return err
	}
	return tx.HoldTrails(ctx, slices.Collect(maps.Values(ids)))
}

func (e *Evaluator) handleEach(ctx context.Context, msgs []*message.Message) (int, error) {
	for i, m := range msgs {
		if err := e.handle(ctx, m); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

func (e *Evaluator) now() float64 {
	return float64(e.d.Now().UnixMicro()) / 1e6
}

func (e *Evaluator) notify(orgs []string, artifacts map[string][]string) {
	if e.d.Evaluated != nil {
		e.d.Evaluated(orgs, artifacts)
	}
}

func (e *Evaluator) triggered() {
	if e.d.Triggered != nil {
		e.d.Triggered()
	}
}

// markDirty has trailID evaluated; sc, when valid, is the span its evaluation continues.
func (e *Evaluator) markDirty(trailID string, sc trace.SpanContext) {
	e.mu.Lock()
	if prev, ok := e.dirty[trailID]; !ok || sc.IsValid() || !prev.IsValid() {
		e.dirty[trailID] = sc
	}
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run evaluates dirty trails until ctx ends. It first picks up trails left dirty by a
// previous process (a crash between apply and evaluation).
func (e *Evaluator) Run(ctx context.Context) error {
	left, err := e.d.Store.DirtyTrails(ctx)
	if err != nil {
		if ctx.Err() != nil {
			// Stopped while starting: the dirty marks stay in the store for the next start.
			return nil
		}
		return fmt.Errorf("evaluate: load dirty trails: %w", err)
	}
	for _, id := range left {
		e.markDirty(id, trace.SpanContext{})
	}
	go e.sweepStaleDirt(ctx)
	if r := e.policies.rejudges; r != nil {
		go e.runRejudges(ctx, r)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-e.wake:
		}
		e.mu.Lock()
		dirty := e.dirty
		e.dirty = make(map[string]trace.SpanContext, len(dirty))
		e.mu.Unlock()
		ids := make([]string, 0, min(len(dirty), saveBatch))
		for id := range dirty {
			ids = append(ids, id)
			if len(ids) == saveBatch {
				e.evaluateAll(ctx, ids, dirty)
				ids = ids[:0]
			}
		}
		e.evaluateAll(ctx, ids, dirty)
		if ctx.Err() != nil {
			return nil
		}
	}
}

// sweepStaleDirt evaluates, every StaleDirtAfter, the trails dirty for longer than that: those
// whose evaluator died between applying and evaluating (it picks them up when it restarts, but it
// may not restart, and its partitions now come to the others). A trail dirtied again meanwhile
// has a newer generation and is left to whoever applied it.
func (e *Evaluator) sweepStaleDirt(ctx context.Context) {
	every := e.cfg.StaleDirtAfter
	if every <= 0 {
		every = 2 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids, err := e.d.Store.DirtyTrailsBefore(ctx, time.Now().Add(-every).UnixNano())
		if err != nil {
			if ctx.Err() == nil {
				e.d.Log.Warn("evaluate: looking for trails left dirty failed", "err", err)
			}
			continue
		}
		for _, id := range ids {
			e.markDirty(id, trace.SpanContext{})
		}
	}
}

// saveBatch is how many trail results are written in one transaction.
const saveBatch = 256

// evaluateAll evaluates the trails ids and saves the results in one transaction. A trail whose
// evaluation or save fails is evaluated again a second later. traces holds, by trail, the span
// its evaluation continues.
func (e *Evaluator) evaluateAll(ctx context.Context, ids []string, traces map[string]trace.SpanContext) {
	if len(ids) == 0 {
		return
	}
	results, errs := e.evaluateMany(ctx, ids, traces)
	for _, id := range ids {
		if err, ok := errs[id]; ok {
			if ctx.Err() != nil {
				return
			}
			e.d.Log.Error("evaluate: trail evaluation failed; will retry", "trail", id, "err", err)
			e.retryLater(ctx, id)
		}
	}
	saved, skipped, err := e.save(ctx, results)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrBusy) {
			// It gave way to a transaction holding an environment it judges: try again soon.
			e.d.Log.Debug("evaluate: saving trail evaluations gave way; will retry", "trails", len(results), "err", err)
			for _, r := range results {
				e.retrySoon(ctx, r.trailID)
			}
			return
		}
		e.d.Log.Error("evaluate: saving trail evaluations failed; will retry", "trails", len(results), "err", err)
		for _, r := range results {
			e.retryLater(ctx, r.trailID)
		}
		return
	}
	for _, r := range skipped {
		e.retrySoon(ctx, r.trailID)
	}
	e.notify(nil, fingerprintsByOrg(saved))
}

func (e *Evaluator) retryLater(ctx context.Context, id string) {
	e.retryAfter(ctx, id, time.Second)
}

// retrySoon evaluates a trail again after a pause as long as a batch transaction usually takes:
// its evaluation was not saved because another transaction held what the save needed.
func (e *Evaluator) retrySoon(ctx context.Context, id string) {
	e.retryAfter(ctx, id, 20*time.Millisecond)
}

func (e *Evaluator) retryAfter(ctx context.Context, id string, d time.Duration) {
	go func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
			e.markDirty(id, trace.SpanContext{})
		}
	}()
}

// trailResult is an evaluation waiting to be saved. A trail that no longer exists only has its
// dirt cleared (doc is nil).
type trailResult struct {
	trailID string
	gen     int64
	state   string
	doc     []byte
	at      float64
	states  map[string]string
	// modifiedAt is the time of the latest evidence read (store.ComplianceSave.ModifiedAt).
	modifiedAt float64
	// orgID and fingerprints name the trail's artifacts, whose verdicts in environments may change with it.
	orgID        string
	fingerprints []string
}

// complianceSave is what the store writes of r.
func (r trailResult) complianceSave() store.ComplianceSave {
	return store.ComplianceSave{TrailID: r.trailID, State: r.state, Doc: r.doc, At: r.at, ArtifactStates: r.states,
		ModifiedAt: r.modifiedAt}
}

// EvaluateTrail recomputes one trail's compliance and saves it.
func (e *Evaluator) EvaluateTrail(ctx context.Context, trailID string) error {
	results, errs := e.evaluateMany(ctx, []string{trailID}, nil)
	if err := errs[trailID]; err != nil {
		return err
	}
	saved, skipped, err := e.save(ctx, results)
	if err != nil {
		return err
	}
	if len(skipped) > 0 {
		return fmt.Errorf("evaluate trail %s: %w", trailID, store.ErrBusy)
	}
	e.notify(nil, fingerprintsByOrg(saved))
	return nil
}

// evaluateMany computes the compliance of trails ids: three queries read what they all start from
// (on PostgreSQL each query is a round trip, and reading trail by trail was most of the
// distributed evaluator's time), then each is evaluated. The trails are read and evaluated outside
// any write transaction (SQLite has one writer, and applying messages must not wait for OPA); only
// the results are written, by save. Reading the generations first makes this safe: a message
// applied meanwhile raises a trail's generation, so it stays dirty and is evaluated again. It
// answers the results and, by trail, the errors of those it could not evaluate.
func (e *Evaluator) evaluateMany(ctx context.Context, ids []string, traces map[string]trace.SpanContext) ([]trailResult, map[string]error) {
	r := e.d.Store
	results, errs, gone := e.evaluateFrom(ctx, r, func(ctx context.Context, trails []string) (map[string][]store.AttestationFact, error) {
		return e.facts.read(ctx, r, trails)
	}, ids, traces)
	for _, id := range gone {
		// The trail is gone: clear its dirt at the generation it has.
		g, err := r.DirtyGeneration(ctx, id)
		if err != nil {
			errs[id] = err
			continue
		}
		results = append(results, trailResult{trailID: id, gen: g})
	}
	return results, errs
}

// factsReader reads trails' facts: factCache.read outside a transaction, readIn inside one.
type factsReader func(ctx context.Context, trails []string) (map[string][]store.AttestationFact, error)

// evaluateFrom reads through r what trails ids start from (their dirt generations and templates,
// their facts through facts, their artifacts) and evaluates each. It answers the results, by
// trail the errors of those it could not read or evaluate, and the trails r does not hold.
func (e *Evaluator) evaluateFrom(ctx context.Context, r store.Reader, facts factsReader, ids []string,
	traces map[string]trace.SpanContext) (results []trailResult, errs map[string]error, gone []string) {
	errs = map[string]error{}
	failAll := func(ids []string, err error) {
		for _, id := range ids {
			errs[id] = err
		}
	}
	starts, err := r.TrailsToEvaluate(ctx, ids)
	if err != nil {
		failAll(ids, err)
		return nil, errs, nil
	}
	present := make([]string, 0, len(ids))
	for _, id := range ids {
		if _, ok := starts[id]; ok {
			present = append(present, id)
		} else {
			gone = append(gone, id)
		}
	}
	if len(present) == 0 {
		return nil, errs, gone
	}
	atts, err := facts(ctx, present)
	if err != nil {
		failAll(present, err)
		return nil, errs, gone
	}
	arts, err := r.TrailArtifactsByIDs(ctx, present)
	if err != nil {
		failAll(present, err)
		return nil, errs, gone
	}
	results = make([]trailResult, 0, len(ids))
	for _, id := range present {
		res, err := e.evaluateTraced(ctx, r, traces[id], id, starts[id], atts[id], arts[id])
		if err != nil {
			errs[id] = err
			continue
		}
		results = append(results, res)
	}
	return results, errs, gone
}

// evaluateTraced is evaluate in a span under sc, when there is a tracer and sc is valid.
func (e *Evaluator) evaluateTraced(ctx context.Context, r store.Reader, sc trace.SpanContext, trailID string, start store.EvaluationStart,
	atts []store.AttestationFact, arts []store.Artifact) (trailResult, error) {
	if e.d.Tracer == nil || !sc.IsValid() {
		return e.evaluate(ctx, r, trailID, start, atts, arts)
	}
	ctx, span := startSpan(under(ctx, sc), e.d.Tracer, "evaluate.trail", attribute.String("veritrail.trail.id", trailID))
	res, err := e.evaluate(ctx, r, trailID, start, atts, arts)
	if err == nil {
		span.SetAttributes(attribute.String("veritrail.compliance", res.state))
	}
	endSpan(span, err)
	return res, err
}

// evaluate computes one trail's compliance from what evaluateMany or evaluateIn read of it; r
// reads its template (a transaction's own, when the template came with its batch).
func (e *Evaluator) evaluate(ctx context.Context, r store.Reader, trailID string, start store.EvaluationStart, atts []store.AttestationFact,
	arts []store.Artifact) (trailResult, error) {
	tmpl, err := e.templateOf(ctx, r, start.TemplateID)
	if err != nil {
		return trailResult{}, err
	}
	folded := e.folds.take(trailID, atts)
	in := template.TrailInput{Attestations: folded.fold.Attestations(), Artifacts: artifactsInput(arts)}
	octx, done := policyRun(ctx, e.d.Tracer, e.d.Metrics, metrics.PolicyTemplate)
	res, err := e.d.Engine.Evaluate(octx, tmpl, in) // the result keeps none of in
	done(err)
	modifiedAt := folded.modifiedAt
	e.folds.put(trailID, folded) // not read after: another evaluation of the trail may take it
	if err != nil {
		return trailResult{}, fmt.Errorf("evaluate trail %s: %w", trailID, err)
	}
	at := e.now()
	doc, states, err := complianceDoc(res, tmpl.ID, at, arts)
	if err != nil {
		return trailResult{}, err
	}
	out := trailResult{trailID: trailID, gen: start.Generation, state: res.State, doc: doc, at: at, states: states,
		modifiedAt: modifiedAt}
	for _, a := range arts {
		out.orgID = a.OrgID
		out.fingerprints = append(out.fingerprints, a.Fingerprint)
		out.modifiedAt = max(out.modifiedAt, a.CreatedAt)
	}
	return out, nil
}

// save writes results in one transaction and clears the dirt each one saw. It answers the
// results it saved. On PostgreSQL an apply in another transaction may hold a trail's row: the
// evaluation of that trail is left unsaved (the apply dirties the trail again, and whoever
// applied it evaluates it after), so saving never waits for a trail. It gives way (store.Tx
// GiveWay) for the environments it judges, which an apply may hold while it waits for a trail
// this transaction holds.
func (e *Evaluator) save(ctx context.Context, results []trailResult) (saved, skipped []trailResult, err error) {
	if len(results) == 0 {
		return nil, nil, nil
	}
	err = e.d.Store.Update(ctx, func(tx store.Tx) error {
		saved, skipped = saved[:0], skipped[:0]
		if err := tx.GiveWay(ctx); err != nil {
			return err
		}
		ids := make([]string, 0, len(results))
		for _, r := range results {
			if r.doc != nil {
				ids = append(ids, r.trailID)
			}
		}
		locked, err := tx.LockTrails(ctx, ids) // trail ID -> its dirt generation now
		if err != nil {
			return err
		}
		saves := make([]store.ComplianceSave, 0, len(results))
		generations := make(map[string]int64, len(results))
		for _, r := range results {
			if r.doc != nil {
				gen, ok := locked[r.trailID]
				if !ok {
					skipped = append(skipped, r) // held by an apply, or deleted meanwhile
					continue
				}
				if dirty := gen != 0; r.gen == 0 || gen != r.gen {
					// The trail was dirtied again since this evaluation read it, or another
					// evaluation (another process's) saved it and cleared the dirt it read: this
					// one may be staler than what is saved, and must not overwrite it.
					if dirty {
						skipped = append(skipped, r)
					}
					continue
				}
				saves = append(saves, r.complianceSave())
			}
			saved = append(saved, r)
			generations[r.trailID] = r.gen
		}
		return e.writeResults(ctx, tx, saves, generations, saved)
	})
	if err != nil {
		return nil, nil, err
	}
	for _, r := range saved {
		if r.doc != nil {
			e.evaluations.Add(1)
		}
	}
	return saved, skipped, nil
}

// writeResults writes trail evaluations in tx: the compliances saves holds, the dirt each saw
// cleared (generations), and what follows from them for the artifacts of saved: the
// announcement, the environments' verdicts and the running changes.
func (e *Evaluator) writeResults(ctx context.Context, tx store.Tx, saves []store.ComplianceSave, generations map[string]int64,
	saved []trailResult) error {
	if err := tx.SaveCompliances(ctx, saves); err != nil {
		return err
	}
	if err := tx.ClearDirtyAll(ctx, generations); err != nil {
		return err
	}
	fps := fingerprintsByOrg(saved)
	if err := tx.Announce(ctx, nil, fps); err != nil {
		return err
	}
	// In the same transaction, so that once the trail reads as evaluated, so do the verdicts it changes.
	if err := e.policies.afterTrails(ctx, tx, fps, e.now()); err != nil {
		return err
	}
	// What the next snapshots show of these artifacts where they run (their trails' states) changed.
	for org, fps := range fps {
		if err := tx.MarkRunningChanged(ctx, org, "", fps); err != nil {
			return err
		}
	}
	return nil
}

// fingerprintsByOrg gathers the fingerprints of the evaluated trails' artifacts.
func fingerprintsByOrg(results []trailResult) map[string][]string {
	out := map[string][]string{}
	for _, r := range results {
		if r.doc != nil && len(r.fingerprints) > 0 {
			out[r.orgID] = append(out[r.orgID], r.fingerprints...)
		}
	}
	return out
}

// Evaluations is the number of trail evaluations performed so far.
func (e *Evaluator) Evaluations() int64 { return e.evaluations.Load() }

func (e *Evaluator) templateOf(ctx context.Context, r store.Reader, id string) (*template.Template, error) {
	if t, ok := e.templates.Get(id); ok {
		return t, nil
	}
	content := ""
	if id != "" {
		var err error
		if content, err = r.Template(ctx, id); err != nil {
			return nil, err
		}
	}
	t, err := template.Parse([]byte(content))
	if err != nil {
		return nil, fmt.Errorf("stored template %s no longer parses: %w", id, err)
	}
	e.templates.Add(id, t)
	return t, nil
}
