package sqlstore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// The fixtures are stores made by the schema of commit 085c4de, before versioned migrations:
// tables created with CREATE TABLE IF NOT EXISTS and a digest in schema_version. The program
// testdata/mkfixture, run once at that commit, wrote testdata/store-085c4de.db (SQLite) and
// filled a PostgreSQL schema that pg_dump --inserts wrote to testdata/store-085c4de.sql; its
// documentation has the commands.
const (
	fixtureSQLite   = "testdata/store-085c4de.db"
	fixturePostgres = "testdata/store-085c4de.sql"
	fixtureSchema   = "veritrail_fixture" // the schema name in the dump
)

// TestUpgradeFixture opens each fixture with this build: the database is recognized as
// version 1 (its evidence kept, not re-created), migrated to the latest version, and its
// evidence reads back through the store.
func TestUpgradeFixture(t *testing.T) {
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		b, err := os.ReadFile(fixtureSQLite)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		checkUpgraded(t, openSQLite(t, path))
		// Opened again, it is up to date.
		s := openSQLite(t, path)
		checkUpgraded(t, s)
		checkWritable(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
		if dsn == "" {
			dsn = defaultPostgres
		}
		schema := createSchema(t, connectPostgres(t, dsn))
		dump, err := os.ReadFile(fixturePostgres)
		if err != nil {
			t.Fatal(err)
		}
		restore(t, dsn, schema, string(dump))
		for i := range 2 {
			s, err := sqlstore.OpenPostgres(ctx, withSearchPath(dsn, schema))
			if err != nil {
				t.Fatal(err)
			}
			checkUpgraded(t, s)
			if i == 1 {
				checkWritable(t, s)
			}
			s.Close()
		}
	})
}

// restore runs a pg_dump of fixtureSchema into schema, which exists and is empty.
func restore(t *testing.T, dsn, schema, dump string) {
	t.Helper()
	var stmts []string
	for _, line := range strings.Split(dump, "\n") {
		// psql's meta-commands (\restrict) and the schema, which createSchema made.
		if strings.HasPrefix(line, `\`) || strings.HasPrefix(line, "CREATE SCHEMA ") {
			continue
		}
		stmts = append(stmts, line)
	}
	script := strings.ReplaceAll(strings.Join(stmts, "\n"), fixtureSchema+".", schema+".")
	// The simple protocol runs the whole script in one Exec; the dump's set_config stays in
	// this connection, closed at once.
	db, err := sql.Open("pgx", withParam(dsn, "default_query_exec_mode", "simple_protocol"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(script); err != nil {
		t.Fatalf("restore %s: %v", fixturePostgres, err)
	}
}

// latestVersion is the store's last migration (migrations in migrate.go).
const latestVersion = 16

func checkUpgraded(t *testing.T, s *sqlstore.Store) {
	t.Helper()
	ctx := context.Background()
	if v, err := s.SchemaVersion(ctx); err != nil || v != latestVersion {
		t.Fatalf("schema version = %d, %v; want %d", v, err, latestVersion)
	}
	var n int
	if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM store_migrations`).Scan(&n); err != nil || n != latestVersion {
		t.Fatalf("store_migrations rows = %d, %v; want %d", n, err, latestVersion)
	}
	// Version 7's index, which the fixture's schema did not have.
	err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'trails_flow'`).Scan(&n)
	if err != nil { // PostgreSQL
		err = s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_indexes
			WHERE schemaname = current_schema() AND indexname = 'trails_flow'`).Scan(&n)
	}
	if err != nil || n != 1 {
		t.Fatalf("index trails_flow: %d, %v; want it", n, err)
	}
	org, err := s.OrgByName(ctx, "acme")
	if err != nil || org.ID != "org-fixture" {
		t.Fatalf("org = %+v, %v", org, err)
	}
	flow, err := s.FlowByName(ctx, org.ID, "backend")
	if err != nil || flow.ID != "flow-1" || flow.Description != "the backend" || flow.Tags["team"] != "core" {
		t.Fatalf("flow = %+v, %v", flow, err)
	}
	trail, err := s.TrailByName(ctx, flow.ID, "v1.0.0")
	if err != nil || trail.ID != "trail-1" || trail.CreatedBy != "ci" || trail.CreatedAt != 1700000002 {
		t.Fatalf("trail = %+v, %v", trail, err)
	}
	arts, err := s.TrailArtifacts(ctx, trail.ID)
	if err != nil || len(arts) != 1 {
		t.Fatalf("artifacts = %+v, %v", arts, err)
	}
	if a := arts[0]; a.ID != "art-1" || a.Filename != "app.tar" || a.RepoName != "acme/backend" || string(a.Report) != `{"size":42}` {
		t.Fatalf("artifact = %+v", a)
	}
	atts, err := s.TrailAttestations(ctx, trail.ID)
	if err != nil || len(atts) != 1 {
		t.Fatalf("attestations = %+v, %v", atts, err)
	}
	if a := atts[0]; a.ID != "att-1" || a.Name != "unit-tests" || a.Type != "junit" || !a.IsCompliant ||
		a.TargetArtifact != "app" || string(a.Data) != `{"passed":12}` {
		t.Fatalf("attestation = %+v", a)
	}
}

