// Package ingest is the ingest tier: the HTTP API the Kosli CLI talks to. It authenticates,
// validates every request completely (a bad request is a 4xx naming the field, never a
// half-applied change), stores attachments, and turns each accepted write into one message on
// the bus; it answers 201 only once the bus has made that message durable. Reads are served
// from the store once the organization's writes acknowledged before them are applied and
// evaluated (read after write, for every client of the organization).
//
// This package holds the HTTP resources (one file per resource), the authorization hook, the
// multipart parsing and readiness. Its other jobs are packages of their own: ingest/auth (who
// the caller is), ingest/limits (how much load is accepted), ingest/consistency (read after
// write), ingest/answers (assert answers kept in memory); the compliance of attestation kinds
// and the reads of assert and what-if sit below the tiers (policies/attestkind,
// policies/policyquery).
package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/veritrail/veritrail/ingest/answers"
	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/ingest/blobs"
	"github.com/veritrail/veritrail/ingest/consistency"
	"github.com/veritrail/veritrail/ingest/limits"
	"github.com/veritrail/veritrail/ingest/web"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/health"
	"github.com/veritrail/veritrail/internal/metrics"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/tracing"
	"github.com/veritrail/veritrail/policies/customtype"
	"github.com/veritrail/veritrail/policies/envpolicy"
	"github.com/veritrail/veritrail/policies/policyquery"
	"github.com/veritrail/veritrail/policies/template"
)

// Config is the ingest tier's configuration.
type Config struct {
	// BaseURL prefixes every html_url (the future web UI) and api_url.
	BaseURL string
	// MaxFileBytes bounds attachment_file and template_file (the spec: 10 MB).
	MaxFileBytes int64
	// MaxPartBytes bounds every other multipart part and JSON bodies.
	MaxPartBytes int64
	// ConsistencyWait bounds how long a read waits for the organization's writes in flight
	// (DefaultConsistencyWait when 0).
	ConsistencyWait time.Duration
	// ConsistencyPoll is how often the store is asked while waiting (distributed mode).
	ConsistencyPoll time.Duration
	// Limits sheds load and bounds slow clients; the zero value limits nothing.
	Limits limits.Limits
	// ReadyCache is how long /ready reuses the dependencies' last answer (default 1 s);
	// ReadyTimeout is how long it waits for one (default 2 s).
	ReadyCache   time.Duration
	ReadyTimeout time.Duration
	// AllowPrivateTargets accepts webhook and chat targets at loopback, private and link-local
	// addresses when rules are written. The notify tier's setting of the same name
	// (--notify-allow-private) decides whether they are delivered to; the composition root passes
	// it here.
	AllowPrivateTargets bool
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = 10 << 20
	}
	if c.MaxPartBytes == 0 {
		c.MaxPartBytes = 1 << 20
	}
	if c.ConsistencyWait == 0 {
		c.ConsistencyWait = DefaultConsistencyWait
	}
	if c.ReadyCache == 0 {
		c.ReadyCache = time.Second
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 2 * time.Second
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
}

// DefaultConsistencyWait bounds a read's wait for the organization's writes in flight. It is
// well over the evaluators' Kafka session timeout (6 s by default) and a heartbeat: the
// partitions of an evaluator that died are handed to the others only once its session expires,
// and a shorter bound would serve every read behind them stale while that lasts (the fault
// harness saw it after each kill -9 of an evaluator). While evaluators keep up, reads wait
// milliseconds.
const DefaultConsistencyWait = 15 * time.Second

