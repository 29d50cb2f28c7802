package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/ingest/limits"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore/sqlitetest"
)

// fakeStore is the little of the store signing in and the organization page read: two
// organizations, one public, and one key of the private one. Any other read panics (the
// embedded interface is nil), so a test that reaches one fails loudly.
type fakeStore struct {
	store.Reader
}

var (
	privateOrg = store.Org{ID: "o1", Name: "acme"}
	publicOrg  = store.Org{ID: "o2", Name: "open", Public: true}
	theKey     = "vt_web_test_key"
)

func (fakeStore) OrgByName(_ context.Context, name string) (store.Org, error) {
	for _, o := range []store.Org{privateOrg, publicOrg} {
		if o.Name == name {
			return o, nil
		}
	}
	return store.Org{}, store.ErrNotFound
}

func (fakeStore) OrgByID(_ context.Context, id string) (store.Org, error) {
	for _, o := range []store.Org{privateOrg, publicOrg} {
		if o.ID == id {
			return o, nil
		}
	}
	return store.Org{}, store.ErrNotFound
}

func (fakeStore) KeyByHash(_ context.Context, h []byte) (store.APIKey, error) {
	if string(h) == string(auth.HashKey(theKey)) {
		return store.APIKey{ID: "k1", Hash: h, OrgID: privateOrg.ID, Name: "ci", Role: store.RoleReader}, nil
	}
	return store.APIKey{}, store.ErrNotFound
}

func (fakeStore) ListFlows(context.Context, string, store.FlowFilter) ([]store.Flow, int, error) {
	return nil, 0, nil
}

func (fakeStore) ListTrails(context.Context, string, store.TrailFilter) ([]store.Trail, int, error) {
	return nil, 0, nil
}

func (fakeStore) ListEnvironments(context.Context, string, store.Page) ([]store.Environment, int, error) {
	return nil, 0, nil
}

func newTestSite(t *testing.T, base string) http.Handler {
	t.Helper()
	h, _ := newTestSiteWith(t, base, sqlitetest.Open(t), time.Now)
	return h
}

func newTestSiteWith(t *testing.T, base string, sessions store.SessionStore, clock func() time.Time) (http.Handler, *Site) {
	t.Helper()
	st := fakeStore{}
	s, err := New(Config{BaseURL: base}, Deps{Store: st, Sessions: sessions, Auth: auth.NewAuthenticator(st, time.Now), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	s.Register(r)
	return r, s
}

func serve(h http.Handler, req *http.Request) *http.Response {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// signInForm gets the sign-in form and returns its CSRF cookie.
func signInForm(t *testing.T, h http.Handler) *http.Cookie {
	t.Helper()
	resp := serve(h, httptest.NewRequest(http.MethodGet, "/sign-in", nil))
	c := cookieNamed(resp, csrfCookie)
	if resp.StatusCode != http.StatusOK || c == nil || c.Value == "" {
		t.Fatalf("sign-in form: %d, csrf cookie %v", resp.StatusCode, c)
	}
	return c
}

func postForm(path string, form url.Values, cookies ...*http.Cookie) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	return req
}

func TestSignInStartsASession(t *testing.T) {
	for _, tc := range []struct {
		base   string
		secure bool
	}{{"http://veritrail.test", false}, {"https://veritrail.example", true}} {
		h := newTestSite(t, tc.base)
		csrf := signInForm(t, h)
		resp := serve(h, postForm("/sign-in", url.Values{csrfField: {csrf.Value}, "api_key": {theKey}}, csrf))
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/acme" {
			t.Fatalf("%s: sign in: %d to %q", tc.base, resp.StatusCode, resp.Header.Get("Location"))
		}
		c := cookieNamed(resp, sessionCookie)
		if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure != tc.secure || c.Path != "/" {
			t.Fatalf("%s: session cookie %+v, want HttpOnly, SameSite=Lax, Secure=%v", tc.base, c, tc.secure)
		}
		// The session reads the organization's pages; a page elsewhere is 404.
		get := func(path string) *http.Response {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.AddCookie(c)
			return serve(h, req)
		}
		if resp := get("/acme"); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: organization page signed in: %d", tc.base, resp.StatusCode)
		}
		if resp := get("/nowhere"); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: another organization signed in: %d, want 404", tc.base, resp.StatusCode)
		}
	}
}

