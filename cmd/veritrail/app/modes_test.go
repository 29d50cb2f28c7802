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

	"github.com/veritrail/veritrail/bus/kafkabus"
	"github.com/veritrail/veritrail/bus/kafkabus/kafkatest"
	"github.com/veritrail/veritrail/evaluate/store"
	"github.com/veritrail/veritrail/ingest"
)

const (
	testOrg   = "acme"
	testToken = "vt_test_token_for_acme_0123456789"
)

// mode starts Veritrail one way and returns its base URL and a store handle. tune, when
// given, adjusts the configuration first.
type mode struct {
	name  string
	start func(t *testing.T, tune ...func(*Config)) (string, store.Store)
}

func modes() []mode {
	return []mode{{"embedded", startEmbedded}, {"distributed", startDistributed}}
}

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func baseConfig() Config {
	return Config{
		Addr: "127.0.0.1:0", BootstrapOrg: testOrg, BootstrapToken: testToken, Log: quietLog(),
		Ingest: ingest.Config{BaseURL: "http://veritrail.test", ConsistencyWait: 10 * time.Second},
	}
}

func startEmbedded(t *testing.T, tune ...func(*Config)) (string, store.Store) {
	t.Helper()
	cfg := baseConfig()
	cfg.DataDir = t.TempDir()
	for _, f := range tune {
		f(&cfg)
	}
	r, err := StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return "http://" + r.Addr, r.Store
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

// startDistributed runs ingest and evaluate as separate tiers on kfake and PostgreSQL.
func startDistributed(t *testing.T, tune ...func(*Config)) (string, store.Store) {
	t.Helper()
	cfg := baseConfig()
	cfg.Postgres = postgresSchema(t)
	cfg.Kafka = kafkabus.Config{Brokers: kafkatest.NewCluster(t, 4), Partitions: 4}
	for _, f := range tune {
		f(&cfg)
	}
	ev, err := StartEvaluate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	in, err := StartIngest(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return "http://" + in.Addr, in.Store
}

// env is a running Veritrail as a test sees it.
type env struct {
	k     *kosli      // the bootstrap admin of testOrg
	base  string      // http://host:port
	store store.Store // for provisioning identities, as `veritrail admin` does
}

// forEachMode runs the test body against every run mode.
func forEachMode(t *testing.T, body func(t *testing.T, e env)) {
	forEachModeWith(t, func(*Config) {}, body)
}

// forEachModeWith runs the test body against every run mode, each started with the
// configuration tune adjusts.
func forEachModeWith(t *testing.T, tune func(*Config), body func(t *testing.T, e env)) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			base, st := m.start(t, tune)
			// A burst can leave connections the client dialed but never used; the server's
			// shutdown would wait 5 s for each before closing it.
			t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
			body(t, env{k: newKosli(t, base+"/api/v2", testToken), base: base, store: st})
		})
	}
}