// Deps are the ingest tier's collaborators.
type Deps struct {
	Store     store.Reader
	Publisher message.Publisher
	Blobs     blobs.Store
	Log       *slog.Logger
	// Identities stores service accounts and keys, which the API writes directly.
	Identities store.IdentityStore
	// Sessions keeps the web UI's signed-in browsers, which the site writes directly.
	Sessions store.SessionStore
	// Now is the clock of key expiry and rate limits; nil means time.Now.
	Now func() time.Time
	// Notifications reads the notify tier's outcomes and dead letters; nil shows none.
	Notifications NotificationLog
	// Policies evaluates environment policies for assert and what-if; nil makes one with default options.
	Policies *envpolicy.Engine
	// Changes, when set, is advanced by an evaluator in this process (around each commit when
	// the evaluator writes through Changes.Watch, else after it through API.Evaluated), or by
	// announcements of one elsewhere; asserts are then answered from memory while what they
	// depend on stands still. Nil: every assert reads the store.
	Changes *answers.Changes
	// Ready are the dependencies /ready answers for (the store, the bus); none: always ready.
	Ready []ReadyCheck
	// Classify tells a store error that can go away on its own (a lost connection, a restarting
	// database) from one that cannot: the first is a 503 with Retry-After, the second a 500. Nil
	// makes every store error a 500.
	Classify func(error) store.ErrorClass
	// Resolver resolves the host names of notification targets; nil is net.DefaultResolver.
	Resolver Resolver
	// Peers, when set, extends read after write to the writes of other ingest processes (the
	// distributed mode); nil when this process is the only one publishing (embedded).
	Peers *consistency.Peers
	// Hurry, when set, is called as a read starts waiting for writes not yet visible: the
	// embedded bus then delivers what it holds at once rather than at the end of its linger
	// (sqlitebus Bus.Hurry). Nil: writes reach the evaluator at the bus's own pace.
	Hurry func()
	// Metrics is where the API's metrics are registered (requests per operation, read-your-writes
	// waits, refusals); nil counts nothing.
	Metrics prometheus.Registerer
	// Tracing, when set, traces every operation (a server span), and the evidence messages carry
	// the span's context to the evaluator; nil traces nothing and costs nothing.
	Tracing trace.TracerProvider
}

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// API is the HTTP API.
type API struct {
	cfg     Config
	store   store.Reader
	pub     message.Publisher
	blobs   blobs.Store
	log     *slog.Logger
	tracker *consistency.Tracker
	peers   *consistency.Peers
	huma    huma.API
	mux     *chi.Mux
	types   *typeCache
	// notifications is Deps.Notifications.
	notifications NotificationLog
	// query answers assert and what-if from the stored evidence and policies, evaluating environment policies on
	// the fly (assert of an artifact not running, what-if).
	query *policyquery.Querier
	// answers keeps encoded assert answers while the evaluator's state stands still.
	answers *answers.Cache
	// trailRefs caches resolved (organization, flow, trail) names briefly (see trailRefTTL).
	trailRefs *expirable.LRU[trailRefKey, store.TrailRef]
	// auth resolves callers (keys, anonymous readers), caching them briefly.
	auth       *auth.Authenticator
	identities store.IdentityStore
	clock      func() time.Time
	limits     *limits.Limiter
	ready      *health.Checker
	classify   func(error) store.ErrorClass
	resolver   Resolver
	// httpMetrics and metrics are nil without Deps.Metrics.
	httpMetrics *metrics.HTTP
	metrics     *metrics.Ingest
	// tracer is nil without Deps.Tracing.
	tracer trace.Tracer
}

