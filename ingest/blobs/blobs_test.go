package blobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
)

func testStore(t *testing.T, s Store) {
	ctx := context.Background()
	data := []byte("evidence bytes")
	sha, err := s.Put(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if sha != Digest(data) {
		t.Fatalf("digest %s, want %s", sha, Digest(data))
	}
	again, err := s.Put(ctx, data)
	if err != nil || again != sha {
		t.Fatalf("second put: %s %v", again, err)
	}
	got, err := s.Get(ctx, sha)
	if err != nil || string(got) != string(data) {
		t.Fatalf("get: %q %v", got, err)
	}
	if _, err := s.Get(ctx, Digest([]byte("other"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown digest: %v", err)
	}
}

func TestDir(t *testing.T) {
	d, err := NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, d)
}

// schemaDB connects to a fresh PostgreSQL schema, dropped when the test ends.
func schemaDB(t *testing.T) *sql.DB {
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
			t.Fatalf("postgres unreachable under CI: %v", err)
		}
		t.Skipf("postgres unreachable: %v", err)
	}
	schema := fmt.Sprintf("vt_blobs_%d", rand.Int64())
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	db.Close()
	t.Cleanup(func() {
		db, _ := sql.Open("pgx", dsn)
		db.Exec("DROP SCHEMA " + schema + " CASCADE")
		db.Close()
	})
	db, err = sql.Open("pgx", dsn+"&search_path="+schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestSQL(t *testing.T) {
	db := schemaDB(t)
	// Processes starting together each open the store on an empty schema (two evaluators and
	// ingest): every one succeeds.
	errs := make(chan error, 8)
	for range cap(errs) {
		go func() {
			_, err := NewSQL(context.Background(), db)
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent NewSQL: %v", err)
		}
	}
	s, err := NewSQL(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, s)
}

// TestSQLTableFromBeforeVersions: a blobs table created by a build before versioned migrations
// is recognized as version 1 and keeps its blobs.
func TestSQLTableFromBeforeVersions(t *testing.T) {
	db := schemaDB(t)
	ctx := context.Background()
	if _, err := db.Exec(`CREATE TABLE blobs (sha256 TEXT PRIMARY KEY, data BYTEA NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	old := []byte("stored by an older build")
	if _, err := db.Exec(`INSERT INTO blobs (sha256, data) VALUES ($1, $2)`, Digest(old), old); err != nil {
		t.Fatal(err)
	}
	s, err := NewSQL(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := migrations().Version(ctx, db); err != nil || v != 1 {
		t.Fatalf("version = %d, %v; want 1", v, err)
	}
	if got, err := s.Get(ctx, Digest(old)); err != nil || string(got) != string(old) {
		t.Fatalf("old blob = %q, %v", got, err)
	}
}
