package app

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

// browser is a web UI client with its own cookies, as a person's browser is.
type browser struct {
	t    *testing.T
	base string
	http *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, http: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// get fetches a page of the site (following redirects) and returns the answer's status, the
// path it ended on and its body.
func (b *browser) get(path string, header ...string) (int, string, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, resp.Request.URL.Path, string(body)
}

var csrfInput = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// signIn fills in the sign-in form with key.
func (b *browser) signIn(key string) {
	b.t.Helper()
	status, _, body := b.get("/sign-in")
	m := csrfInput.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		b.t.Fatalf("sign-in form: %d %s", status, body)
	}
	resp, err := b.http.PostForm(b.base+"/sign-in", url.Values{"csrf_token": {m[1]}, "api_key": {key}})
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path == "/sign-in" {
		page, _ := io.ReadAll(resp.Body)
		b.t.Fatalf("sign in: %d at %s: %s", resp.StatusCode, resp.Request.URL.Path, page)
	}
}

// htmlURLs collects every link to the web UI in an API answer: html_url fields, and any other
// string under the base URL that is not an API path.
func htmlURLs(t *testing.T, body []byte, into map[string]bool) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("answer is not JSON: %s", body)
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		case string:
			if rest, ok := strings.CutPrefix(x, baseConfig().Ingest.BaseURL); ok && !strings.HasPrefix(rest, "/api/") {
				into[rest] = true
			}
		}
	}
	walk(v)
}

