package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/kafkabus/kafkatest"
)

// TestReadyzOnEveryTier: ingest's API port and the admin ports of evaluate and notify answer
// /livez 200 throughout and /readyz 503 naming the failing dependency while the Kafka broker
// is down and while PostgreSQL is unreachable, 200 again once each is back. Each tier keeps
// running through both.
func TestReadyzOnEveryTier(t *testing.T) {
	cluster := kafkatest.NewRestartable(t, 4)
	dsn := postgresSchema(t)
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("this test needs VERITRAIL_TEST_POSTGRES as a URL, got %q", dsn)
	}
	proxy := newTCPProxy(t, u.Host)
	u.Host = proxy.addr
	cfg := baseConfig()
	cfg.Postgres = u.String()
	cfg.Kafka = kafkabus.Config{Brokers: cluster.Addrs(), Partitions: 4}
	cfg.AdminAddr = "127.0.0.1:0"
	cfg.Ingest.ReadyCache = 20 * time.Millisecond
	// The dependencies fail on purpose here; their errors are expected.
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	tiers := map[string]string{}
	for name, start := range map[string]func(context.Context, Config) (*Running, error){
		"evaluate": StartEvaluate, "notify": StartNotify, "ingest": StartIngest} {
		r, err := start(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() { r.Close() })
		tiers[name] = "http://" + r.AdminAddr
		if name == "ingest" {
			tiers[name] = "http://" + r.Addr
		}
	}
	all := func(status int, failing ...string) {
		t.Helper()
		for name, base := range tiers {
			waitReadyz(t, name, base, status, failing)
		}
	}
	all(http.StatusOK)
	cluster.Stop()
	all(http.StatusServiceUnavailable, "bus")
	cluster.Start()
	all(http.StatusOK)
	proxy.Stop()
	all(http.StatusServiceUnavailable, "store", "migrations")
	proxy.Start()
	all(http.StatusOK)
}

// TestReadyzEmbedded: serve answers /livez and /readyz on its API port, and /ready keeps its
// plain-text answer beside them.
func TestReadyzEmbedded(t *testing.T) {
	e := startEmbeddedWith(t, baseConfig())
	waitReadyz(t, "serve", e.base, http.StatusOK, nil)
	waitReady(t, e.base, http.StatusOK, "")
}

// waitReadyz polls base's /readyz until it answers status naming exactly the failing checks;
// /livez must answer 200 meanwhile.
func waitReadyz(t *testing.T, tier, base string, status int, failing []string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		live, err := hc.Get(base + "/livez")
		if err != nil {
			t.Fatalf("%s /livez: %v", tier, err)
		}
		live.Body.Close()
		if live.StatusCode != http.StatusOK {
			t.Fatalf("%s /livez answered %d", tier, live.StatusCode)
		}
		resp, err := hc.Get(base + "/readyz")
		if err != nil {
			t.Fatalf("%s /readyz: %v", tier, err)
		}
		var body struct {
			Status  string
			Failing []struct{ Check, Reason string }
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = resp.Status + " " + string(raw)
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("%s /readyz body %q: %v", tier, raw, err)
		}
		var names []string
		for _, f := range body.Failing {
			names = append(names, f.Check)
		}
		if resp.StatusCode == status && slices.Equal(names, failing) {
			if status == http.StatusServiceUnavailable && (resp.Header.Get("Retry-After") == "" || body.Status != "not ready") {
				t.Fatalf("%s /readyz: %s, headers %v", tier, last, resp.Header)
			}
			return
		}
	}
	t.Fatalf("%s /readyz did not answer %d failing %v within 30 s; last: %s", tier, status, failing, last)
}