// TestSessionsAreStoredHashed: the store holds the hash of the cookie's token and of the key,
// never either itself; a session ends when it expires, and the next sign-in removes it.
func TestSessionsAreStoredHashed(t *testing.T) {
	st := sqlitetest.Open(t)
	now := time.Unix(1_700_000_000, 0)
	h, _ := newTestSiteWith(t, "http://veritrail.test", st, func() time.Time { return now })
	signIn := func() *http.Cookie {
		csrf := signInForm(t, h)
		c := cookieNamed(serve(h, postForm("/sign-in", url.Values{csrfField: {csrf.Value}, "api_key": {theKey}}, csrf)), sessionCookie)
		if c == nil {
			t.Fatal("no session cookie")
		}
		return c
	}
	first := signIn()
	var token, key []byte
	var expires float64
	if err := st.DB().QueryRow(`SELECT token_hash, key_hash, expires_at FROM web_sessions`).Scan(&token, &key, &expires); err != nil {
		t.Fatal(err)
	}
	if string(token) != string(tokenHash(first.Value)) || string(key) != string(auth.HashKey(theKey)) {
		t.Fatalf("stored token %x and key %x, want their hashes", token, key)
	}
	if want := unixSeconds(now.Add(12 * time.Hour)); expires != want {
		t.Fatalf("expires at %v, want %v", expires, want)
	}
	get := func(c *http.Cookie) *http.Response {
		req := httptest.NewRequest(http.MethodGet, "/acme", nil)
		req.AddCookie(c)
		return serve(h, req)
	}
	if resp := get(first); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed in: %d", resp.StatusCode)
	}
	now = now.Add(12 * time.Hour)
	if resp := get(first); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("an expired session: %d, want the sign-in page", resp.StatusCode)
	}
	second := signIn()
	var n int
	if err := st.DB().QueryRow(`SELECT COUNT(*) FROM web_sessions`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("sessions after the next sign-in = %d, %v; want the new one only", n, err)
	}
	if resp := get(second); resp.StatusCode != http.StatusOK {
		t.Fatalf("the new session: %d", resp.StatusCode)
	}
}

func TestSignInRefusesForgedForms(t *testing.T) {
	h := newTestSite(t, "http://veritrail.test")
	csrf := signInForm(t, h)
	for name, req := range map[string]*http.Request{
		"no token":    postForm("/sign-in", url.Values{"api_key": {theKey}}, csrf),
		"no cookie":   postForm("/sign-in", url.Values{csrfField: {csrf.Value}, "api_key": {theKey}}),
		"wrong token": postForm("/sign-in", url.Values{csrfField: {"forged"}, "api_key": {theKey}}, csrf),
		"cross-site": func() *http.Request {
			r := postForm("/sign-in", url.Values{csrfField: {csrf.Value}, "api_key": {theKey}}, csrf)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			return r
		}(),
	} {
		resp := serve(h, req)
		if resp.StatusCode != http.StatusForbidden || cookieNamed(resp, sessionCookie) != nil {
			t.Errorf("%s: %d, want 403 and no session", name, resp.StatusCode)
		}
	}
	resp := serve(h, postForm("/sign-in", url.Values{csrfField: {csrf.Value}, "api_key": {"vt_unknown"}}, csrf))
	if resp.StatusCode != http.StatusUnauthorized || cookieNamed(resp, sessionCookie) != nil {
		t.Errorf("unknown key: %d, want 401 and no session", resp.StatusCode)
	}
}