// pageName is the name a page must show: the object's, the last segment of its path (a
// snapshot's page names its environment).
func pageName(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	name := segs[len(segs)-1]
	if len(segs) >= 2 && segs[len(segs)-2] == "snapshots" {
		name = segs[len(segs)-3]
	}
	n, err := url.PathUnescape(name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWebUICrawl runs a scenario through the API, collects every html_url the answers carry,
// and opens each in the web UI: signed in, 200 with the object's name on the page; signed in
// with a key of another organization, or sending it as a bearer token, 404; signed out, the
// sign-in page.
func TestWebUICrawl(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		good, bad, mystery := webScenario(t, k)

		links := map[string]bool{}
		for _, path := range []string{
			"/flows/" + testOrg, "/flows/" + testOrg + "/web",
			"/trails/" + testOrg + "?flow=web", "/trails/" + testOrg + "/web/t1", "/trails/" + testOrg + "/web/t2",
			"/attestations/" + testOrg + "/web/trail/t1/smoke", "/attestations/" + testOrg,
			"/artifacts/" + testOrg + "/web/fingerprint/" + good, "/artifacts/" + testOrg + "/web/fingerprint/" + bad,
			"/artifacts/" + testOrg,
			"/environments/" + testOrg, "/environments/" + testOrg + "/prod", "/environments/" + testOrg + "/prod/events",
			"/snapshots/" + testOrg + "/prod/-1",
			"/policies/" + testOrg, "/policies/" + testOrg + "/prod-policy",
			"/controls/" + testOrg, "/controls/" + testOrg + "/SEC-1",
			"/asserts/" + testOrg + "/fingerprint/" + good, "/asserts/" + testOrg + "/fingerprint/" + mystery + "?environment_name=prod",
			"/asserts/" + testOrg + "/fingerprint/" + bad + "?environment_name=prod",
		} {
			htmlURLs(t, k.get(path).want(t, http.StatusOK).Body, links)
		}
		// Every form of html_url the API emits is among them.
		var forms []string
		for l := range links {
			segs := strings.Split(strings.Trim(strings.SplitN(l, "?", 2)[0], "/"), "/")
			form := segs[1 : len(segs)-1]
			if len(form) > 0 && form[len(form)-1] == "snapshots" {
				form = segs[1:2]
				form = append(form, "snapshots")
			}
			forms = append(forms, strings.Join(form, "/"))
		}
		for _, want := range []string{"flows", "flows/web/trails", "flows/web/artifacts", "environments", "environments/snapshots",
			"policies", "controls", "fingerprints"} {
			if !slices.Contains(forms, want) {
				t.Errorf("no html_url of the form %s among %v", want, slices.Sorted(func(yield func(string) bool) {
					for l := range links {
						if !yield(l) {
							return
						}
					}
				}))
			}
		}
		if !slices.ContainsFunc(slices.Collect(func(yield func(string) bool) {
			for l := range links {
				if !yield(l) {
					return
				}
			}
		}), func(l string) bool { return strings.Contains(l, "?attestation_id=") }) {
			t.Errorf("no attestation html_url among %v", links)
		}

		mine := newBrowser(t, e.base)
		mine.signIn(testToken)
		other := newBrowser(t, e.base)
		otherKey := keySecret(t, e, "other", "viewer", store.RoleReader)
		other.signIn(otherKey)
		stranger := newBrowser(t, e.base)
		for l := range links {
			status, _, body := mine.get(l)
			if name := html.EscapeString(pageName(t, l)); status != http.StatusOK || !strings.Contains(body, name) {
				t.Errorf("%s signed in: %d, want 200 with %q on the page:\n%s", l, status, name, body)
			}
			if status, _, _ := other.get(l); status != http.StatusNotFound {
				t.Errorf("%s with another organization's session: %d, want 404", l, status)
			}
			if status, _, _ := stranger.get(l, "Authorization", "Bearer "+otherKey); status != http.StatusNotFound {
				t.Errorf("%s with another organization's key as a bearer token: %d, want 404", l, status)
			}
			if status, at, _ := stranger.get(l); status != http.StatusOK || at != "/sign-in" {
				t.Errorf("%s signed out: %d at %s, want the sign-in page", l, status, at)
			}
		}
		// The non-compliant artifact's environment page says why: the failing rule's reason.
		if _, _, body := mine.get("/" + testOrg + "/environments/prod"); !strings.Contains(body, "Non-compliant") ||
			!strings.Contains(body, "prod-policy") {
			t.Errorf("environment page without the failing verdict:\n%s", body)
		} else if !strings.Contains(body, "<svg") || !strings.Contains(body, "Of the last 2 snapshots") || !strings.Contains(body, "web:2") {
			t.Errorf("environment page without its chart or event log:\n%s", body)
		}
		// The latest snapshot's instances of each artifact, as the report gave them.
		if _, _, body := mine.get("/" + testOrg + "/environments/prod"); !strings.Contains(body, "web-7d9f-abc12") ||
			!strings.Contains(body, "web-7d9f-def34") || !strings.Contains(body, "<dt>namespace</dt>") ||
			!strings.Contains(body, `datetime="2023-11-14T22:13:20Z"`) {
			t.Errorf("environment page without web:2's pods:\n%s", body)
		}
		// The diff of the two snapshots: web:2 and mystery:1 started in the second.
		status, _, body := mine.get("/" + testOrg + "/environments/prod/diff?from=1&to=2")
		before, only2, found := strings.Cut(body, "Only in prod#2")
		if status != http.StatusOK || !found || !strings.Contains(only2, bad[:12]) || strings.Contains(before, bad[:12]) {
			t.Errorf("diff: %d\n%s", status, body)
		}
		// The evidence file of an attestation downloads from its trail's page, with the session only.
		_, _, body = mine.get("/" + testOrg + "/flows/web/trails/t1")
		m := regexp.MustCompile(`href="(/` + testOrg + `/flows/web/trails/t1/evidence/[^"]+)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no evidence link on the trail page:\n%s", body)
		}
		if status, _, file := mine.get(m[1]); status != http.StatusOK || file != "the build log" {
			t.Errorf("evidence: %d %q", status, file)
		}
		if status, _, _ := other.get(m[1]); status != http.StatusNotFound {
			t.Errorf("evidence with another organization's session: %d, want 404", status)
		}
		if status, at, _ := stranger.get(m[1]); status != http.StatusOK || at != "/sign-in" {
			t.Errorf("evidence signed out: %d at %s, want the sign-in page", status, at)
		}
		// The organization's page lists the non-compliant trail.
		if _, _, body := mine.get("/" + testOrg); !strings.Contains(body, `href="/`+testOrg+`/flows/web/trails/t2"`) ||
			strings.Contains(body, `href="/`+testOrg+`/flows/web/trails/t1"`) {
			t.Errorf("organization page without its non-compliant trail (only):\n%s", body)
		}
		// The notification rules with their targets.
		createRule(t, k, map[string]any{"name": "prod watch", "environments": []string{"prod"}, "triggers": []string{"ON_EXITED_ARTIFACT"},
			"targets": []map[string]any{{"type": "EMAIL", "emails": []string{"ops@example.com"}}}})
		status, _, body = mine.get("/" + testOrg + "/notifications")
		if status != http.StatusOK || !strings.Contains(body, "prod watch") || !strings.Contains(body, "ops@example.com") ||
			!strings.Contains(body, "Recent deliveries (0)") {
			t.Errorf("notifications: %d\n%s", status, body)
		}
		if status, _, _ := other.get("/" + testOrg + "/notifications"); status != http.StatusNotFound {
			t.Errorf("notifications with another organization's session: %d, want 404", status)
		}
		// Search by the start of a fingerprint.
		status, _, body = mine.get("/" + testOrg + "/search?q=" + bad[:6])
		if status != http.StatusOK || !strings.Contains(body, "web:2") || strings.Contains(body, "web:1") {
			t.Errorf("search: %d\n%s", status, body)
		}
		if status, _, _ := other.get("/" + testOrg + "/search?q=" + bad[:6]); status != http.StatusNotFound {
			t.Errorf("search with another organization's session: %d, want 404", status)
		}
		// What if: the policy judges prod's latest snapshot on request; web:2 fails its smoke test.
		status, _, body = mine.get("/" + testOrg + "/policies/prod-policy?environment=prod&version=1")
		if _, answer, _ := strings.Cut(body, "artifacts would fail"); status != http.StatusOK || !strings.Contains(answer, bad[:12]) ||
			!strings.Contains(body, "The Rego version 1 compiles to") || !strings.Contains(body, `<a href="/`+testOrg+`/environments/prod">prod</a>`) {
			t.Errorf("what-if: %d\n%s", status, body)
		}
		// A second version: each version shows the Rego it compiles to, and the two compare as
		// written and as compiled.
		p := policyKit{t, k}
		p.policy("prod-policy", policySchema+"artifacts:\n  attestations:\n    - name: smoke\n      type: generic\n    - name: scan\n      type: generic\n", http.StatusOK)
		status, _, body = mine.get("/" + testOrg + "/policies/prod-policy?show=1")
		if status != http.StatusOK || !strings.Contains(body, "Version 1 (yaml)</h2>") || !strings.Contains(body, "The Rego version 1 compiles to") ||
			!strings.Contains(body, `href="?show=2#content"`) {
			t.Errorf("policy page showing version 1: %d\n%s", status, body)
		}
		status, _, body = mine.get("/" + testOrg + "/policies/prod-policy?from=1&to=2")
		written, compiled, found := strings.Cut(body, "The Rego it compiles to</h4>")
		if status != http.StatusOK || !found || !strings.Contains(written, `<span class="add">&#43;     - name: scan</span>`) ||
			!strings.Contains(compiled, `<span class="add">&#43;`) || !strings.Contains(compiled, "unchanged lines") || !strings.Contains(compiled, "scan") {
			t.Errorf("policy diff of versions 1 and 2: %d\n%s", status, body)
		}
		if status, _, _ := other.get("/" + testOrg + "/environments/prod/diff"); status != http.StatusNotFound {
			t.Errorf("diff with another organization's session: %d, want 404", status)
		}

		// A public organization: its flows, trails, artifacts and environments are readable signed out
		// (the attestations and their evidence are not, as in the API); its policies still need a key.
		if err := e.store.SetOrgPublic(context.Background(), mustOrg(t, e.store, testOrg).ID, true); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/" + testOrg, "/" + testOrg + "/flows/web", "/" + testOrg + "/flows/web/trails/t1",
			"/" + testOrg + "/flows/web/artifacts/" + bad, "/" + testOrg + "/environments/prod"} {
			status, at, body := stranger.get(path)
			if status != http.StatusOK || at != path || strings.Contains(body, "/evidence/") || strings.Contains(body, "build.log") {
				t.Errorf("%s of a public organization signed out: %d at %s:\n%s", path, status, at, body)
			}
		}
		if status, at, _ := stranger.get("/" + testOrg + "/policies/prod-policy"); status != http.StatusOK || at != "/sign-in" {
			t.Errorf("policy of a public organization signed out: %d at %s, want the sign-in page", status, at)
		}
	})
}

