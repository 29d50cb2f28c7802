package sqlitebus

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	// Registers the pure-Go "sqlite" database/sql driver.
	_ "modernc.org/sqlite"
)

// Open opens (creating if needed) the SQLite database at path with the
// settings the bus relies on: WAL journal, a busy timeout so that writers of
// other processes wait instead of failing, and synchronous=NORMAL. It is
// OpenWith(path, Config{}).
//
// Why NORMAL is enough: the guarantee Veritrail gives is that once the API has
// answered 201, the evidence survives a kill -9 of the process. In WAL mode a
// commit appends the transaction to the WAL file with write(2) before
// returning; from then on the data is in the operating system's page cache,
// which outlives the process, and the next open replays the WAL. NORMAL only
// skips the fsync at each commit (the WAL is still fsynced at checkpoints),
// so what it gives up is durability of the last transactions across a power
// loss or kernel crash, never consistency of the database. Deployments that
// need a 201 to survive power loss set Config.Synchronous to
// SynchronousFull and pay one fsync per Publish.
func Open(path string) (*sql.DB, error) {
	return OpenWith(path, Config{})
}

// OpenWith is Open with the Synchronous and BusyTimeout fields of cfg; the
// other fields are ignored. The settings go into the DSN because database/sql
// opens connections lazily and PRAGMAs are per connection.
func OpenWith(path string, cfg Config) (*sql.DB, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The bus needs a file shared by all pooled connections (and by other
	// processes); a '?' would also be taken as the start of the DSN options.
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") || strings.Contains(path, "?") {
		return nil, fmt.Errorf("sqlitebus: open %q: need a plain file path", path)
	}
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", string(cfg.Synchronous))
	// A checkpoint runs inside the commit that crosses the mark, fsyncs, and holds up every
	// Publish waiting for that commit. The Bus checkpoints beside the publishers long
	// before the log reaches 8,192 pages (32 MiB); the mark is the backstop for when it falls
	// behind or for a database used without a Bus.
	q.Add("_pragma", "wal_autocheckpoint(8192)")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitebus: open %s: %w", path, err)
	}
	// journal_mode=WAL can silently stay in another mode (e.g. on file
	// systems without shared memory), and the durability argument above
	// depends on WAL, so check it on a real connection now.
	var mode string
	if err := db.QueryRowContext(context.Background(), "PRAGMA journal_mode").Scan(&mode); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlitebus: open %s: %w", path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		_ = db.Close()
		return nil, fmt.Errorf("sqlitebus: open %s: journal_mode is %q, want wal", path, mode)
	}
	// Keep connections open: each new one re-runs the PRAGMAs and re-reads
	// the schema, and many subscribers query concurrently.
	db.SetMaxIdleConns(8)
	return db, nil
}