// New builds the API and registers every operation. The same function serves main, the
// tests and the OpenAPI export.
func New(cfg Config, d Deps) *API {
	cfg.Defaults()
	installErrorModel()
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Resolver == nil {
		d.Resolver = net.DefaultResolver
	}
	a := &API{cfg: cfg, store: d.Store, pub: d.Publisher, blobs: d.Blobs, log: d.Log, mux: chi.NewRouter(), types: newTypeCache(),
		identities: d.Identities, clock: d.Now, limits: limits.NewLimiter(cfg.Limits), auth: auth.NewAuthenticator(d.Store, d.Now),
		notifications: d.Notifications, ready: health.NewChecker(d.Ready, cfg.ReadyCache, cfg.ReadyTimeout, d.Log), classify: d.Classify,
		resolver: d.Resolver}
	a.tracker = consistency.NewTracker(d.Store, cfg.ConsistencyWait, cfg.ConsistencyPoll, d.Log, d.Hurry)
	if d.Peers != nil {
		d.Peers.Track(a.tracker)
		a.peers = d.Peers
	}
	a.trailRefs = expirable.NewLRU[trailRefKey, store.TrailRef](trailRefCacheSize, nil, trailRefTTL)
	a.answers = answers.NewCache(d.Changes)
	if d.Policies == nil {
		d.Policies = envpolicy.NewEngine(envpolicy.Options{})
	}
	a.query = policyquery.New(d.Store, d.Policies, d.Log)

	a.mux.Use(func(next http.Handler) http.Handler { return limits.BoundTransfers(cfg.Limits, next) })
	if d.Tracing != nil {
		a.tracer = d.Tracing.Tracer("github.com/veritrail/veritrail/ingest")
	}
	a.mux.Use(a.traceRequests) // outside recoverPanics, so that a panic's log line names the trace
	a.mux.Use(a.recoverPanics)
	a.mux.Use(joinRepoName) // before routing: a repository name may span several segments

	hc := huma.DefaultConfig("Veritrail API", "2.0")
	hc.Info.Description = "Supply-chain compliance evidence: flows, trails, artifacts, attestations. Speaks the Kosli API v2."
	hc.OpenAPIPath = "/api/v2/openapi"
	hc.DocsPath = "" // the docs page loads scripts from a CDN, unreachable offline
	hc.SchemasPath = "/api/v2/schemas"
	hc.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "Personal or service-account API key"},
		"basic":  {Type: "http", Scheme: "basic", Description: "Legacy: the API key as user name, any password"},
	}
	hc.CreateHooks = nil // no $schema links in responses: the CLI compares bodies
	hc.Formats = map[string]huma.Format{"application/json": checkedJSON(), "json": checkedJSON()}
	// chi, not net/http's mux: the Kosli paths need static segments to win over parameters
	// (/artifacts/{org}/{flow}/fingerprint/{fp} beside /artifacts/{org}/{flow}/{fp}/latest_commit).
	a.huma = humachi.New(a.mux, hc)
	a.huma.UseMiddleware(a.observe)   // first: it times and counts what the others answer too
	a.huma.UseMiddleware(checkParams) // before authorize, which looks the organization up by name
	a.huma.UseMiddleware(a.authorize)

	a.registerFlows()
	a.registerFlowWhatIf()
	a.registerTrails()
	a.registerArtifacts()
	a.registerAttestations()
	a.registerCustomTypes()
	a.registerEnvironments()
	a.registerApprovals()
	a.registerTags()
	a.registerControls()
	a.registerSnapshots()
	a.registerServiceAccounts()
	a.registerAPIKeys()
	a.registerAudit()
	a.registerRejected()
	a.registerNotifications()
	a.registerPolicies()
	a.registerAsserts()
	a.registerUsers()
	a.registerRepos()
	declareUpdates(a.huma)
	declareErrors(a.huma)

	if d.Metrics != nil {
		a.httpMetrics = metrics.NewHTTP(d.Metrics, a.operationIDs())
		a.metrics = metrics.NewIngest(d.Metrics)
	}

	// The web UI behind the html_urls, on the same authorization and read after write.
	site, err := web.New(web.Config{BaseURL: cfg.BaseURL}, web.Deps{Store: d.Store, Sessions: d.Sessions, Auth: a.auth, Query: a.query, Log: d.Log, Blobs: d.Blobs,
		Notifications: d.Notifications, Limits: a.limits, Clock: a.clock,
		Wait: func(ctx context.Context, p *Principal) { a.awaitWrites(ctx, p) }})
	if err != nil {
		panic(err) // the templates are compiled in, and web's tests parse them
	}
	site.Register(a.mux)

	a.mux.Get("/ready", a.serveReady)
	a.mux.Get("/live", serveLive)
	a.mux.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, &Error{Message: fmt.Sprintf("Not found: %s %s", r.Method, r.URL.Path)})
	})
	a.mux.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, &Error{Message: fmt.Sprintf("Method %s is not allowed on %s", r.Method, r.URL.Path)})
	})
	return a
}

// Handler is the HTTP handler of the API. When the base URL carries a path (http://host/vt),
// everything is served under that path as well as at the root: the Kosli CLI given
// --host http://host/vt sends /vt/api/v2/..., the html_urls point under /vt, and a proxy
// that strips the prefix still works.
func (a *API) Handler() http.Handler {
	prefix := ""
	if u, err := url.Parse(a.cfg.BaseURL); err == nil {
		prefix = strings.TrimRight(u.Path, "/")
	}
	if prefix == "" {
		return a.mux
	}
	return underPrefix(prefix, a.mux)
}

