package app

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/veritrail/veritrail/evaluate"
	"github.com/veritrail/veritrail/ingest"
	"github.com/veritrail/veritrail/internal/bus/kafkabus"
	"github.com/veritrail/veritrail/internal/bus/kafkabus/kafkatest"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/notify"
	"github.com/veritrail/veritrail/notify/catalog"
	"github.com/veritrail/veritrail/notify/tier"
)

const (
	testOrg   = "acme"
	testToken = "vt_test_token_for_acme_0123456789"
)

// mode starts Veritrail one way with cfg.
type mode struct {
	name  string
	start func(t *testing.T, cfg Config) env
}

func modes() []mode {
	return []mode{{"embedded", func(t *testing.T, cfg Config) env { return startEmbeddedWith(t, cfg) }}, {"distributed", startDistributedWith}}
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// baseConfig is what every test runs with. Notifications are retried within milliseconds,
// webhooks may reach the tests' loopback receivers, and the relay polls often (the
// compliance tests write triggers through the store, which wakes no relay).
func baseConfig() Config {
	return Config{
		Addr: "127.0.0.1:0", BootstrapOrg: testOrg, BootstrapToken: testToken, Log: quietLog(),
		Ingest: ingest.Config{BaseURL: "http://veritrail.test", ConsistencyWait: 10 * time.Second},
		Relay:  evaluate.RelayConfig{Poll: 20 * time.Millisecond},
		Notify: NotifyConfig{
			Notifiers: tier.NotifiersConfig{AllowPrivate: true},
			Tier: tier.Config{Pipeline: notify.Config{Budget: 30 * time.Second, AttemptTimeout: 10 * time.Second,
				InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, LeaseMargin: 5 * time.Second}},
		},
	}
}

// startEmbedded starts the embedded mode with baseConfig, adjusted by tune.
func startEmbedded(t *testing.T, tune ...func(*Config)) (string, store.Store) {
	t.Helper()
	cfg := baseConfig()
	for _, f := range tune {
		f(&cfg)
	}
	e := startEmbeddedWith(t, cfg)
	return e.base, e.store
}

func startEmbeddedWith(t testing.TB, cfg Config) env {
	t.Helper()
	cfg.DataDir = t.TempDir()
	r, err := StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return env{base: "http://" + r.Addr, store: r.Store, catalog: r.Catalog, tiers: map[string]string{"serve": "http://" + r.Addr}}
}

// postgresSchema makes an isolated schema and returns a DSN that uses it.
func postgresSchema(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	db, err := sql.Open("pgx", dsn)
	if err == nil {
		err = db.Ping()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is unreachable under CI: %v", err)
		}
		t.Skipf("PostgreSQL is unreachable: %v", err)
	}
	schema := fmt.Sprintf("vt_e2e_%d", rand.Uint64()>>1)
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Exec("DROP SCHEMA " + schema + " CASCADE")
		db.Close()
	})
	return dsn + "&search_path=" + schema
}

// startDistributedWith runs ingest, evaluate and notify as separate tiers on kfake and
// PostgreSQL.
func startDistributedWith(t *testing.T, cfg Config) env {
	t.Helper()
	cfg.Postgres = postgresSchema(t)
	cfg.Kafka = kafkabus.Config{Brokers: kafkatest.NewCluster(t, 4), Partitions: 4}
	cfg.AdminAddr = "127.0.0.1:0"
	ev, err := StartEvaluate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	nt, err := StartNotify(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nt.Close() })
	in, err := StartIngest(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return env{base: "http://" + in.Addr, store: in.Store, catalog: nt.Catalog,
		tiers: map[string]string{"ingest": "http://" + in.Addr, "evaluate": "http://" + ev.AdminAddr, "notify": "http://" + nt.AdminAddr}}
}

// env is a running Veritrail as a test sees it.
type env struct {
	k       *kosli           // the bootstrap admin of testOrg
	base    string           // http://host:port
	store   store.Store      // for provisioning identities, as `veritrail admin` does
	catalog *catalog.Catalog // the notify tier's notifiers
	// tiers are the base URLs of the ports serving each tier's /metrics, /livez and /readyz
	// (serve's API port; ingest's API port and the admin ports of evaluate and notify).
	tiers map[string]string
}

// forEachMode runs the test body against every run mode.
func forEachMode(t *testing.T, body func(t *testing.T, e env)) {
	forEachModeWith(t, nil, body)
}

// forEachModeWith runs the test body against every run mode, started with baseConfig changed
// by configure (when not nil).
func forEachModeWith(t *testing.T, configure func(*Config), body func(t *testing.T, e env)) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			cfg := baseConfig()
			if configure != nil {
				configure(&cfg)
			}
			e := m.start(t, cfg)
			// A burst can leave connections the client dialed but never used; the server's
			// shutdown would wait 5 s for each before closing it.
			t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
			e.k = newKosli(t, e.base+"/api/v2", testToken)
			body(t, e)
		})
	}
}
