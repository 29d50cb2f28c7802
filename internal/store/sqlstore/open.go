package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	"github.com/veritrail/veritrail/internal/walcheckpoint"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib" // also registers the "pgx" driver
	_ "modernc.org/sqlite"           // registers the "sqlite" driver
)

// OpenSQLite opens (creating if needed) the embedded store at path. Writes go through one
// connection because SQLite has one writer anyway; reads use a pool. WAL with
// synchronous=NORMAL keeps every committed transaction across a crash of the process.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	q := url.Values{}
	// busy_timeout first: the pragmas run in order on every new connection, and switching to WAL
	// needs a lock that connections opening together would otherwise fail to get (SQLITE_BUSY).
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// The store checkpoints from a connection of its own (below); this mark, crossed only when
	// that falls behind, makes the commit that crosses it checkpoint in-line.
	q.Add("_pragma", "wal_autocheckpoint(8192)")
	dsn := "file:" + path + "?" + q.Encode()
	// The writer keeps statement journals in memory: a multi-row statement inside a
	// transaction (a batch of attestations) journals the pages it changes so that it can be
	// undone alone, and on disk that journal is a temporary file written page by page.
	w, err := sql.Open("sqlite", dsn+"&_txlock=immediate&_pragma=temp_store(MEMORY)")
	if err != nil {
		return nil, fmt.Errorf("sqlstore: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlstore: open %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8) // keep them: reopening a SQLite connection is costly
	s := &Store{d: sqliteDialect, w: w, r: r, wstmts: newStmtCache(w), rstmts: newStmtCache(r), trailCounts: newTrailCounts(), trailPages: newTrailPages()}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	// The log is checkpointed beside the writer, off its commits (package walcheckpoint). A
	// failed checkpoint needs no report of its own: the writer's wal_autocheckpoint takes over,
	// and an I/O error that lasts fails the writes themselves.
	if s.ckptDB, err = sql.Open("sqlite", dsn); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlstore: open %s for checkpoints: %w", path, err)
	}
	s.ckptDB.SetMaxOpenConns(1)
	s.ckpt = walcheckpoint.Start(s.ckptDB, 0, nil)
	return s, nil
}

// OpenPostgres opens the store at a PostgreSQL DSN (URL or key=value form accepted by pgx).
func OpenPostgres(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: open postgres: %w", err)
	}
	// No JIT compilation, unless the DSN asks for it: the store's statements are short, and
	// PostgreSQL compiles a statement whose estimated cost passes jit_above_cost, which a
	// statement planned over a large guess does at every run. Expanding change notices, whose
	// CTE the planner guesses at tens of thousands of rows, spent 0.6 s compiling for a run of
	// under a millisecond, on every save, once the store held a few hundred thousand
	// attestations (docs/PERFORMANCE.md).
	if _, set := cfg.RuntimeParams["jit"]; !set {
		cfg.RuntimeParams["jit"] = "off"
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlstore: connect postgres: %w", err)
	}
	cache := newStmtCache(db)
	s := &Store{d: postgresDialect, w: db, r: db, wstmts: cache, rstmts: cache, dsn: dsn, trailCounts: newTrailCounts(), trailPages: newTrailPages()}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	var schema string
	if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlstore: current schema: %w", err)
	}
	s.channel = changesChannel(schema)
	return s, nil
}

// migrate brings the schema to this build's version (migrations). A database already there
// is only read: no DDL and no lock. That matters on PostgreSQL, where CREATE INDEX IF NOT EXISTS
// takes a SHARE lock on its table even when the index exists: a process starting beside running
// ones would queue behind their writes while holding locks their next statements need (a
// deadlock). Processes starting together take turns under an advisory lock per schema, so
// deployments and tests in other schemas of one database do not wait for each other.
func (s *Store) migrate(ctx context.Context) error {
	if err := s.d.migrations().Apply(ctx, s.w); err != nil {
		return fmt.Errorf("sqlstore: migrate %s: %w", s.d.name, err)
	}
	return nil
}

// SchemaVersion is the store's schema version: the last migration applied.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	v, err := s.d.migrations().Version(ctx, s.r)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: schema version: %w", err)
	}
	return v, nil
}