// underPrefix serves next at the root and under prefix (which has no trailing slash).
func underPrefix(prefix string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok || (rest != "" && rest[0] != '/') {
			next.ServeHTTP(w, r)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path = "/" + strings.TrimPrefix(rest, "/")
		if raw, ok := strings.CutPrefix(u.RawPath, prefix); ok {
			u.RawPath = "/" + strings.TrimPrefix(raw, "/")
		} else {
			u.RawPath = ""
		}
		r2.URL = &u
		next.ServeHTTP(w, r2)
	})
}

// OpenAPI is the API description.
func (a *API) OpenAPI() *huma.OpenAPI { return a.huma.OpenAPI() }

// Tracker is the read-your-writes tracker; the embedded mode wires the evaluator's
// notifications into it.
func (a *API) Tracker() *consistency.Tracker { return a.tracker }

// Evaluated is what an evaluator in this process calls after each commit, with what the commit
// changed (see Changes.Advance): it advances Deps.Changes before it wakes the read-your-writes
// waiters, so that a reader woken by a commit never gets an answer computed before it.
func (a *API) Evaluated(orgs []string, artifacts map[string][]string) {
	a.answers.Evaluated(orgs, artifacts)
	a.tracker.Notify()
}

// recoverPanics turns a handler panic into a logged 500 with the error body, instead of a
// dropped connection the client would retry blindly.
func (a *API) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.log.ErrorContext(r.Context(), "ingest: panic while handling a request", "method", r.Method, "path", r.URL.Path, "panic", v,
					"stack", string(debug.Stack()))
				writeJSON(w, http.StatusInternalServerError, apiError(http.StatusInternalServerError, "Internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *API) writeErr(ctx huma.Context, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = a.internal(ctx.Context(), "request", err)
	}
	if s := e.retryAfter(); s > 0 {
		ctx.SetHeader("Retry-After", strconv.Itoa(s))
	}
	ctx.SetHeader("Content-Type", "application/json")
	ctx.SetStatus(e.Status)
	_ = json.NewEncoder(ctx.BodyWriter()).Encode(e)
}

// internal logs err and returns a 500 that does not leak it, or a 503 with Retry-After when the
// store says the error can go away on its own (its connection was cut, it is restarting): the
// client's retry will likely succeed, and a 500 would tell it not to bother.
func (a *API) internal(ctx context.Context, what string, err error) *Error {
	if a.classify != nil && a.classify(err) == store.ClassTransient {
		a.log.WarnContext(ctx, "ingest: store unavailable", "what", what, "err", err)
		e := apiError(http.StatusServiceUnavailable, "Service unavailable while trying to %s; please retry", what)
		e.RetryAfter = 1
		return e
	}
	a.log.ErrorContext(ctx, "ingest: internal error", "what", what, "err", err)
	return apiError(http.StatusInternalServerError, "Internal error while trying to %s", what)
}

// op declares an operation with the privilege it needs; authorize enforces it. Whether
// anonymous callers may use it in a public organization is declared by auth.PublicOperation.
func op(method, path, id string, need Privilege, summary string, tags ...string) huma.Operation {
	o := huma.Operation{
		OperationID: id,
		Method:      method,
		Path:        "/api/v2" + path,
		Summary:     summary,
		Tags:        tags,
		Metadata:    map[string]any{privilegeKey: need},
		Extensions:  map[string]any{"x-veritrail-privilege": string(need)},
		Security:    []map[string][]string{{"bearer": {}}, {"basic": {}}},
		Errors:      []int{400, 401, 403, 404, 429},
	}
	if auth.PublicOperation(id) {
		if need != PrivRead {
			panic(fmt.Sprintf("ingest: operation %s is public but needs the %s privilege", id, need))
		}
		o.Metadata[publicKey] = true
		o.Extensions["x-veritrail-public"] = true
		o.Security = append(o.Security, map[string][]string{}) // no key, in a public organization
	}
	return o
}

