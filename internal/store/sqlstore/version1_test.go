package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestVersion1IsFrozen: version 1 is recognized by the digest that builds before versioned
// migrations computed over its statements and added columns (this is their computation).
// Editing version 1 would make databases of those builds run it again instead of being
// stamped; a schema change belongs in a new migration.
func TestVersion1IsFrozen(t *testing.T) {
	for _, d := range []dialect{sqliteDialect, postgresDialect} {
		h := sha256.New()
		for _, stmt := range d.schema() {
			h.Write([]byte(stmt))
			h.Write([]byte{0})
		}
		for _, c := range addedColumns() {
			fmt.Fprintf(h, "%s.%s %s", c.table, c.column, c.def)
			h.Write([]byte{0})
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != version1Digests[d.name] {
			t.Errorf("%s: version 1 digests to %s, want %s", d.name, got, version1Digests[d.name])
		}
	}
}

// TestFixtureIsVersion1: the SQLite fixture of TestUpgradeFixture is recognized as version 1
// by its digest, so opening it stamps it rather than running version 1.
func TestFixtureIsVersion1(t *testing.T) {
	b, err := os.ReadFile("testdata/store-085c4de.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if ok, err := sqliteDialect.madeAtVersion1(context.Background(), db); err != nil || !ok {
		t.Fatalf("madeAtVersion1 = %v, %v; want true", ok, err)
	}
}