// webScenario runs through the API what the web UI tests look at: a flow with a compliant
// artifact (good) and a non-compliant one (bad), an environment with a policy that runs both
// and one never reported in a flow (mystery), in two snapshots; a control.
func webScenario(t *testing.T, k *kosli) (good, bad, mystery string) {
	t.Helper()
	p := policyKit{t, k}
	p.flow("web")
	// mystery runs without having been reported in a flow.
	good, bad, mystery = fingerprint("ab12"), fingerprint("cd34"), fingerprint("ef56")
	p.artifact("web", "t1", good, "web:1")
	p.attest("web", "t1", "generic", "smoke", good, map[string]any{"is_compliant": true})
	k.multipart(http.MethodPost, "/attestations/"+testOrg+"/web/trail/t1/generic", "data_json",
		map[string]any{"attestation_name": "build-log", "is_compliant": true, "user_data": map[string]any{}},
		file{"attachment_file", "build.log", []byte("the build log")}).want(t, http.StatusCreated)
	p.artifact("web", "t2", bad, "web:2")
	p.attest("web", "t2", "generic", "smoke", bad, map[string]any{"is_compliant": false})
	p.env("prod")
	p.policy("prod-policy", policySchema+"artifacts:\n  attestations:\n    - name: smoke\n      type: generic\n", http.StatusCreated)
	p.attach("prod", "prod-policy").want(t, http.StatusOK)
	p.report("prod", map[string]string{"web:1": good})
	// The second report says which pods run web:2 (its instances on the environment page).
	k.send(http.MethodPut, "/environments/"+testOrg+"/prod/report/server", map[string]any{"artifacts": []map[string]any{
		{"digests": map[string]string{"mystery:1": mystery}, "creationTimestamp": 1},
		{"digests": map[string]string{"web:1": good}, "creationTimestamp": 1},
		{"digests": map[string]string{"web:2": bad}, "creationTimestamp": 1700000000, "podName": "web-7d9f-abc12", "namespace": "shop"},
		{"digests": map[string]string{"web:2": bad}, "creationTimestamp": 1700000060, "podName": "web-7d9f-def34", "namespace": "shop"},
	}}).want(t, http.StatusCreated)
	k.send(http.MethodPost, "/controls/"+testOrg, map[string]any{"identifier": "SEC-1", "name": "Security review"}).
		want(t, http.StatusCreated)
	return good, bad, mystery
}

