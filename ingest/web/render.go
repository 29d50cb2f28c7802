package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/ingest/limits"
	"github.com/veritrail/veritrail/internal/store"
)

// view is what the layout renders around a page.
type view struct {
	Title    string
	Org      string // the organization the page belongs to, "" outside one
	SignedIn bool
	CSRF     string // the sign-out form's token (signed in) or the sign-in form's
	Data     any
}

// call is a page request in an organization, authorized.
type call struct {
	r    *http.Request
	p    *auth.Principal
	sess session
	// signedIn says the browser has a session (the layout offers to sign out).
	signedIn bool
}

func (c *call) ctx() context.Context { return c.r.Context() }

// errNotFound makes a page answer 404: no such object in the organization.
var errNotFound = errors.New("not found")

// notFound maps the store's not-found to errNotFound, and wraps other errors with what was read.
func notFound(what string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound
	}
	return fmt.Errorf("%s: %w", what, err)
}

// pageFunc reads what a page shows: its template, title and data.
type pageFunc func(c *call) (tmpl, title string, data any, err error)

// Whether a page is readable by anyone in a public organization.
const (
	public  = true
	private = false
)

// page authorizes a page of the organization in the path the way the API authorizes its reads,
// waits for the organization's writes in flight, and renders what f read.
func (s *Site) page(public bool, f pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, sess, signedIn, ok := s.authorize(w, r, public)
		if !ok {
			return
		}
		c := &call{r: r, p: p, sess: sess, signedIn: signedIn}
		tmpl, title, data, err := f(c)
		if errors.Is(err, errNotFound) {
			s.notFoundPage(w, signedIn, sess)
			return
		}
		if err != nil {
			s.fail(w, r, title, err)
			return
		}
		s.render(w, http.StatusOK, tmpl, view{Title: title, Org: p.Org.Name, SignedIn: signedIn, CSRF: sess.csrf, Data: data})
	}
}

