package sqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for creating schemas

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
	"github.com/veritrail/veritrail/internal/store/storetest"
)

// defaultPostgres is used when VERITRAIL_TEST_POSTGRES is unset.
const defaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

func TestSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := openSQLite(t, filepath.Join(t.TempDir(), "veritrail.db"))
		sqlstore.RetakePageAnchorsAtOnce(s)
		return s
	})
}

func openSQLite(t *testing.T, path string) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// TestSQLiteReopen checks that committed data survives closing, and that opening an existing
// database (migrating again) works.
func TestSQLiteReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "veritrail.db")
	s, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateOrg(ctx, store.Org{ID: "org-a", Name: "acme", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	err = s.Update(ctx, func(tx store.Tx) error { return tx.MarkApplied(ctx, "m-1", "", 1) })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openSQLite(t, path)
	if o, err := s.OrgByName(ctx, "acme"); err != nil || o.ID != "org-a" {
		t.Errorf("OrgByName after reopen = %+v, %v", o, err)
	}
	if ok, err := s.Visible(ctx, []string{"m-1"}); err != nil || !ok {
		t.Errorf("Visible after reopen = %v, %v", ok, err)
	}
}

// TestPing: a store answers Ping while it is open, and fails it once closed, on both dialects.
func TestPing(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "veritrail.db"))
	if err != nil {
		t.Fatal(err)
	}
	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultPostgres
	}
	pg, err := sqlstore.OpenPostgres(ctx, withSearchPath(dsn, createSchema(t, connectPostgres(t, dsn))))
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*sqlstore.Store{"sqlite": sq, "postgres": pg} {
		if err := s.Ping(ctx); err != nil {
			t.Errorf("%s: Ping of an open store: %v", name, err)
		}
		if err := s.CreateOrg(ctx, store.Org{ID: "org-a", Name: "acme", CreatedAt: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(ctx); err != nil {
			t.Errorf("%s: Ping of a store with an organization: %v", name, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(ctx); err == nil {
			t.Errorf("%s: Ping of a closed store passed", name)
		}
	}
}

func TestPostgres(t *testing.T) {
	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultPostgres
	}
	admin := connectPostgres(t, dsn)
	storetest.Run(t, func(t *testing.T) store.Store {
		schema := createSchema(t, admin)
		s, err := sqlstore.OpenPostgres(context.Background(), withSearchPath(dsn, schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // runs before the schema is dropped
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		sqlstore.RetakePageAnchorsAtOnce(s)
		return s
	})
}

// connectPostgres returns a connection for managing schemas. An unreachable server skips the
// test, except in CI, which must never skip it silently.
func connectPostgres(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL at VERITRAIL_TEST_POSTGRES is unreachable: %v", err)
		}
		t.Skipf("PostgreSQL unreachable (set VERITRAIL_TEST_POSTGRES): %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// createSchema creates a uniquely named schema, dropped when the test ends.
func createSchema(t *testing.T, admin *sql.DB) string {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	schema := "vt_test_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// withSearchPath adds search_path, which pgx sends as a run-time parameter, to a URL or
// key=value DSN.
func withSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return strings.TrimSpace(dsn) + " search_path=" + schema
}

// TestPostgresConcurrentOpen: tiers starting at the same moment on an empty database all
// succeed (CREATE TABLE IF NOT EXISTS alone races on PostgreSQL).
func TestPostgresConcurrentOpen(t *testing.T) {
	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultPostgres
	}
	dsn = withSearchPath(dsn, createSchema(t, connectPostgres(t, dsn)))
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			st, err := sqlstore.OpenPostgres(context.Background(), dsn)
			if err == nil {
				st.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostgresOpenBesideWriters: a process starting beside running ones (a second evaluator,
// a restarted ingest) must not wait for their transactions. Migrations used to run their DDL
// every time, and CREATE INDEX IF NOT EXISTS takes a SHARE lock on its table even when the
// index exists: the opening process queued behind a writer while holding locks the writer's
// next statement needed, and PostgreSQL broke the cycle by failing the migration.
func TestPostgresOpenBesideWriters(t *testing.T) {
	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultPostgres
	}
	dsn = withSearchPath(dsn, createSchema(t, connectPostgres(t, dsn)))
	ctx := context.Background()
	running, err := sqlstore.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()

	opened := make(chan error, 1)
	held := make(chan struct{})
	writer := make(chan error, 1)
	go func() {
		writer <- running.Update(ctx, func(tx store.Tx) error {
			// A write to a table with an index, left uncommitted while another process opens.
			if err := tx.InsertAudit(ctx, store.AuditRecord{ID: "a-1", OrgID: "o", Operation: "x", At: 1}); err != nil {
				return err
			}
			close(held)
			select {
			case err := <-opened:
				opened <- err
				return nil
			case <-time.After(2 * time.Minute):
				return errors.New("the second open waited for the writer's transaction")
			}
		})
	}()
	<-held
	go func() {
		st, err := sqlstore.OpenPostgres(ctx, dsn)
		if err == nil {
			st.Close()
		}
		opened <- err
	}()
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("open beside a writer: %v", err)
	}
}

// TestPostgresWithoutJIT: the store's connections run without JIT compilation unless the DSN
// asks for it. Expanding change notices, planned over a large guess of rows, compiled for 0.6 s
// at every save once the store was large.
func TestPostgresWithoutJIT(t *testing.T) {
	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultPostgres
	}
	schema := createSchema(t, connectPostgres(t, dsn))
	for _, c := range []struct{ dsn, want string }{
		{withSearchPath(dsn, schema), "off"},
		{withParam(withSearchPath(dsn, schema), "jit", "on"), "on"},
	} {
		s, err := sqlstore.OpenPostgres(context.Background(), c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if got := sqlstore.Setting(t, s, "jit"); got != c.want {
			t.Errorf("jit = %s with DSN %q, want %s", got, c.dsn, c.want)
		}
		s.Close()
	}
}
