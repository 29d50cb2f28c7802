// Package web is the web UI behind every html_url the API emits: server-rendered pages
// (html/template, assets embedded in the binary, nothing loaded from elsewhere) that show the
// stored evidence, its compliance and why. Pages are read-only views of the store through the
// API's own authorization (ingest/auth): a browser signs in with an API key and gets a session
// cookie, scripts send the key as "Authorization: Bearer", public organizations are readable
// signed out, and a page of an organization the caller may not read is a 404. Ingest mounts the
// site on the paths of the html_urls (Register).
package web

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/ingest/blobs"
	"github.com/veritrail/veritrail/ingest/limits"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/policyquery"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// Config is the site's configuration.
type Config struct {
	// BaseURL is the API's base URL (ingest.Config.BaseURL): an https one makes the session
	// cookie Secure.
	BaseURL string
	// SessionTTL is how long a sign-in lasts (default 12 h).
	SessionTTL time.Duration
}

// Deps are the site's collaborators, shared with the API.
type Deps struct {
	Store store.Reader
	// Sessions keeps the signed-in browsers, shared by every ingest process of the store.
	Sessions store.SessionStore
	// Auth resolves a key (or an anonymous reader of a public organization) in an organization,
	// as the API's authorization hook does.
	Auth *auth.Authenticator
	// Query answers the policy questions (an artifact's verdicts with their rule evaluations).
	Query *policyquery.Querier
	// Wait waits for the organization's writes acknowledged before a page is read (the API's
	// read after write); nil waits for nothing.
	Wait func(ctx context.Context, p *auth.Principal)
	Log  *slog.Logger
	// Blobs holds the attestations' evidence files, which trail pages offer to download.
	Blobs blobs.Store
	// Notifications reads the notify tier's outcomes and dead letters; nil shows none.
	Notifications NotificationLog
	// Limits are the API's rate limits: a page takes its tokens from the same buckets as an API
	// request of the same key (nil limits nothing). Clock is their time (nil: time.Now).
	Limits *limits.Limiter
	Clock  func() time.Time
}

// Site is the web UI.
type Site struct {
	cfg   Config
	store store.Reader
	auth  *auth.Authenticator
	query *policyquery.Querier
	wait  func(ctx context.Context, p *auth.Principal)
	log   *slog.Logger
	blobs blobs.Store
	// notifications is Deps.Notifications.
	notifications NotificationLog
	limits        *limits.Limiter
	clock         func() time.Time
	sessions      *sessions
	pages         map[string]*template.Template
	secure        bool
	csrf          *http.CrossOriginProtection
}

// New builds the site; it fails only when an embedded template does not parse.
func New(cfg Config, d Deps) (*Site, error) {
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.Wait == nil {
		d.Wait = func(context.Context, *auth.Principal) {}
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	return &Site{cfg: cfg, store: d.Store, auth: d.Auth, query: d.Query, wait: d.Wait, log: d.Log, blobs: d.Blobs, notifications: d.Notifications,
		limits: d.Limits, clock: d.Clock,
		sessions: &sessions{store: d.Sessions, ttl: cfg.SessionTTL}, pages: pages,
		secure: strings.HasPrefix(strings.ToLower(cfg.BaseURL), "https://"),
		csrf:   http.NewCrossOriginProtection()}, nil
}

// parsePages parses each page with the layout it fills.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("web: list templates: %w", err)
	}
	layout := template.New("layout").Funcs(funcs)
	if _, err := layout.ParseFS(templateFiles, "templates/layout.html"); err != nil {
		return nil, fmt.Errorf("web: parse layout: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFiles, n)
		if err != nil {
			return nil, fmt.Errorf("web: parse template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// Register mounts the site's routes on r: the sign-in pages, the assets, and one route per
// form of html_url. Static segments win over parameters in chi, so the API's routes
// (/api/v2/..., /ready, /live) keep theirs.
func (s *Site) Register(r chi.Router) {
	assets, _ := fs.Sub(assetFiles, "assets") // the directory is embedded: Sub cannot fail
	r.Handle("/assets/*", http.StripPrefix("/assets/", cacheAssets(http.FileServerFS(assets))))
	r.Get("/", s.home)
	r.Get("/sign-in", s.signInForm)
	r.Method(http.MethodPost, "/sign-in", s.protect(s.signIn))
	r.Method(http.MethodPost, "/sign-out", s.protect(s.signOut))
	// Public pages show what the API's public operations show (auth.PublicOperation) and are
	// readable signed out in a public organization; the others need a key of the organization
	// there too, as the API's policies, controls, asserts and attestations do.
	r.Get("/{org}", s.page(public, s.orgPage))
	r.Get("/{org}/flows/{flow}", s.page(public, s.flowPage))
	r.Get("/{org}/flows/{flow}/trails/{trail}", s.page(public, s.trailPage))
	r.Get("/{org}/flows/{flow}/trails/{trail}/evidence/{id}", s.evidence)
	r.Get("/{org}/flows/{flow}/artifacts/{fp}", s.page(public, s.artifactPage))
	r.Get("/{org}/environments/{env}", s.page(public, s.environmentPage))
	r.Get("/{org}/environments/{env}/snapshots/{index}", s.page(public, s.snapshotPage))
	r.Get("/{org}/environments/{env}/diff", s.page(public, s.diffPage))
	r.Get("/{org}/policies/{policy}", s.page(private, s.policyPage))
	r.Get("/{org}/controls/{control}", s.page(private, s.controlPage))
	r.Get("/{org}/fingerprints/{fp}", s.page(private, s.fingerprintPage))
	r.Get("/{org}/search", s.page(private, s.searchPage))
	r.Get("/{org}/notifications", s.page(private, s.notificationsPage))
}

// cacheAssets lets browsers keep the assets for an hour: they change only with the binary.
func cacheAssets(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// param is a path parameter, unescaped (names may hold characters a path escapes).
func param(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}