// publish makes env durable on the bus and remembers it for the caller's next read.
func (a *API) publish(ctx context.Context, p *Principal, env *contract.Envelope) error {
	env.ID = newID()
	env.OrgID = p.Org.ID
	env.Actor = contract.Actor{KeyID: p.KeyID, Name: p.Name}
	env.At = now()
	env.Request = requestFrom(ctx)
	payload, err := contract.Marshal(env)
	if err != nil {
		return a.internal(ctx, "encode message", err)
	}
	msg := message.NewMessage(env.ID, payload)
	msg.Metadata.Set(contract.MetaPartitionKey, env.PartitionKey())
	msg.Metadata.Set(contract.MetaKind, string(env.Kind))
	msg.Metadata.Set(contract.MetaOrg, env.OrgID)
	msg.Metadata.Set(contract.MetaSchema, fmt.Sprint(contract.SchemaVersion))
	if a.tracer != nil {
		tracing.Inject(ctx, msg.Metadata) // the request's span: the evaluator continues it
	}
	if a.peers != nil {
		// Other ingest processes' readers must know this organization has writes of these
		// scopes in flight here before the 201.
		done, err := a.peers.Publishing(ctx, p.Org.ID, env.Scopes()...)
		if err != nil {
			a.log.ErrorContext(ctx, "ingest: marking writes in flight failed", "org", p.Org.ID, "err", err)
			return apiError(http.StatusServiceUnavailable, "Could not record the request durably; please retry")
		}
		defer done() // after Published below
	}
	if err := a.pub.Publish(contract.TopicEvidence, msg); err != nil {
		a.log.ErrorContext(ctx, "ingest: publish failed", "kind", env.Kind, "err", err)
		return unavailable("Could not record the request durably; please retry")
	}
	a.tracker.Published(p.Org.ID, env.ID, env.Scopes()...)
	return nil
}

func now() float64 { return float64(time.Now().UnixMicro()) / 1e6 }

func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// awaitWrites waits until the organization's writes acknowledged before the call are visible
// (read after write, for every client of the organization), here and at the other ingest
// processes, and reports whether any were in flight.
func (a *API) awaitWrites(ctx context.Context, p *Principal) bool {
	waited, _ := a.await(ctx, p, func() bool { return a.tracker.Wait(ctx, p.Org.ID) }, nil, true)
	return waited
}

// awaitScopes is awaitWrites for a read that depends only on scopes of the organization (see
// contract.Envelope.Scopes): it waits for the writes of those scopes and the unscoped writes,
// here and, with peers, at the other ingest processes. It reports whether any were in flight,
// and whether the read is done with the other processes (Peers.Wait): a read that learns more
// scopes afterwards waits for those there only when it is not.
func (a *API) awaitScopes(ctx context.Context, p *Principal, scopes []string, peers bool) (waited, peersDone bool) {
	if scopes == nil {
		scopes = []string{} // the unscoped writes only; nil is all of the organization (await)
	}
	return a.await(ctx, p, func() bool { return a.tracker.WaitScoped(ctx, p.Org.ID, scopes) }, scopes, peers)
}

// await runs local, this process's wait, then with peers the wait for other ingest processes
// (for scopes, or all of the organization when nil), and counts the read as waiting when either
// had writes in flight.
func (a *API) await(ctx context.Context, p *Principal, local func() bool, scopes []string, peers bool) (waited, peersDone bool) {
	start := time.Now()
	waited, peersDone = local(), true
	if peers && a.peers != nil {
		var w bool
		w, peersDone = a.peers.Wait(ctx, p.Org.ID, scopes, start.Add(a.cfg.ConsistencyWait))
		waited = w || waited
	}
	if waited {
		a.metrics.Waited(time.Since(start))
	}
	return waited, peersDone
}

// lookup runs find, and when it finds nothing waits once for the organization's writes in
// flight and tries again: a flow created a moment ago by another job of the pipeline must be
// found.
func lookup[T any](ctx context.Context, a *API, p *Principal, find func() (T, error)) (T, error) {
	v, err := find()
	if errors.Is(err, store.ErrNotFound) && a.awaitWrites(ctx, p) {
		v, err = find()
	}
	return v, err
}

func (a *API) flowByName(ctx context.Context, p *Principal, name string) (store.Flow, error) {
	f, err := lookup(ctx, a, p, func() (store.Flow, error) { return a.store.FlowByName(ctx, p.Org.ID, name) })
	if errors.Is(err, store.ErrNotFound) {
		return f, apiError(http.StatusNotFound, "Flow named '%s' does not exist for organization '%s'", name, p.Org.Name)
	}
	if err != nil {
		return f, a.internal(ctx, "look up flow", err)
	}
	return f, nil
}