// authorize resolves the caller of a request in the organization of its path (public: an
// anonymous reader of a public organization will do), or answers and reports false.
func (s *Site) authorize(w http.ResponseWriter, r *http.Request, public bool) (*auth.Principal, session, bool, bool) {
	org := param(r, "org")
	sess, signedIn, err := s.current(r)
	if err != nil {
		s.fail(w, r, "authenticate", err)
		return nil, sess, false, false
	}
	var p *auth.Principal
	if header := r.Header.Get("Authorization"); header != "" || !signedIn {
		p, err = s.auth.Authenticate(r.Context(), header, org, public)
	} else {
		p, err = s.auth.AuthenticateHash(r.Context(), sess.keyHash, org, public)
	}
	switch {
	case errors.Is(err, auth.ErrNoKey):
		// The same answer whether or not the organization exists.
		http.Redirect(w, r, "/sign-in?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return nil, sess, signedIn, false
	case errors.Is(err, auth.ErrInvalidKey), errors.Is(err, auth.ErrExpiredKey):
		s.signedOut(w, r)
		return nil, sess, signedIn, false
	case errors.Is(err, auth.ErrDenied):
		s.notFoundPage(w, signedIn, sess)
		return nil, sess, signedIn, false
	case err != nil:
		s.fail(w, r, "authenticate", err)
		return nil, sess, signedIn, false
	}
	if !p.Anonymous && !auth.Allows(p.Role, auth.PrivRead) {
		s.notFoundPage(w, signedIn, sess)
		return nil, sess, signedIn, false
	}
	if !s.withinLimits(w, p) {
		return nil, sess, signedIn, false
	}
	s.wait(r.Context(), p)
	return p, sess, signedIn, true
}

// withinLimits takes a request's tokens from the API's buckets of the key (anonymous readers of
// a public organization share one per organization, as in the API), or answers 429 with
// Retry-After and reports false.
func (s *Site) withinLimits(w http.ResponseWriter, p *auth.Principal) bool {
	if s.limits == nil {
		return true
	}
	keyID := p.KeyID
	if p.Anonymous {
		keyID = "anonymous/" + p.Org.ID
	}
	refused, wait := s.limits.Allow(s.clock(), keyID, p.Org.ID)
	if wait <= 0 {
		return true
	}
	secs := limits.RetryAfter(wait)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	s.problem(w, http.StatusTooManyRequests, "Too many requests",
		fmt.Sprintf("The rate limit of the %s is exceeded; retry in %d s.", refused, secs))
	return false
}

// render writes a page, buffered so that a template error is a 500, not half a page.
func (s *Site) render(w http.ResponseWriter, status int, name string, v view) {
	t, ok := s.pages[name]
	if !ok {
		s.log.Error("web: no such template", "template", name)
		http.Error(w, "Internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		s.log.Error("web: rendering failed", "template", name, "err", err)
		http.Error(w, "Internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// problemData is what an error page shows.
type problemData struct{ Heading, Detail string }

func (s *Site) problem(w http.ResponseWriter, status int, heading, detail string) {
	s.render(w, status, "problem", view{Title: heading, Data: problemData{heading, detail}})
}

// notFoundPage is the answer for a missing object and for an organization the caller may not
// read alike: a page never tells them apart.
func (s *Site) notFoundPage(w http.ResponseWriter, signedIn bool, sess session) {
	s.render(w, http.StatusNotFound, "problem", view{Title: "Not found", SignedIn: signedIn, CSRF: sess.csrf,
		Data: problemData{"Not found", "There is no such page, or your API key may not read it."}})
}

// fail logs err and answers 500 without showing it.
func (s *Site) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.log.ErrorContext(r.Context(), "web: page failed", "path", r.URL.Path, "what", what, "err", err)
	s.problem(w, http.StatusInternalServerError, "Something went wrong", "The page could not be read; try again shortly.")
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"seg":     url.PathEscape,
	"query":   url.QueryEscape,
	"time":    formatTime,
	"isotime": isoTime,
	"short":   short,
	"state":   stateOf,
	"verdict": verdictOf,
	"add":     func(a, b int) int { return a + b },
	"dict":    dict,
	"gotime":  goTime,
	"deref":   func(b *bool) bool { return b != nil && *b },
}

// dict makes a map of its arguments taken in pairs (name, value): several values for a
// template called with one.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, errors.New("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// formatTime shows a Unix time in seconds as UTC; the absolute ISO form goes in a datetime
// attribute (isoTime).
func formatTime(t float64) string {
	if t == 0 {
		return "never"
	}
	return unixTime(t).Format("2006-01-02 15:04:05 UTC")
}

func isoTime(t float64) string {
	if t == 0 {
		return ""
	}
	return unixTime(t).Format(time.RFC3339)
}

func unixTime(t float64) time.Time { return time.UnixMicro(int64(t * 1e6)).UTC() }

// short abbreviates a fingerprint or commit for a table; the full value goes in a title.
func short(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}

// state is a compliance state as the page shows it: a word, an icon and a class, so that the
// state never rests on colour alone.
type state struct{ Word, Icon, Class string }

// stateOf shows a trail's or an artifact's compliance state (COMPLIANT, NON-COMPLIANT,
// INCOMPLETE, MISSING, ...).
func stateOf(s string) state {
	switch strings.ToUpper(s) {
	case "COMPLIANT", "COMPLETE":
		return state{"Compliant", "✔", "ok"}
	case "NON-COMPLIANT", "NON_COMPLIANT":
		return state{"Non-compliant", "✘", "bad"}
	case "MISSING":
		return state{"Missing", "?", "missing"}
	case "", "INCOMPLETE":
		return state{"Incomplete", "…", "pending"}
	}
	return state{strings.ToLower(s), "•", "pending"}
}

// verdictOf shows a yes/no/undecided compliance (a *bool, or a bool).
func verdictOf(v any) state {
	switch b := v.(type) {
	case bool:
		return verdictOf(&b)
	case *bool:
		switch {
		case b == nil:
			return state{"No policy decides", "–", "pending"}
		case *b:
			return state{"Compliant", "✔", "ok"}
		}
		return state{"Non-compliant", "✘", "bad"}
	}
	return state{"No policy decides", "–", "pending"}
}