// TestWebUITrailPaging: a trail's attestations are paged, newest first, and the link to an
// attestation (its html_url) opens the page that holds it, marked.
func TestWebUITrailPaging(t *testing.T) {
	e := startEmbeddedWith(t, baseConfig())
	k := newKosli(t, e.base+"/api/v2", testToken)
	p := policyKit{t, k}
	p.flow("long")
	p.artifact("long", "t1", fingerprint("ee"), "long:1")
	for i := range 120 {
		p.attest("long", "t1", "generic", fmt.Sprintf("check-%03d", i), "", map[string]any{"is_compliant": true})
	}
	answer := k.get("/attestations/"+testOrg+"/long/trail/t1/check-000").want(t, http.StatusOK).Array(t)
	oldest, _ := answer[0].(map[string]any)
	link, _ := oldest["html_url"].(string)
	path := strings.TrimPrefix(link, baseConfig().Ingest.BaseURL)
	if !strings.Contains(path, "?attestation_id=") {
		t.Fatalf("attestation html_url: %v", oldest)
	}
	b := newBrowser(t, e.base)
	b.signIn(testToken)
	status, _, body := b.get("/" + testOrg + "/flows/long/trails/t1")
	// The attestations' table rows (the expected attestations list them all, unpaged).
	if status != http.StatusOK || !strings.Contains(body, "<td>check-119</td>") || strings.Contains(body, "<td>check-000</td>") ||
		!strings.Contains(body, "Page 1 of 2") || !strings.Contains(body, "Attestations (120)") {
		t.Fatalf("first page: %d\n%s", status, body)
	}
	status, _, body = b.get(path)
	if status != http.StatusOK || !strings.Contains(body, "Page 2 of 2") || !strings.Contains(body, `class="selected" aria-current="true"`) ||
		!strings.Contains(body, "<td>check-000</td>") || strings.Contains(body, "<td>check-119</td>") {
		t.Fatalf("the oldest attestation's link: %d\n%s", status, body)
	}
}

// TestWebSessionAcrossIngestProcesses: in the distributed mode with two ingest processes on one
// PostgreSQL, a browser signed in through one is signed in through the other (behind a load
// balancer it reaches either), and signing out through the other ends it on both.
func TestWebSessionAcrossIngestProcesses(t *testing.T) {
	_, a, b := startTwoIngests(t)

	first := newBrowser(t, "http://"+a.Addr)
	first.signIn(testToken)
	u, err := url.Parse(first.base)
	if err != nil {
		t.Fatal(err)
	}
	var session *http.Cookie
	for _, c := range first.http.Jar.Cookies(u) {
		if c.Name == "vt_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie after signing in through ingest A")
	}
	// The other process, asked with the cookie alone (a fresh client: no cookie of its own).
	other := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(base, method, path string, form url.Values) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
		resp, err := other.Do(req)
		if err != nil {
			t.Fatalf("%s %s%s: %v", method, base, path, err)
		}
		defer resp.Body.Close()
		page, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(page)
	}
	status, page := call("http://"+b.Addr, http.MethodGet, "/"+testOrg, nil)
	if status != http.StatusOK || !strings.Contains(page, testOrg) || !strings.Contains(page, "Sign out") {
		t.Fatalf("ingest B with ingest A's session: %d\n%s", status, page)
	}
	m := csrfInput.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no sign-out form on ingest B's page:\n%s", page)
	}
	if status, _ := call("http://"+b.Addr, http.MethodPost, "/sign-out", url.Values{"csrf_token": {m[1]}}); status != http.StatusSeeOther {
		t.Fatalf("sign out through ingest B: %d", status)
	}
	for _, in := range []*Running{a, b} {
		if status, _ := call("http://"+in.Addr, http.MethodGet, "/"+testOrg, nil); status != http.StatusSeeOther {
			t.Fatalf("the session after signing out, at %s: %d, want the sign-in page", in.Addr, status)
		}
	}
}