// checkWritable writes evidence to the upgraded tables and reads it back.
func checkWritable(t *testing.T, s *sqlstore.Store) {
	t.Helper()
	ctx := context.Background()
	err := s.Update(ctx, func(tx store.Tx) error {
		return tx.InsertAttestation(ctx, store.Attestation{ID: "att-2", OrgID: "org-fixture", FlowID: "flow-1",
			TrailID: "trail-1", Name: "lint", Type: "generic", Data: []byte(`{}`), CreatedAt: 1700000100})
	})
	if err != nil {
		t.Fatalf("write after the upgrade: %v", err)
	}
	if a, err := s.AttestationByID(ctx, "org-fixture", "att-2"); err != nil || a.Name != "lint" {
		t.Fatalf("attestation written after the upgrade = %+v, %v", a, err)
	}
	// Version 7's table: the web UI's sessions.
	sess := store.WebSession{TokenHash: []byte("token-hash"), KeyHash: []byte("key-hash"), CreatedAt: 1700000100, ExpiresAt: 1700003700}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatalf("create a web session after the upgrade: %v", err)
	}
	if got, err := s.SessionByHash(ctx, sess.TokenHash, 1700000200); err != nil || string(got.KeyHash) != "key-hash" {
		t.Fatalf("web session after the upgrade = %+v, %v", got, err)
	}
}

// TestOpenUpToDateTakesNoLock: opening a store already at the latest version only reads the
// version, so it does not wait for a session holding the migrations' advisory lock
// (PostgreSQL) or the write lock (SQLite). If it waited, the holder, which releases only once
// the open returned, would make the test fail (busy timeout) or wait for its failsafe.
func TestOpenUpToDateTakesNoLock(t *testing.T) {
	ctx := context.Background()
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
		if dsn == "" {
			dsn = defaultPostgres
		}
		admin := connectPostgres(t, dsn)
		schema := createSchema(t, admin)
		dsn = withSearchPath(dsn, schema)
		first, err := sqlstore.OpenPostgres(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		holder, err := admin.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		const migrateLockKey = 74657275 // sqlstore's
		if _, err := holder.Exec(`SELECT pg_advisory_xact_lock(hashtext($1), $2)`, schema, migrateLockKey); err != nil {
			t.Fatal(err)
		}
		opened := make(chan error, 1)
		go func() {
			s, err := sqlstore.OpenPostgres(ctx, dsn)
			if err == nil {
				s.Close()
			}
			opened <- err
		}()
		select {
		case err := <-opened:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("opening an up-to-date store waited for the migration lock")
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		openSQLite(t, path)
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(ctx, `ROLLBACK`)
		openSQLite(t, path)
	})
}

// TestUpgradedFixtureMatchesNewStore: the fixture, upgraded, has exactly the tables, columns
// and indexes of a store this build creates afresh.
func TestUpgradedFixtureMatchesNewStore(t *testing.T) {
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		b, err := os.ReadFile(fixtureSQLite)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "upgraded.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		upgraded := schemaOf(t, openSQLite(t, path).DB(), `SELECT type || ' ' || name || ': ' || COALESCE(sql, '')
			FROM sqlite_master ORDER BY type, name`, "")
		fresh := schemaOf(t, openSQLite(t, filepath.Join(t.TempDir(), "fresh.db")).DB(), `SELECT type || ' ' || name || ': ' || COALESCE(sql, '')
			FROM sqlite_master ORDER BY type, name`, "")
		sameSchema(t, upgraded, fresh)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
		if dsn == "" {
			dsn = defaultPostgres
		}
		admin := connectPostgres(t, dsn)
		old, fresh := createSchema(t, admin), createSchema(t, admin)
		dump, err := os.ReadFile(fixturePostgres)
		if err != nil {
			t.Fatal(err)
		}
		restore(t, dsn, old, string(dump))
		const q = `SELECT 'column ' || table_name || '.' || column_name || ' ' || ordinal_position || ' ' || data_type || ' ' ||
				is_nullable || ' ' || COALESCE(column_default, '')
				FROM information_schema.columns WHERE table_schema = current_schema()
			UNION ALL SELECT 'index ' || indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
			UNION ALL SELECT 'constraint ' || conrelid::regclass::text || ' ' || contype::text || ' ' || pg_get_constraintdef(oid)
				FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
			ORDER BY 1`
		var schemas [2][]string
		for i, name := range []string{old, fresh} {
			s, err := sqlstore.OpenPostgres(ctx, withSearchPath(dsn, name))
			if err != nil {
				t.Fatal(err)
			}
			schemas[i] = schemaOf(t, s.DB(), q, name)
			s.Close()
		}
		sameSchema(t, schemas[0], schemas[1])
	})
}

// schemaOf lists the rows of q, with the schema name (if any) replaced by a placeholder.
func schemaOf(t *testing.T, db *sql.DB, q, schema string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		if schema != "" {
			line = strings.ReplaceAll(line, schema, "SCHEMA")
		}
		if !strings.Contains(line, "store_migrations") {
			out = append(out, line)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSchema(t *testing.T, upgraded, fresh []string) {
	t.Helper()
	if len(fresh) < 50 {
		t.Fatalf("a new store's schema has %d objects: the query found too little", len(fresh))
	}
	if strings.Join(upgraded, "\n") != strings.Join(fresh, "\n") {
		t.Errorf("upgraded fixture:\n%s\n\nnew store:\n%s", strings.Join(upgraded, "\n"), strings.Join(fresh, "\n"))
	}
}
