package migrate_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/veritrail/veritrail/internal/migrate"
	"github.com/veritrail/veritrail/internal/pgtest"
)

// counted is a plan of two migrations that counts how often each body ran.
func counted(postgres bool, runs *[2]atomic.Int32) migrate.Plan {
	return migrate.Plan{
		Postgres: postgres,
		Table:    "test_migrations",
		LockKey:  1,
		Migrations: []migrate.Migration{
			{Version: 1, Name: "items", Up: func(ctx context.Context, tx migrate.Execer) error {
				runs[0].Add(1)
				return migrate.Statements(`CREATE TABLE items (id TEXT PRIMARY KEY)`)(ctx, tx)
			}},
			{Version: 2, Name: "items.note", Up: func(ctx context.Context, tx migrate.Execer) error {
				runs[1].Add(1)
				return migrate.Statements(`ALTER TABLE items ADD COLUMN note TEXT NOT NULL DEFAULT ''`)(ctx, tx)
			}},
		},
	}
}

func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	q := url.Values{}
	// busy_timeout first: the pragmas run in order on every new connection, and switching to WAL
	// needs a lock that connections opening together would otherwise fail to get (SQLITE_BUSY).
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "m.db")+"?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// One connection first, as the store opens: it switches the new file to WAL, which needs an
	// exclusive lock that connections racing to open a fresh file may fail to get (SQLITE_BUSY,
	// before busy_timeout applies). The tests are about migrations taking turns, not that.
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	return db
}

// openPostgres opens a fresh schema, dropped when the test ends, as the search path.
func openPostgres(t *testing.T) (*sql.DB, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	b := make([]byte, 8)
	rand.Read(b)
	schema := "vt_migrate_" + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, schema
}

func both(t *testing.T, fn func(t *testing.T, db *sql.DB, postgres bool)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, openSQLite(t), false) })
	t.Run("postgres", func(t *testing.T) {
		db, _ := openPostgres(t)
		fn(t, db, true)
	})
}

