package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

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

// session is a signed-in browser: the hash of the API key it signed in with, resolved in each
// organization on every page as the API resolves a key (so a revoked key ends its sessions
// within the API's cache time), and the token its sign-out form carries.
type session struct {
	keyHash []byte
	csrf    string
}

// sessions keeps sessions in the store (store.SessionStore), where every ingest process finds
// them: a browser signed in through one process is signed in behind any other. The cookie's
// token is stored hashed, so the table cannot be replayed as cookies.
type sessions struct {
	store store.SessionStore
	ttl   time.Duration
}

// randomToken is 32 random bytes, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokenHash is how a session's token is stored.
func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// csrfToken is the sign-out form's token of a session: derived from the session's token, which
// only the browser holds, under a label of its own so that it is not the stored hash.
func csrfToken(token string) string {
	h := sha256.Sum256([]byte("veritrail web csrf\x00" + token))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// current is the request's session, if its cookie names a live one.
func (s *Site) current(r *http.Request) (session, bool, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return session{}, false, nil
	}
	w, err := s.sessions.store.SessionByHash(r.Context(), tokenHash(c.Value), unixSeconds(s.clock()))
	if errors.Is(err, store.ErrNotFound) {
		return session{}, false, nil
	}
	if err != nil {
		return session{}, false, fmt.Errorf("look up session: %w", err)
	}
	return session{keyHash: w.KeyHash, csrf: csrfToken(c.Value)}, true, nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

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
	orgs, err := s.keyOrgs(r, keyHashOf(secret))
	if errors.Is(err, errBadKey) {
		s.renderSignIn(w, r, http.StatusUnauthorized, signInData{Next: next, Problem: "This API key is unknown, expired or revoked."})
		return
	}
	if err != nil {
		s.fail(w, r, "sign in", err)
		return
	}
	now := s.clock()
	// Each sign-in also removes the sessions that expired: no sweeper to run, and the table
	// stays as large as the sessions of the last TTL.
	if n, err := s.sessions.store.DeleteExpiredSessions(r.Context(), unixSeconds(now)); err != nil {
		s.log.Warn("web: removing expired sessions failed", "err", err)
	} else if n > 0 {
		s.log.Debug("web: removed expired sessions", "count", n)
	}
	token := randomToken()
	err = s.sessions.store.CreateSession(r.Context(), store.WebSession{TokenHash: tokenHash(token), KeyHash: auth.HashKey(secret),
		CreatedAt: unixSeconds(now), ExpiresAt: unixSeconds(now.Add(s.sessions.ttl))})
	if err != nil {
		s.fail(w, r, "sign in", err)
		return
	}
	s.setCookie(w, sessionCookie, token, 0)
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
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" {
		// The form's token is checked against the cookie's own: an ended session has nothing
		// to end, but a forged form must not sign anyone out either.
		if !sameToken(r.PostForm.Get(csrfField), csrfToken(c.Value)) {
			http.Error(w, "The form expired or came from another site; reload the page", http.StatusForbidden)
			return
		}
		if err := s.sessions.store.DeleteSession(r.Context(), tokenHash(c.Value)); err != nil {
			s.fail(w, r, "sign out", err)
			return
		}
	}
	s.setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
}

var errBadKey = errors.New("unknown, expired or revoked API key")

// keyHashOf is the hash of a key as sent, nil for none.
func keyHashOf(secret string) []byte {
	if secret == "" {
		return nil
	}
	return auth.HashKey(secret)
}

// keyOrgs resolves a key, by its hash, to the organizations it may act in (errBadKey when it
// may act in none).
func (s *Site) keyOrgs(r *http.Request, keyHash []byte) ([]store.Org, error) {
	if len(keyHash) == 0 {
		return nil, errBadKey
	}
	ctx := r.Context()
	k, err := s.store.KeyByHash(ctx, keyHash)
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
	sess, ok, err := s.current(r)
	if err != nil {
		s.fail(w, r, "sign in", err)
		return
	}
	keyHash := sess.keyHash
	if h := r.Header.Get("Authorization"); h != "" {
		keyHash, ok = keyHashOf(strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))), true
	}
	if !ok {
		http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
		return
	}
	orgs, err := s.keyOrgs(r, keyHash)
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
