package app

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// stepTimeout bounds one browser step: a failure bound, far above what a step takes.
const stepTimeout = 60 * time.Second

// TestWebUIInABrowser drives the web UI in headless Chromium: sign in, open the home page,
// open an artifact's instances from the keyboard (their times in the reader's zone, the UTC
// time in the title), follow links to a non-compliant artifact and find its failing rule's
// reason, compare two snapshots of the environment, ask the policy what if, show an older
// version of it and compare two, find a failing delivery on the notifications page; the pages
// log no console error and fit a phone's width. On failure it saves a screenshot and names it.
// VERITRAIL_WEB_SCREENSHOTS names a directory to save screenshots of the pages in (docs/
// holds two).
func TestWebUIInABrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is missing under CI (.ci/run installs Debian's chromium package)")
		}
		t.Skip("chromium is not installed")
	}
	e := startEmbeddedWith(t, baseConfig())
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	k := newKosli(t, e.base+"/api/v2", testToken)
	_, bad, _ := webScenario(t, k)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil { // starts the browser, without a timeout (see chromedp.Run)
		t.Fatalf("start chromium: %v", err)
	}
	// Times show in the reader's zone: the test reads them in Tokyo's.
	tokyo := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"})
		return err
	})
	if err := chromedp.Do(ctx, tokyo); err != nil {
		t.Fatalf("time zone: %v", err)
	}

	var mu sync.Mutex
	var problems []string
	consoleCtx, stopConsole := context.WithCancel(ctx)
	messages := chromedp.Console(consoleCtx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()

	// fail saves a screenshot of the page as it is and stops the test.
	fail := func(format string, args ...any) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, stepTimeout)
		defer scancel()
		if shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(90)); err == nil {
			dir, derr := os.MkdirTemp("", "veritrail-browser-")
			if derr == nil {
				path := filepath.Join(dir, "failure.jpg")
				if os.WriteFile(path, shot, 0o644) == nil {
					t.Logf("screenshot of the failing page: %s", path)
				}
			}
		}
		t.Fatalf(format, args...)
	}
	// navigate runs steps that load a page and returns the path and the text of its main part.
	navigate := func(what string, steps ...chromedp.Action[chromedp.Void]) (string, string) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, stepTimeout)
		defer scancel()
		resp, err := chromedp.RunResponse(sctx, steps...)
		if err != nil {
			fail("%s: %v", what, err)
		}
		if resp.Status != http.StatusOK {
			fail("%s: status %d at %s", what, resp.Status, resp.URL)
		}
		loc, err := chromedp.Run(sctx, chromedp.Location())
		if err != nil {
			fail("%s: location: %v", what, err)
		}
		text, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			fail("%s: text: %v", what, err)
		}
		return strings.TrimPrefix(loc, e.base), text
	}
	screenshot := func(name string) {
		t.Helper()
		dir := os.Getenv("VERITRAIL_WEB_SCREENSHOTS")
		if dir == "" {
			return
		}
		sctx, scancel := context.WithTimeout(ctx, stepTimeout)
		defer scancel()
		shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	navigate("sign-in page", chromedp.Navigate(e.base+"/sign-in"))
	sctx, scancel := context.WithTimeout(ctx, stepTimeout)
	err = chromedp.Do(sctx, chromedp.SendKeys(chromedp.ID("api_key"), testToken))
	scancel()
	if err != nil {
		fail("type the key: %v", err)
	}
	at, text := navigate("sign in", chromedp.Submit(chromedp.ID("api_key")))
	if at != "/"+testOrg || !strings.Contains(text, "prod") || !strings.Contains(text, "web") {
		fail("home after signing in: at %s:\n%s", at, text)
	}

	screenshot("web-home.png")
	at, text = navigate("environment", chromedp.Click(chromedp.CSS(`a[href="/`+testOrg+`/environments/prod"]`)))
	if !strings.Contains(text, "Non-compliant") || !strings.Contains(text, "Compliance over time") {
		fail("environment page at %s:\n%s", at, text)
	}
	// web:2's pods, behind a disclosure opened from the keyboard; their start times in the
	// reader's time zone (Tokyo here), the absolute UTC time in the title.
	sctx, scancel = context.WithTimeout(ctx, stepTimeout)
	err = chromedp.Do(sctx, chromedp.Focus(chromedp.Search(`//details[@class="instances"][.//span[text()="instances of web:2"]]/summary`)),
		chromedp.KeyEvent("\r"))
	scancel()
	if err != nil {
		fail("open the instances from the keyboard: %v", err)
	}
	sctx, scancel = context.WithTimeout(ctx, stepTimeout)
	pods, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS("details.instances[open]")))
	scancel()
	if err != nil || !strings.Contains(pods, "web-7d9f-abc12") || !strings.Contains(pods, "namespace") || !strings.Contains(pods, "7:13:20") {
		fail("instances of web:2 after Enter on their summary (%v):\n%s", err, pods)
	}
	sctx, scancel = context.WithTimeout(ctx, stepTimeout)
	title, err := chromedp.Run(sctx, chromedp.Evaluate[string](`document.querySelector("details.instances[open] time").title`))
	scancel()
	if err != nil || title != "2023-11-14T22:13:20Z" {
		fail("the start time's title is %q (%v), want the absolute UTC time", title, err)
	}
	screenshot("web-environment.png")

	at, text = navigate("artifact", chromedp.Click(chromedp.CSS(`main a[href="/`+testOrg+`/flows/web/artifacts/`+bad+`"]`)))
	reason, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".reason")))
	if err != nil || strings.TrimSpace(reason) == "" || !strings.Contains(text, reason) || !strings.Contains(text, "smoke") {
		fail("artifact page at %s without the failing rule's reason (%q, %v):\n%s", at, reason, err, text)
	}
	screenshot("web-artifact.png")

	navigate("trail", chromedp.Click(chromedp.CSS(`main a[href="/`+testOrg+`/flows/web/trails/t2"]`)))
	screenshot("web-trail.png")
	navigate("back to the environment", chromedp.Navigate(e.base+"/"+testOrg+"/environments/prod"))
	at, text = navigate("diff", chromedp.Submit(chromedp.ID("diff-from")))
	if !strings.HasPrefix(at, "/"+testOrg+"/environments/prod/diff?") || !strings.Contains(text, "Only in prod#2") ||
		!strings.Contains(text, "web:2") {
		fail("diff page at %s:\n%s", at, text)
	}

	// A second version of the policy, for the page's versions and their diff.
	policyKit{t, k}.policy("prod-policy", policySchema+"artifacts:\n  attestations:\n    - name: smoke\n      type: generic\n"+
		"    - name: scan\n      type: generic\n", http.StatusOK)
	navigate("policy", chromedp.Navigate(e.base+"/"+testOrg+"/policies/prod-policy"))
	at, text = navigate("what-if", chromedp.Submit(chromedp.ID("whatif-env")))
	if !strings.Contains(text, "artifacts would fail") || !strings.Contains(text, "web:2") {
		fail("what-if at %s:\n%s", at, text)
	}
	at, text = navigate("policy version 1", chromedp.Click(chromedp.CSS(`a[href="?show=1#content"]`)))
	if !strings.Contains(text, "Version 1 (yaml)") || !strings.Contains(text, "The Rego version 1 compiles to") {
		fail("policy version 1 at %s:\n%s", at, text)
	}
	at, text = navigate("policy diff", chromedp.Submit(chromedp.ID("diff-from")))
	if !strings.Contains(text, "Version 1 compared with 2") || !strings.Contains(text, "+     - name: scan") ||
		!strings.Contains(text, "The Rego it compiles to") || !strings.Contains(text, "unchanged lines") {
		fail("policy diff at %s:\n%s", at, text)
	}
	screenshot("web-policy-diff.png")

	// On a phone the pages fit the screen's width: nothing makes the page scroll sideways (wide
	// tables scroll within themselves).
	sctx, scancel = context.WithTimeout(ctx, stepTimeout)
	err = chromedp.Do(sctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	scancel()
	if err != nil {
		fail("phone viewport: %v", err)
	}
	for _, path := range []string{"/" + testOrg, "/" + testOrg + "/environments/prod", "/" + testOrg + "/flows/web/artifacts/" + bad,
		"/" + testOrg + "/policies/prod-policy?environment=prod"} {
		navigate("phone "+path, chromedp.Navigate(e.base+path))
		sctx, scancel := context.WithTimeout(ctx, stepTimeout)
		fits, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
		scancel()
		if err != nil || !fits {
			fail("%s on a phone scrolls sideways (%v)", path, err)
		}
	}
	screenshot("web-phone-policy.png")

	// A rule whose receiver refuses: its delivery shows as retrying, with why, on a phone too.
	hook := newReceiver(t)
	hook.status.Store(http.StatusServiceUnavailable)
	createRule(t, k, map[string]any{"name": "prod starts", "environments": []string{"prod"}, "triggers": []string{"ON_STARTED_ARTIFACT"},
		"targets": []map[string]any{{"type": "WEBHOOK", "webhook": hook.url}}})
	policyKit{t, k}.report("prod", map[string]string{"web:1": fingerprint("ab12"), "web:2": bad, "extra:1": fingerprint("9a")})
	reader := newBrowser(t, e.base)
	reader.signIn(testToken)
	eventually(t, "the delivery retrying on the notifications page", func() bool {
		_, _, page := reader.get("/" + testOrg + "/notifications")
		return strings.Contains(page, "Retrying")
	})
	at, text = navigate("notifications", chromedp.Navigate(e.base+"/"+testOrg+"/notifications"))
	if !strings.Contains(text, "prod starts") || !strings.Contains(text, "Retrying") || !strings.Contains(text, "server_error") {
		fail("notifications at %s:\n%s", at, text)
	}
	sctx, scancel = context.WithTimeout(ctx, stepTimeout)
	fits, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
	scancel()
	if err != nil || !fits {
		fail("notifications on a phone scrolls sideways (%v)", err)
	}
	screenshot("web-phone-notifications.png")

	stopConsole()
	<-consoleDone
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("console errors: %v", problems)
	}
}
