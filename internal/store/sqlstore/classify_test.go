package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// sqliteError stands for modernc.org/sqlite's *Error, which has no exported constructor.
type sqliteError int

func (e sqliteError) Error() string { return fmt.Sprintf("sqlite error %d", int(e)) }
func (e sqliteError) Code() int     { return int(e) }

func TestClassifySQLStates(t *testing.T) {
	cases := []struct {
		code string
		want store.ErrorClass
	}{
		// Transient: the moment, not the message.
		{"08000", store.ClassTransient}, {"08003", store.ClassTransient}, {"08006", store.ClassTransient}, // connection
		{"28P01", store.ClassTransient},                                                                   // authentication
		{"40001", store.ClassTransient}, {"40P01", store.ClassTransient}, {"40003", store.ClassTransient}, // serialization, deadlock
		{"53100", store.ClassTransient}, {"53200", store.ClassTransient}, {"53300", store.ClassTransient}, // disk, memory, connections
		{"55P03", store.ClassTransient}, {"55006", store.ClassTransient}, // lock not available, object in use
		{"57014", store.ClassTransient}, {"57P01", store.ClassTransient}, {"57P02", store.ClassTransient},
		{"57P03", store.ClassTransient},                                  // canceled, admin shutdown, crash shutdown, cannot connect now
		{"58030", store.ClassTransient},                                  // I/O error
		{"25P03", store.ClassTransient}, {"XX001", store.ClassTransient}, // idle timeout, corrupted data
		// Permanent: the message.
		{"22021", store.ClassPermanent}, {"22P02", store.ClassPermanent}, {"22001", store.ClassPermanent}, // encoding, syntax, length
		{"22003", store.ClassPermanent},                                                                   // numeric out of range
		{"23505", store.ClassPermanent}, {"23503", store.ClassPermanent}, {"23502", store.ClassPermanent}, // unique, foreign key, not null
		{"23514", store.ClassPermanent}, {"40002", store.ClassPermanent}, // check, deferred constraint
		{"42601", store.ClassPermanent}, {"42703", store.ClassPermanent}, {"42501", store.ClassPermanent}, // syntax, column, privilege
		{"21000", store.ClassPermanent}, {"54000", store.ClassPermanent}, // cardinality, program limit
		// Neither recognisably.
		{"XX000", store.ClassUnknown}, {"25P02", store.ClassUnknown}, {"0A000", store.ClassUnknown}, {"P0001", store.ClassUnknown},
		{"", store.ClassUnknown},
	}
	for _, c := range cases {
		err := fmt.Errorf("sqlstore: insert attestations: %w", &pgconn.PgError{Code: c.code, Message: "m"})
		if got := sqlstore.Classify(err); got != c.want {
			t.Errorf("SQLSTATE %q: %s, want %s", c.code, got, c.want)
		}
	}
}

func TestClassifySQLiteCodes(t *testing.T) {
	cases := []struct {
		code int
		want store.ErrorClass
	}{
		{5, store.ClassTransient}, {5 | 1<<8, store.ClassTransient}, // BUSY, BUSY_RECOVERY
		{6, store.ClassTransient}, {6 | 1<<8, store.ClassTransient}, // LOCKED, LOCKED_SHAREDCACHE
		{7, store.ClassTransient}, {8, store.ClassTransient}, {9, store.ClassTransient}, // NOMEM, READONLY, INTERRUPT
		{10, store.ClassTransient}, {10 | 3<<8, store.ClassTransient}, // IOERR, IOERR_WRITE
		{11, store.ClassTransient}, {13, store.ClassTransient}, {14, store.ClassTransient}, // CORRUPT, FULL, CANTOPEN
		{15, store.ClassTransient}, {17, store.ClassTransient}, {26, store.ClassTransient}, // PROTOCOL, SCHEMA, NOTADB
		{18, store.ClassPermanent},                                                                       // TOOBIG
		{19, store.ClassPermanent}, {19 | 8<<8, store.ClassPermanent}, {19 | 5<<8, store.ClassPermanent}, // CONSTRAINT, _UNIQUE, _NOTNULL
		{20, store.ClassPermanent},                                                  // MISMATCH
		{1, store.ClassUnknown}, {21, store.ClassUnknown}, {25, store.ClassUnknown}, // ERROR, MISUSE, RANGE
	}
	for _, c := range cases {
		err := fmt.Errorf("sqlstore: insert attestations: %w", sqliteError(c.code))
		if got := sqlstore.Classify(err); got != c.want {
			t.Errorf("SQLite code %d: %s, want %s", c.code, got, c.want)
		}
	}
}

func TestClassifyOtherErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want store.ErrorClass
	}{
		{"not found", fmt.Errorf("sqlstore: flow f: %w", store.ErrNotFound), store.ClassPermanent},
		{"conflict", fmt.Errorf("sqlstore: insert trail: %w", store.ErrConflict), store.ClassPermanent},
		{"query deadline", fmt.Errorf("sqlstore: begin: %w", context.DeadlineExceeded), store.ClassTransient},
		{"bad connection", fmt.Errorf("sqlstore: begin: %w", driver.ErrBadConn), store.ClassTransient},
		{"connection done", fmt.Errorf("sqlstore: commit: %w", sql.ErrConnDone), store.ClassTransient},
		{"connection closed", fmt.Errorf("sqlstore: x: %w", pgconn.ErrConnClosed), store.ClassTransient},
		{"cut off", fmt.Errorf("sqlstore: x: %w", io.ErrUnexpectedEOF), store.ClassTransient},
		{"pool closed", errors.New("sqlstore: begin: sql: database is closed"), store.ClassTransient},
		{"anything else", errors.New("sqlstore: something odd"), store.ClassUnknown},
	}
	for _, c := range cases {
		if got := sqlstore.Classify(c.err); got != c.want {
			t.Errorf("%s (%v): %s, want %s", c.name, c.err, got, c.want)
		}
	}
}

// TestClassifyRealErrors: what the drivers really return is classified as the tables say.
func TestClassifyRealErrors(t *testing.T) {
	ctx := context.Background()
	lite := openSQLite(t, filepath.Join(t.TempDir(), "veritrail.db"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	litedb, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "raw.db"))
	must(err)
	defer litedb.Close()
	_, err = litedb.ExecContext(ctx, `CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER NOT NULL CHECK (n > 0))`)
	must(err)
	_, err = litedb.ExecContext(ctx, `INSERT INTO t VALUES ('a', 0)`)
	if got := lite.Classify(err); got != store.ClassPermanent {
		t.Errorf("SQLite CHECK violation (%v): %s, want permanent", err, got)
	}
	_, err = litedb.ExecContext(ctx, `SELECT * FROM nosuchtable`)
	if got := lite.Classify(err); got != store.ClassUnknown {
		t.Errorf("SQLite statement error (%v): %s, want unknown", err, got)
	}

	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultPostgres
	}
	pg := connectPostgres(t, dsn)
	_, err = pg.ExecContext(ctx, `SELECT $1::text`, "nul\x00name")
	if got := lite.Classify(err); got != store.ClassPermanent {
		t.Errorf("PostgreSQL NUL in text (%v): %s, want permanent", err, got)
	}
	_, err = sqlstore.OpenPostgres(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	if got := lite.Classify(err); got != store.ClassTransient {
		t.Errorf("PostgreSQL unreachable (%v): %s, want transient", err, got)
	}
}
