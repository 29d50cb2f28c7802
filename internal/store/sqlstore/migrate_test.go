package sqlstore_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// oldKeysTable is api_keys as builds before service accounts made it.
const oldKeysTable = `CREATE TABLE api_keys (id TEXT PRIMARY KEY, hash %s NOT NULL UNIQUE, org_id TEXT NOT NULL DEFAULT '',
	user_id TEXT NOT NULL DEFAULT '', name TEXT NOT NULL, role TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
	expires_at DOUBLE PRECISION NOT NULL DEFAULT 0, revoked INTEGER NOT NULL DEFAULT 0)`

// TestAddsColumns opens a database made by a build that predates service accounts: its keys
// keep working and the new columns are usable.
func TestAddsColumns(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "old.db")
		testAddsColumns(t, "sqlite", "file:"+path, "BLOB", `?`, func() *sqlstore.Store { return openSQLite(t, path) })
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
		if dsn == "" {
			dsn = defaultPostgres
		}
		dsn = withSearchPath(dsn, createSchema(t, connectPostgres(t, dsn)))
		testAddsColumns(t, "pgx", dsn, "BYTEA", `$1`, func() *sqlstore.Store {
			s, err := sqlstore.OpenPostgres(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
}

func testAddsColumns(t *testing.T, driver, dsn, blob, param string, open func() *sqlstore.Store) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte("old-secret"))
	if _, err := db.Exec(fmt.Sprintf(oldKeysTable, blob)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO api_keys (id, hash, org_id, name, role, created_at)
		VALUES ('k-old', `+param+`, 'org-a', 'ci', 'member', 1)`, h[:]); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := open()
	ctx := context.Background()
	k, err := s.KeyByHash(ctx, h[:])
	if err != nil || k.ID != "k-old" || k.Role != store.RoleMember || k.OrgID != "org-a" || k.ServiceAccountID != "" {
		t.Fatalf("old key = %+v, %v", k, err)
	}
	nk := store.APIKey{ID: "k-new", Hash: []byte("new"), OrgID: "org-a", Name: "x", Description: "described", Role: store.RoleReader}
	if err := s.CreateKey(ctx, nk); err != nil {
		t.Fatal(err)
	}
	if got, err := s.KeyByID(ctx, "k-new"); err != nil || got.Description != "described" {
		t.Fatalf("new key = %+v, %v", got, err)
	}
}
