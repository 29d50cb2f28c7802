package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// TestAdminMigrate: `veritrail admin migrate` leaves a new data directory's store at this
// build's schema version, and says so; running it again changes nothing.
func TestAdminMigrate(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for range 2 {
		out := captureStdout(t, func(w io.Writer) error {
			return run(ctx, []string{"admin", "migrate", "--data-dir", dir}, w, io.Discard)
		})
		if !strings.Contains(out, "migrations are applied") {
			t.Fatalf("output %q", out)
		}
	}
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrated(ctx); err != nil {
		t.Fatal(err)
	}
}