func version(t *testing.T, p migrate.Plan, db *sql.DB) int {
	t.Helper()
	v, err := p.Version(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAppliesInOrderOnce(t *testing.T) {
	both(t, func(t *testing.T, db *sql.DB, postgres bool) {
		ctx := context.Background()
		var runs [2]atomic.Int32
		p := counted(postgres, &runs)
		if v := version(t, p, db); v != 0 {
			t.Fatalf("version of an empty database = %d", v)
		}
		for range 2 {
			if err := p.Apply(ctx, db); err != nil {
				t.Fatal(err)
			}
		}
		if runs[0].Load() != 1 || runs[1].Load() != 1 {
			t.Fatalf("runs = %d, %d; want each once", runs[0].Load(), runs[1].Load())
		}
		if v := version(t, p, db); v != 2 {
			t.Fatalf("version = %d, want 2", v)
		}
		if _, err := db.Exec(`INSERT INTO items (id, note) VALUES ('a', 'b')`); err != nil {
			t.Fatalf("the migrated table: %v", err)
		}
	})
}

// TestUpgradesInPlace: a database at version 1 gets only version 2, its rows kept.
func TestUpgradesInPlace(t *testing.T) {
	both(t, func(t *testing.T, db *sql.DB, postgres bool) {
		ctx := context.Background()
		var runs [2]atomic.Int32
		p := counted(postgres, &runs)
		first := p
		first.Migrations = p.Migrations[:1]
		if err := first.Apply(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO items (id) VALUES ('kept')`); err != nil {
			t.Fatal(err)
		}
		if err := p.Apply(ctx, db); err != nil {
			t.Fatal(err)
		}
		var note string
		if err := db.QueryRow(`SELECT note FROM items WHERE id = 'kept'`).Scan(&note); err != nil || note != "" {
			t.Fatalf("kept row: note %q, %v", note, err)
		}
		if runs[0].Load() != 1 || runs[1].Load() != 1 {
			t.Fatalf("runs = %d, %d; want each once", runs[0].Load(), runs[1].Load())
		}
	})
}

// TestBaseline: a database made before versions is stamped 1 without running it.
func TestBaseline(t *testing.T) {
	both(t, func(t *testing.T, db *sql.DB, postgres bool) {
		ctx := context.Background()
		if _, err := db.Exec(`CREATE TABLE items (id TEXT PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		var runs [2]atomic.Int32
		p := counted(postgres, &runs)
		p.Baseline = func(ctx context.Context, tx migrate.Execer) (bool, error) { return true, nil }
		if err := p.Apply(ctx, db); err != nil {
			t.Fatal(err)
		}
		if runs[0].Load() != 0 || runs[1].Load() != 1 {
			t.Fatalf("runs = %d, %d; want 0, 1", runs[0].Load(), runs[1].Load())
		}
		if v := version(t, p, db); v != 2 {
			t.Fatalf("version = %d, want 2", v)
		}
	})
}

// TestFailedMigrationRollsBack: a failing version leaves the database at the one before, with
// none of the failed version's changes.
func TestFailedMigrationRollsBack(t *testing.T) {
	both(t, func(t *testing.T, db *sql.DB, postgres bool) {
		ctx := context.Background()
		var runs [2]atomic.Int32
		p := counted(postgres, &runs)
		p.Migrations[1].Up = migrate.Statements(`CREATE TABLE half (id TEXT)`, `SELECT * FROM no_such_table`)
		if err := p.Apply(ctx, db); err == nil {
			t.Fatal("Apply succeeded with a failing migration")
		}
		if v := version(t, p, db); v != 1 {
			t.Fatalf("version = %d, want 1", v)
		}
		if _, err := db.Exec(`SELECT * FROM half`); err == nil {
			t.Fatal("the failed migration's table exists")
		}
	})
}

func TestRefusesNewerDatabase(t *testing.T) {
	both(t, func(t *testing.T, db *sql.DB, postgres bool) {
		ctx := context.Background()
		var runs [2]atomic.Int32
		p := counted(postgres, &runs)
		if err := p.Apply(ctx, db); err != nil {
			t.Fatal(err)
		}
		older := p
		older.Migrations = p.Migrations[:1]
		if err := older.Apply(ctx, db); !errors.Is(err, migrate.ErrNewer) {
			t.Fatalf("Apply of an older build = %v, want ErrNewer", err)
		}
	})
}

// TestConcurrentApply: processes opening an empty schema together each run every migration
// at most once between them.
func TestConcurrentApply(t *testing.T) {
	both(t, func(t *testing.T, db *sql.DB, postgres bool) {
		var runs [2]atomic.Int32
		p := counted(postgres, &runs)
		errs := make(chan error, 4)
		for range 4 {
			go func() { errs <- p.Apply(context.Background(), db) }()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if runs[0].Load() != 1 || runs[1].Load() != 1 {
			t.Fatalf("runs = %d, %d; want each once", runs[0].Load(), runs[1].Load())
		}
	})
}

// TestUpToDateTakesNoLock: at the latest version Apply only reads, so it returns while
// another session holds the migration lock (PostgreSQL) or the write lock (SQLite). If it
// took either it would wait for a release that comes only after it returned.
func TestUpToDateTakesNoLock(t *testing.T) {
	ctx := context.Background()
	t.Run("postgres", func(t *testing.T) {
		db, _ := openPostgres(t)
		var runs [2]atomic.Int32
		p := counted(true, &runs)
		if err := p.Apply(ctx, db); err != nil {
			t.Fatal(err)
		}
		holder, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		if _, err := holder.Exec(`SELECT pg_advisory_xact_lock(hashtext(current_schema()), $1)`, p.LockKey); err != nil {
			t.Fatal(err)
		}
		// A writer on the migrated table too: DDL on it would queue behind this.
		if _, err := holder.Exec(`INSERT INTO items (id) VALUES ('held')`); err != nil {
			t.Fatal(err)
		}
		if err := p.Apply(ctx, db); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		db := openSQLite(t)
		var runs [2]atomic.Int32
		p := counted(false, &runs)
		if err := p.Apply(ctx, db); err != nil {
			t.Fatal(err)
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(ctx, `ROLLBACK`)
		// Reads in WAL mode do not wait for the writer; a write would fail after busy_timeout.
		if err := p.Apply(ctx, db); err != nil {
			t.Fatal(err)
		}
	})
}
