package catalog_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/veritrail/veritrail/internal/deliverylog/memlog"
	"github.com/veritrail/veritrail/notify"
	"github.com/veritrail/veritrail/notify/catalog"
	"github.com/veritrail/veritrail/plugins/builtin/webhook"
	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/plugintest"
)

// The example plugin is built once per test binary, with the go command, as an author would.
var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

func examplePlugin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "veritrail-plugin-build-")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "pager")
		// The example is a module of its own, built against the SDK module alone, as an
		// author's plugin is.
		cmd := exec.Command("go", "build", "-o", built, ".")
		cmd.Dir = "../../plugins/example"
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New("go build ./plugins/example: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built != "" {
		_ = os.RemoveAll(filepath.Dir(built))
	}
	os.Exit(code)
}

// install copies the example plugin into a fresh plugin directory and returns the directory
// and the binary's sha256.
func install(t *testing.T) (dir, sum string) {
	t.Helper()
	src, err := os.ReadFile(examplePlugin(t))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pager"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(src)
	return dir, hex.EncodeToString(h[:])
}

func quietLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard})
}

func newCatalog(t *testing.T, dir, sum string, builtins map[string]sdk.Notifier) *catalog.Catalog {
	t.Helper()
	c, err := catalog.New(catalog.Config{
		Dir: dir,
		Plugins: []catalog.Entry{{Name: "pager", Command: "pager", SHA256: sum,
			Settings: map[string]string{"allow_private": "true", "token": "t0ken"}}},
		Logger: quietLogger(),
	}, builtins)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// pagerReceiver accepts incidents and reports each one's dedup key.
func pagerReceiver(t *testing.T, handle func(n int32)) (string, <-chan string) {
	t.Helper()
	keys := make(chan string, 16)
	var count atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			DedupKey string `json:"dedup_key"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		n := count.Add(1)
		if handle != nil {
			handle(n)
		}
		keys <- in.DedupKey
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/incidents", keys
}

func pagerStatus(t *testing.T, c *catalog.Catalog) catalog.Status {
	t.Helper()
	for _, s := range c.Status() {
		if s.Name == "pager" {
			return s
		}
	}
	t.Fatal("no status for pager")
	return catalog.Status{}
}

func TestPluginProcessPassesTheConformanceSuite(t *testing.T) {
	dir, sum := install(t)
	plugintest.Run(t, plugintest.Suite{
		New: func(t *testing.T) sdk.Notifier {
			n, err := newCatalog(t, dir, sum, nil).Lookup("pager")
			if err != nil {
				t.Fatal(err)
			}
			return n
		},
		Receiver: func(t *testing.T) (sdk.Target, <-chan []byte) {
			got := make(chan []byte, 16)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- b
			}))
			t.Cleanup(srv.Close)
			return sdk.Target{ID: "1", Type: sdk.TargetPlugin, Plugin: "pager", URL: srv.URL}, got
		},
		HTTPTarget: func(u string) sdk.Target { return sdk.Target{ID: "1", Type: sdk.TargetPlugin, Plugin: "pager", URL: u} },
		BadTarget:  &sdk.Target{ID: "1", Type: sdk.TargetPlugin, Plugin: "pager"},
	})
}

func rules(url string) []notify.Rule {
	return []notify.Rule{{Org: "acme", Number: 9, Name: "page on-call", Environments: []string{"prod"},
		Triggers: []sdk.Trigger{sdk.OnNonCompliantEnv},
		Targets:  []sdk.Target{{ID: "pager-1", Type: sdk.TargetPlugin, Plugin: "pager", URL: url}}}}
}

func event() sdk.Event {
	return sdk.Event{ID: "evt-1", Trigger: sdk.OnNonCompliantEnv, OccurredAt: time.Now(), Environment: sdk.Environment{Name: "prod"}}
}

var fast = notify.Config{Budget: 30 * time.Second, AttemptTimeout: 20 * time.Second, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}

func TestDeliveryThroughThePlugin(t *testing.T) {
	dir, sum := install(t)
	hook := webhook.New()
	c := newCatalog(t, dir, sum, map[string]sdk.Notifier{"webhook": hook})
	if n, err := c.Lookup("webhook"); err != nil || n != hook {
		t.Fatalf("built-in lookup: %v %v", n, err)
	}
	if _, err := c.Lookup("jira"); err == nil {
		t.Fatal("an unknown name was found")
	}
	if s := pagerStatus(t, c); s.Running || s.Starts != 0 {
		t.Fatalf("the plugin started before its first use: %+v", s)
	}

	url, keys := pagerReceiver(t, nil)
	p, err := notify.New(fast, notify.Deps{Log: memlog.New(), Notifiers: c})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := p.Notify(context.Background(), event(), rules(url))
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Status != notify.StatusDelivered {
		t.Fatalf("status %s (%v)", ds[0].Status, ds[0].Last)
	}
	if k := <-keys; k != ds[0].Key.DeliveryID() {
		t.Fatalf("incident dedup key %q, want the delivery id %q", k, ds[0].Key.DeliveryID())
	}
	s := pagerStatus(t, c)
	if !s.Running || s.PID == 0 || s.Starts != 1 {
		t.Fatalf("status after a delivery: %+v", s)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if s := pagerStatus(t, c); s.Running {
		t.Fatalf("still running after Close: %+v", s)
	}
	n, _ := c.Lookup("pager")
	if f := sdk.Classify(n.Notify(context.Background(), plugintest.Sample(sdk.OnCompliantEnv, rules(url)[0].Targets[0]))); f.Retryable {
		t.Fatalf("a closed catalog's plugin answered %+v, want a permanent failure", f)
	}
}

func TestKilledPluginIsRestartedAndTheNotificationRetried(t *testing.T) {
	dir, sum := install(t)
	c := newCatalog(t, dir, sum, nil)
	var killed atomic.Bool
	url, keys := pagerReceiver(t, func(n int32) {
		if n == 1 {
			// The plugin is in the middle of sending: kill it before it hears the answer.
			pid := pagerStatus(t, c).PID
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Errorf("kill %d: %v", pid, err)
			}
			killed.Store(true)
		}
	})
	p, err := notify.New(fast, notify.Deps{Log: memlog.New(), Notifiers: c})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := p.Notify(context.Background(), event(), rules(url))
	if err != nil {
		t.Fatal(err)
	}
	if !killed.Load() {
		t.Fatal("the receiver never saw the first attempt")
	}
	d := ds[0]
	if d.Status != notify.StatusDelivered || d.Attempts != 2 {
		t.Fatalf("%s after %d attempts (%v), want delivered on the retry", d.Status, d.Attempts, d.Last)
	}
	first, second := <-keys, <-keys
	if first != d.Key.DeliveryID() || second != first {
		t.Fatalf("incidents %q and %q, want the same delivery twice", first, second)
	}
	if s := pagerStatus(t, c); !s.Running || s.Starts != 2 {
		t.Fatalf("status %+v, want running after one restart", s)
	}
}

func TestTamperedBinaryIsRefused(t *testing.T) {
	dir, sum := install(t)

	// Pinned to another sum: refused when the catalog is built.
	wrong := strings.Repeat("0", 64)
	_, err := catalog.New(catalog.Config{Dir: dir, Plugins: []catalog.Entry{{Name: "pager", Command: "pager", SHA256: wrong}}, Logger: quietLogger()}, nil)
	if err == nil || !strings.Contains(err.Error(), "its sha256 is "+sum+" but the configuration pins "+wrong) {
		t.Fatalf("New with a wrong pin: %v", err)
	}

	// Replaced after the catalog was built: refused when it would start.
	c := newCatalog(t, dir, sum, nil)
	f, err := os.OpenFile(filepath.Join(dir, "pager"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("tampered")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n, err := c.Lookup("pager")
	if err != nil {
		t.Fatal(err)
	}
	err = n.Notify(context.Background(), plugintest.Sample(sdk.OnCompliantEnv, sdk.Target{Type: sdk.TargetPlugin, Plugin: "pager", URL: "http://127.0.0.1:1/"}))
	fail := sdk.Classify(err)
	if err == nil || fail.Retryable || fail.Reason != catalog.ReasonChecksum ||
		!strings.Contains(err.Error(), "refusing to run") || !strings.Contains(err.Error(), "the configuration pins "+sum) {
		t.Fatalf("tampered binary: %v (%+v)", err, fail)
	}
	if s := pagerStatus(t, c); s.Running || s.Starts != 0 {
		t.Fatalf("the tampered binary ran: %+v", s)
	}
}

func TestConfigureIsCheckedByThePlugin(t *testing.T) {
	dir, sum := install(t)
	n, err := newCatalog(t, dir, sum, nil).Lookup("pager")
	if err != nil {
		t.Fatal(err)
	}
	err = n.Configure(context.Background(), map[string]string{"colour": "red"})
	if err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("Configure with an unknown setting: %v", err)
	}
}

func TestEntriesAreChecked(t *testing.T) {
	dir, sum := install(t)
	outside := t.TempDir()
	src, _ := os.ReadFile(filepath.Join(dir, "pager"))
	if err := os.WriteFile(filepath.Join(outside, "evil"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "evil"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notexec"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		entries  []catalog.Entry
		builtins map[string]sdk.Notifier
		want     string
	}{
		"parent":         {[]catalog.Entry{{Name: "p", Command: "../" + filepath.Base(outside) + "/evil", SHA256: sum}}, nil, "outside the plugin directory"},
		"absolute":       {[]catalog.Entry{{Name: "p", Command: filepath.Join(outside, "evil"), SHA256: sum}}, nil, "relative to the plugin directory"},
		"symlink out":    {[]catalog.Entry{{Name: "p", Command: "link", SHA256: sum}}, nil, "outside the plugin directory"},
		"not executable": {[]catalog.Entry{{Name: "p", Command: "notexec", SHA256: sum}}, nil, "not an executable file"},
		"missing":        {[]catalog.Entry{{Name: "p", Command: "nothere", SHA256: sum}}, nil, "nothere"},
		"bad sum":        {[]catalog.Entry{{Name: "p", Command: "pager", SHA256: "abc"}}, nil, "not 64 hexadecimal digits"},
		"bad name":       {[]catalog.Entry{{Name: "Pager!", Command: "pager", SHA256: sum}}, nil, "lower-case"},
		"twice":          {[]catalog.Entry{{Name: "p", Command: "pager", SHA256: sum}, {Name: "p", Command: "pager", SHA256: sum}}, nil, "configured twice"},
		"builtin name":   {[]catalog.Entry{{Name: "webhook", Command: "pager", SHA256: sum}}, map[string]sdk.Notifier{"webhook": webhook.New()}, "built-in"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := catalog.New(catalog.Config{Dir: dir, Plugins: c.entries, Logger: quietLogger()}, c.builtins)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want an error containing %q", err, c.want)
			}
		})
	}
	if _, err := catalog.New(catalog.Config{Plugins: []catalog.Entry{{Name: "p", Command: "pager", SHA256: sum}}}, nil); err == nil {
		t.Fatal("New accepted plugins without a plugin directory")
	}
}

// TestPluginOfAnotherProtocolVersionIsRefused: a plugin built against a protocol version the host
// does not serve (here 2; the host serves 1) gets no common version at the handshake. The
// delivery fails permanently, saying why, instead of being retried against it forever.
func TestPluginOfAnotherProtocolVersionIsRefused(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pager")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/futureplugin").CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/futureplugin: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	n, err := newCatalog(t, dir, hex.EncodeToString(h[:]), nil).Lookup("pager")
	if err != nil {
		t.Fatal(err)
	}
	err = n.Notify(context.Background(), plugintest.Sample(sdk.OnCompliantEnv, sdk.Target{Type: sdk.TargetPlugin, Plugin: "pager", URL: "http://127.0.0.1:1/"}))
	fail := sdk.Classify(err)
	if err == nil || fail.Retryable || fail.Reason != catalog.ReasonProtocol ||
		!strings.Contains(err.Error(), "speaks no protocol version this server serves ([1])") ||
		!strings.Contains(err.Error(), "Plugin version: 2") {
		t.Fatalf("a plugin of protocol version 2: %v (%+v)", err, fail)
	}
}

// TestPluginProcessLogsThroughSlog: go-plugin's lines about the process and the lines the plugin
// process itself writes to its stderr reach the host's slog logger, in its format (here JSON),
// and nothing else: no second format beside it.
func TestPluginProcessLogsThroughSlog(t *testing.T) {
	dir, sum := install(t)
	var out syncBuffer
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	c, err := catalog.New(catalog.Config{Dir: dir, Logger: catalog.SlogLogger(log, hclog.Trace),
		Plugins: []catalog.Entry{{Name: "pager", Command: "pager", SHA256: sum, Settings: map[string]string{"allow_private": "true", "token": "t0ken"}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	url, keys := pagerReceiver(t, nil)
	p, err := notify.New(fast, notify.Deps{Log: memlog.New(), Notifiers: c})
	if err != nil {
		t.Fatal(err)
	}
	if ds, err := p.Notify(context.Background(), event(), rules(url)); err != nil || ds[0].Status != notify.StatusDelivered {
		t.Fatalf("delivery: %v", err)
	}
	<-keys
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	fromPlugin := 0
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil || line["msg"] == nil || line["level"] == nil {
			t.Fatalf("a line not in the logger's format: %q (%v)", l, err)
		}
		// go-plugin relays the lines the process writes (its own hclog's, at the other end of
		// the pipe) under the host logger's name and the process's: plugin.pager.pager.
		if mod, _ := line["module"].(string); strings.HasPrefix(mod, "plugin.pager.pager") {
			fromPlugin++
		}
	}
	if fromPlugin == 0 {
		t.Fatalf("no line of the plugin process came through the logger:\n%s", out.String())
	}
}

// syncBuffer is a bytes.Buffer that go-plugin's goroutines may write while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
