// Package pgtest gives tests the PostgreSQL server they run against: VERITRAIL_TEST_POSTGRES, or
// the local server (trust auth, database test). A test that needs it skips when it is
// unreachable, except under CI (CI=true), which must never skip it silently.
package pgtest

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

// Default is the server used when VERITRAIL_TEST_POSTGRES is unset.
const Default = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// DSN answers the server's connection string once it answers a ping, or ends the test.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = Default
	}
	db, err := sql.Open("pgx", dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
		db.Close()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL at VERITRAIL_TEST_POSTGRES is unreachable under CI: %v", err)
		}
		t.Skipf("PostgreSQL unreachable (set VERITRAIL_TEST_POSTGRES): %v", err)
	}
	return dsn
}
