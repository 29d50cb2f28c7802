package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/internal/store"
)

const (
	sessionCookie = "vt_session"
	// csrfCookie holds the token the sign-in form must echo (a double-submit cookie): before
	// signing in there is no session to bind it to.
	csrfCookie = "vt_csrf"
	csrfField  = "csrf_token"
)

// session is a signed-in browser: the API key it signed in with, resolved in each organization
// on every page as the API resolves it (so a revoked key stops working within the API's cache
// time), and the token its sign-out form carries.
type session struct {
	secret string
	csrf   string
}

// sessions are kept in this process's memory: a restart signs every browser out, and several
// ingest processes behind one address need the load balancer to keep a browser on one of them.
type sessions struct {
	byID *expirable.LRU[string, session]
}

func newSessions(size int, ttl time.Duration) *sessions {
	return &sessions{byID: expirable.NewLRU[string, session](size, nil, ttl)}
}

// randomToken is 32 random bytes, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// current is the request's session, if its cookie names one.
func (s *Site) current(r *http.Request) (session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return session{}, false
	}
	return s.sessions.byID.Get(c.Value)
}

func (s *Site) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: s.secure, SameSite: http.SameSiteLaxMode})
}

// protect guards a form that changes state against cross-site requests twice: the browser's
// Sec-Fetch-Site and Origin headers (net/http's CrossOriginProtection), and a token the form
// must echo (for browsers that send neither header).
func (s *Site) protect(h http.HandlerFunc) http.Handler {
	return s.csrf.Handler(h)
}

func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// signInData is what the sign-in page shows.
type signInData struct {
	Next    string
	Problem string
}

// signInForm shows the sign-in form with a fresh CSRF token in a cookie.
func (s *Site) signInForm(w http.ResponseWriter, r *http.Request) {
	s.renderSignIn(w, r, http.StatusOK, signInData{Next: localPath(r.URL.Query().Get("next"))})
}

func (s *Site) renderSignIn(w http.ResponseWriter, r *http.Request, status int, d signInData) {
	token := ""
	if c, err := r.Cookie(csrfCookie); err == nil && c.Value != "" {
		token = c.Value
	} else {
		token = randomToken()
		s.setCookie(w, csrfCookie, token, 0)
	}
	s.render(w, status, "signin", view{Title: "Sign in", CSRF: token, Data: d})
}

// signIn checks the key and starts a session; the browser goes on to the page it came from, or
// to its organization.
func (s *Site) signIn(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "Bad form", http.StatusBadRequest)
		return
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || !sameToken(r.PostForm.Get(csrfField), c.Value) {
		http.Error(w, "The form expired or came from another site; reload the sign-in page", http.StatusForbidden)
		return
	}
	next := localPath(r.PostForm.Get("next"))
	secret := strings.TrimSpace(r.PostForm.Get("api_key"))
	orgs, err := s.keyOrgs(r, secret)
	if errors.Is(err, errBadKey) {
		s.renderSignIn(w, r, http.StatusUnauthorized, signInData{Next: next, Problem: "This API key is unknown, expired or revoked."})
		return
	}
	if err != nil {
		s.fail(w, r, "sign in", err)
		return
	}
	id := randomToken()
	s.sessions.byID.Add(id, session{secret: secret, csrf: randomToken()})
	s.setCookie(w, sessionCookie, id, 0)
	if next == "" {
		next = "/"
		if len(orgs) == 1 {
			next = "/" + url.PathEscape(orgs[0].Name)
		}
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut ends the session.
func (s *Site) signOut(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "Bad form", http.StatusBadRequest)
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if sess, ok := s.sessions.byID.Get(c.Value); ok {
			if !sameToken(r.PostForm.Get(csrfField), sess.csrf) {
				http.Error(w, "The form expired or came from another site; reload the page", http.StatusForbidden)
				return
			}
			s.sessions.byID.Remove(c.Value)
		}
	}
	s.setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
}

var errBadKey = errors.New("unknown, expired or revoked API key")

// keyOrgs resolves a key to the organizations it may act in (errBadKey when it may act in none).
func (s *Site) keyOrgs(r *http.Request, secret string) ([]store.Org, error) {
	if secret == "" {
		return nil, errBadKey
	}
	ctx := r.Context()
	k, err := s.store.KeyByHash(ctx, auth.HashKey(secret))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errBadKey
	}
	if err != nil {
		return nil, err
	}
	if k.Revoked || (k.ExpiresAt > 0 && float64(time.Now().UnixMicro())/1e6 >= k.ExpiresAt) {
		return nil, errBadKey
	}
	switch {
	case k.OrgID != "":
		o, err := s.store.OrgByID(ctx, k.OrgID)
		if err != nil {
			return nil, err
		}
		return []store.Org{o}, nil
	case k.UserID != "":
		return s.store.UserOrgs(ctx, k.UserID)
	}
	return nil, errBadKey
}

// home lists the organizations of the signed-in key, or asks to sign in.
func (s *Site) home(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.current(r)
	secret := sess.secret
	if h := r.Header.Get("Authorization"); h != "" {
		secret, ok = strings.TrimPrefix(h, "Bearer "), true
	}
	if !ok {
		http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
		return
	}
	orgs, err := s.keyOrgs(r, secret)
	if errors.Is(err, errBadKey) {
		s.signedOut(w, r)
		return
	}
	if err != nil {
		s.fail(w, r, "list organizations", err)
		return
	}
	s.render(w, http.StatusOK, "home", view{Title: "Organizations", SignedIn: true, CSRF: sess.csrf, Data: orgs})
}

// signedOut sends a browser whose session ended to the sign-in page, back here afterwards.
func (s *Site) signedOut(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		s.problem(w, http.StatusUnauthorized, "Invalid API key", "The API key sent is unknown, expired or revoked.")
		return
	}
	s.setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/sign-in?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
}

// localPath is next when it is a path of this site, else "": a sign-in must not send the
// browser elsewhere.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return ""
	}
	return next
}
