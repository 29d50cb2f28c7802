// Package sqlitetest opens the SQLite store that tests and benchmarks of other packages run
// against: a new file in the test's temporary directory, closed when the test ends.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// Open opens a new SQLite store for tb, or ends it.
func Open(tb testing.TB) *sqlstore.Store {
	tb.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(tb.TempDir(), "state.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}
