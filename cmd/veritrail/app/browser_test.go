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

	"github.com/chromedp/chromedp"
)

// stepTimeout bounds one browser step: a failure bound, far above what a step takes.
const stepTimeout = 60 * time.Second

// TestWebUIInABrowser drives the web UI in headless Chromium: sign in, open the home page,
// follow links to a non-compliant artifact and find its failing rule's reason, compare two
// snapshots of the environment, ask the policy what if; the pages log no console error and fit
// a phone's width. On
// failure it saves a screenshot and names it. VERITRAIL_WEB_SCREENSHOTS names a directory to
// save screenshots of the environment and the artifact pages in (docs/ holds two).
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
	_, bad, _ := webScenario(t, newKosli(t, e.base+"/api/v2", testToken))

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil { // starts the browser, without a timeout (see chromedp.Run)
		t.Fatalf("start chromium: %v", err)
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

	navigate("policy", chromedp.Navigate(e.base+"/"+testOrg+"/policies/prod-policy"))
	at, text = navigate("what-if", chromedp.Submit(chromedp.ID("whatif-env")))
	if !strings.Contains(text, "artifacts would fail") || !strings.Contains(text, "web:2") {
		fail("what-if at %s:\n%s", at, text)
	}

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

	stopConsole()
	<-consoleDone
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("console errors: %v", problems)
	}
}