func TestSignOutEndsTheSession(t *testing.T) {
	h := newTestSite(t, "http://veritrail.test")
	csrf := signInForm(t, h)
	session := cookieNamed(serve(h, postForm("/sign-in", url.Values{csrfField: {csrf.Value}, "api_key": {theKey}}, csrf)), sessionCookie)
	// The sign-out form carries the session's own token: the sign-in token does not do.
	req := httptest.NewRequest(http.MethodGet, "/acme", nil)
	req.AddCookie(session)
	page := httptest.NewRecorder()
	h.ServeHTTP(page, req)
	m := strings.SplitN(page.Body.String(), `name="csrf_token" value="`, 2)
	if len(m) != 2 {
		t.Fatalf("no sign-out form on the page:\n%s", page.Body)
	}
	token, _, _ := strings.Cut(m[1], `"`)
	if resp := serve(h, postForm("/sign-out", url.Values{csrfField: {csrf.Value}}, session)); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign out with the sign-in token: %d, want 403", resp.StatusCode)
	}
	resp := serve(h, postForm("/sign-out", url.Values{csrfField: {token}}, session))
	if c := cookieNamed(resp, sessionCookie); resp.StatusCode != http.StatusSeeOther || c == nil || c.MaxAge >= 0 {
		t.Fatalf("sign out: %d, cookie %+v", resp.StatusCode, c)
	}
	req = httptest.NewRequest(http.MethodGet, "/acme", nil)
	req.AddCookie(session)
	if resp := serve(h, req); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/sign-in") {
		t.Fatalf("the old session after signing out: %d to %q, want the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestAccessWithoutSession(t *testing.T) {
	h := newTestSite(t, "http://veritrail.test")
	get := func(path, header string) *http.Response {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		return serve(h, req)
	}
	if resp := get("/open", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("public organization signed out: %d, want 200", resp.StatusCode)
	}
	// Policies, controls, fingerprints, evidence and search need a key even in a public organization, as in the API.
	for _, path := range []string{"/open/policies/p", "/open/controls/c", "/open/fingerprints/f", "/open/flows/f/trails/t/evidence/x", "/open/search?q=abcd", "/open/notifications"} {
		if resp := get(path, ""); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/sign-in?") {
			t.Errorf("%s signed out: %d to %q, want the sign-in page", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, org := range []string{"/acme", "/nowhere"} { // the same answer whether it exists or not
		if resp := get(org, ""); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/sign-in?next="+url.QueryEscape(org) {
			t.Errorf("%s signed out: %d to %q, want the sign-in page", org, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp := get("/acme", "Bearer "+theKey); resp.StatusCode != http.StatusOK {
		t.Errorf("bearer key: %d, want 200", resp.StatusCode)
	}
	if resp := get("/acme", "Bearer vt_unknown"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown bearer key: %d, want 401", resp.StatusCode)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{"/acme/flows/x?y=1": "/acme/flows/x?y=1", "": "", "https://evil.test/": "",
		"//evil.test/": "", `/\evil.test`: "", "acme": ""} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStateIsNotColourAlone(t *testing.T) {
	f := false
	for _, s := range []state{stateOf("COMPLIANT"), stateOf("NON-COMPLIANT"), stateOf("INCOMPLETE"), stateOf("MISSING"),
		verdictOf(&f), verdictOf(nil), verdictOf(true)} {
		if s.Word == "" || s.Icon == "" {
			t.Errorf("state %+v lacks a word or an icon", s)
		}
	}
}

func TestLineDiff(t *testing.T) {
	var got []string
	for _, l := range lineDiff("a\nb\nc\nd", "a\nc\nd\ne") {
		got = append(got, l.Op+l.Text)
	}
	if want := []string{" a", "-b", " c", " d", "+e"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("lineDiff = %v, want %v", got, want)
	}
}

func TestFoldDiff(t *testing.T) {
	var a, b []string
	for i := range 20 {
		a = append(a, fmt.Sprint(i))
		b = append(b, fmt.Sprint(i))
	}
	b[10] = "ten"
	var got []string
	for _, l := range foldDiff(lineDiff(strings.Join(a, "\n"), strings.Join(b, "\n"))) {
		if l.Skipped > 0 {
			got = append(got, fmt.Sprintf("(%d)", l.Skipped))
			continue
		}
		got = append(got, l.Op+l.Text)
	}
	want := []string{"(7)", " 7", " 8", " 9", "-10", "+ten", " 11", " 12", " 13", "(6)"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("foldDiff = %v, want %v", got, want)
	}
}

func TestExpectedAttestationState(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		e    expected
		want string
	}{
		{expected{Status: "MISSING"}, "Missing"},
		{expected{Status: "COMPLETE", IsCompliant: &no}, "Non-compliant"},
		{expected{Status: "COMPLETE", IsCompliant: &yes}, "Compliant"},
	} {
		if got := tc.e.State().Word; got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.e, got, tc.want)
		}
	}
}

func TestPagesShareTheAPIRateLimits(t *testing.T) {
	st := fakeStore{}
	now := time.Unix(1_700_000_000, 0)
	s, err := New(Config{BaseURL: "http://veritrail.test"}, Deps{Store: st, Sessions: sqlitetest.Open(t), Auth: auth.NewAuthenticator(st, time.Now),
		Limits: limits.NewLimiter(limits.Limits{KeyRate: 1, KeyBurst: 2}), Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	s.Register(r)
	get := func() *http.Response {
		req := httptest.NewRequest(http.MethodGet, "/acme", nil)
		req.Header.Set("Authorization", "Bearer "+theKey)
		return serve(r, req)
	}
	for i := range 2 {
		if resp := get(); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d within the burst: %d", i+1, resp.StatusCode)
		}
	}
	if resp := get(); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("beyond the burst: %d, Retry-After %q; want 429 after 1 s", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