func (a *API) trailByName(ctx context.Context, p *Principal, flow store.Flow, name string) (store.Trail, error) {
	t, err := lookup(ctx, a, p, func() (store.Trail, error) { return a.store.TrailByName(ctx, flow.ID, name) })
	if errors.Is(err, store.ErrNotFound) {
		return t, apiError(http.StatusNotFound, "Trail with name '%s' does not exist for Organization '%s' and Flow '%s'", name, p.Org.Name, flow.Name)
	}
	if err != nil {
		return t, a.internal(ctx, "look up trail", err)
	}
	return t, nil
}

// trailRefTTL is how long a resolved trail name is used without asking the store again: every
// attestation names its flow and trail, and resolving them was a tenth of ingest's CPU. A flow
// renamed or archived meanwhile still takes evidence under its old name for that long (the
// evaluator stores it in the trail, which archiving keeps), as a revoked key still works for
// principalTTL.
const (
	trailRefTTL       = 2 * time.Second
	trailRefCacheSize = 16384
)

type trailRefKey struct{ org, flow, trail string }

// trailRef resolves a flow and one of its trails by name for a write, which needs only their IDs:
// one lookup that reads neither record whole, cached for trailRefTTL.
func (a *API) trailRef(ctx context.Context, p *Principal, flowName, trailName string) (store.TrailRef, error) {
	key := trailRefKey{p.Org.ID, flowName, trailName}
	if ref, ok := a.trailRefs.Get(key); ok {
		return ref, nil
	}
	ref, err := lookup(ctx, a, p, func() (store.TrailRef, error) {
		ref, err := a.store.TrailRef(ctx, p.Org.ID, flowName, trailName)
		if err == nil && ref.TrailID == "" {
			err = store.ErrNotFound // so that lookup waits for the caller's pending writes
		}
		return ref, err
	})
	switch {
	case errors.Is(err, store.ErrNotFound) && ref.FlowID == "":
		return ref, apiError(http.StatusNotFound, "Flow named '%s' does not exist for organization '%s'", flowName, p.Org.Name)
	case errors.Is(err, store.ErrNotFound):
		return ref, apiError(http.StatusNotFound, "Trail with name '%s' does not exist for Organization '%s' and Flow '%s'", trailName, p.Org.Name, flowName)
	case err != nil:
		return ref, a.internal(ctx, "look up trail", err)
	}
	a.trailRefs.Add(key, ref)
	return ref, nil
}

// flowAndTrail resolves a flow and one of its trails by name.
func (a *API) flowAndTrail(ctx context.Context, p *Principal, flowName, trailName string) (store.Flow, store.Trail, error) {
	flow, err := a.flowByName(ctx, p, flowName)
	if err != nil {
		return flow, store.Trail{}, err
	}
	tr, err := a.trailByName(ctx, p, flow, trailName)
	return flow, tr, err
}

// parseTemplate validates a template file and words its problems as the hosted service does:
// "Input payload validation failed" with the fields for create flow; for begin trail (forTrail)
// pydantic's "<N> validation errors for Template" and a line per problem, which the CLI looks for.
func parseTemplate(field string, content []byte, forTrail bool) (*template.Template, error) {
	if msg := textPartProblem(content); msg != "" {
		return nil, fieldError(field, "%s", msg)
	}
	t, err := template.Parse(content)
	var ve *template.ValidationError
	if errors.As(err, &ve) {
		fields := make(map[string]string, len(ve.Fields))
		for k, v := range ve.Fields {
			if k != field { // syntax errors are already keyed by the part
				k = field + "." + k
			}
			fields[k] = v
		}
		if len(fields) == 0 {
			fields[field] = err.Error()
		}
		msg := "Input payload validation failed"
		if forTrail {
			msg = templateErrors(fields)
		}
		return nil, &Error{Status: http.StatusBadRequest, Message: msg, Errors: fields}
	}
	if err != nil {
		return nil, fieldError(field, "%v", err)
	}
	return t, nil
}

// compileType compiles a stored custom type version, caching by content.
func (a *API) compileType(v store.CustomTypeVersion) (*customtype.Type, error) {
	return a.types.get(v)
}
