// Package migrate applies numbered schema migrations to a SQLite or PostgreSQL database: in
// order, each once, each in a transaction of its own that also records its version in a
// version table. Processes opening the same database together take turns (an advisory lock
// per schema on PostgreSQL, the write lock on SQLite), and a database already at the latest
// version is only read: no DDL, no lock, so opening beside running writers never waits.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Execer is the transaction a migration runs in.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Migration is one schema change. A released migration is never edited: a later change is a
// new migration with the next version.
type Migration struct {
	Version int
	Name    string
	Up      func(ctx context.Context, tx Execer) error
}

// Statements is a migration body that runs each statement in order.
func Statements(stmts ...string) func(context.Context, Execer) error {
	return func(ctx context.Context, tx Execer) error {
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
}

// Plan is the migrations of one schema and where their versions are recorded.
type Plan struct {
	// Postgres selects PostgreSQL; otherwise the database is SQLite.
	Postgres bool
	// Table is the version table: one row per applied migration. Plans sharing a database
	// need tables of their own.
	Table string
	// LockKey is, on PostgreSQL, the advisory lock the migrations hold, taken beside a hash
	// of the current schema so that deployments in other schemas of the database do not wait.
	LockKey int32
	// Migrations are versions 1, 2, ... in order.
	Migrations []Migration
	// Baseline, when set, is asked before version 1 runs on a database without versions
	// whether that database already holds version 1's schema (made before the schema had
	// versions). If so, version 1 is recorded without running.
	Baseline func(ctx context.Context, tx Execer) (bool, error)
}

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func (p Plan) check() error {
	if !tableName.MatchString(p.Table) {
		return fmt.Errorf("migrate: version table %q is not a plain lower-case name", p.Table)
	}
	for i, m := range p.Migrations {
		if m.Version != i+1 || m.Up == nil {
			return fmt.Errorf("migrate %s: migration %d (%q) must have version %d and a body", p.Table, i, m.Name, i+1)
		}
	}
	return nil
}

// Latest is the version Apply brings a database to.
func (p Plan) Latest() int { return len(p.Migrations) }

// ErrNewer is returned by Apply when the database has versions this build does not know:
// a newer build migrated it, and this one could misread it.
var ErrNewer = errors.New("migrate: the database was migrated by a newer build")

// Apply brings the database to the latest version. It holds one connection of db while it
// runs (on SQLite's single-connection writer, the writer).
func (p Plan) Apply(ctx context.Context, db *sql.DB) error {
	if err := p.check(); err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: connect: %w", p.Table, err)
	}
	defer conn.Close()
	have, err := p.version(ctx, conn)
	if err != nil {
		return err
	}
	if have == p.Latest() {
		return nil
	}
	if have > p.Latest() {
		return fmt.Errorf("%w: %s is at version %d, this build knows %d", ErrNewer, p.Table, have, p.Latest())
	}
	for _, m := range p.Migrations[have:] {
		if err := p.apply(ctx, conn, m); err != nil {
			return err
		}
	}
	return nil
}

// Version reads the database's version: the highest applied, 0 when none is.
func (p Plan) Version(ctx context.Context, db *sql.DB) (int, error) {
	if err := p.check(); err != nil {
		return 0, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate %s: connect: %w", p.Table, err)
	}
	defer conn.Close()
	return p.version(ctx, conn)
}

// version looks the table up in the catalog first: selecting from a missing table would abort
// the surrounding transaction on PostgreSQL.
func (p Plan) version(ctx context.Context, q Execer) (int, error) {
	exists := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?`
	if p.Postgres {
		exists = `SELECT COUNT(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = $1`
	}
	var n int
	if err := q.QueryRowContext(ctx, exists, p.Table).Scan(&n); err != nil {
		return 0, fmt.Errorf("migrate %s: look for the version table: %w", p.Table, err)
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+p.Table).Scan(&v); err != nil {
		return 0, fmt.Errorf("migrate %s: read the version: %w", p.Table, err)
	}
	return v, nil
}

// apply runs m in a transaction of its own unless another process applied it meanwhile: the
// version is read again under the lock.
func (p Plan) apply(ctx context.Context, conn *sql.Conn, m Migration) (err error) {
	tx, done, err := p.begin(ctx, conn)
	if err != nil {
		return fmt.Errorf("migrate %s: begin version %d: %w", p.Table, m.Version, err)
	}
	defer func() { err = errors.Join(err, done(err == nil)) }()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+p.Table+
		` (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("migrate %s: create the version table: %w", p.Table, err)
	}
	have, err := p.version(ctx, tx)
	if err != nil {
		return err
	}
	switch {
	case have >= m.Version:
		return nil
	case have != m.Version-1:
		return fmt.Errorf("migrate %s: at version %d, cannot apply %d", p.Table, have, m.Version)
	}
	run := true
	if m.Version == 1 && p.Baseline != nil {
		present, err := p.Baseline(ctx, tx)
		if err != nil {
			return fmt.Errorf("migrate %s: recognize a database from before versions: %w", p.Table, err)
		}
		run = !present
	}
	if run {
		if err := m.Up(ctx, tx); err != nil {
			return fmt.Errorf("migrate %s: version %d (%s): %w", p.Table, m.Version, m.Name, err)
		}
	}
	insert := `INSERT INTO ` + p.Table + ` (version, name, applied_at) VALUES (?, ?, ?)`
	if p.Postgres {
		insert = `INSERT INTO ` + p.Table + ` (version, name, applied_at) VALUES ($1, $2, $3)`
	}
	if _, err := tx.ExecContext(ctx, insert, m.Version, m.Name, time.Now().UTC().Format(time.RFC3339)); err != nil {
		return fmt.Errorf("migrate %s: record version %d: %w", p.Table, m.Version, err)
	}
	return nil
}

// begin starts the transaction of one migration and takes the turn of this process: on
// PostgreSQL the advisory lock (released at the end of the transaction), on SQLite the write
// lock up front (BEGIN IMMEDIATE), so that a process opening beside another waits for it
// (busy_timeout) instead of failing to upgrade a read it began earlier. done commits when
// commit is true and rolls back otherwise.
func (p Plan) begin(ctx context.Context, conn *sql.Conn) (Execer, func(commit bool) error, error) {
	if p.Postgres {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return nil, nil, err
		}
		done := func(commit bool) error {
			if commit {
				return tx.Commit()
			}
			_ = tx.Rollback() // the error that matters is the one that made us roll back
			return nil
		}
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtext(current_schema()), $1)`, p.LockKey); err != nil {
			_ = done(false)
			return nil, nil, fmt.Errorf("lock: %w", err)
		}
		return tx, done, nil
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return nil, nil, err
	}
	done := func(commit bool) error {
		if commit {
			_, err := conn.ExecContext(ctx, `COMMIT`)
			if err == nil {
				return nil
			}
			_, _ = conn.ExecContext(context.Background(), `ROLLBACK`) // a failed COMMIT leaves the transaction open
			return fmt.Errorf("commit: %w", err)
		}
		// Not ctx: a cancelled context must still end the transaction on this connection.
		// A failed ROLLBACK means SQLite already rolled back.
		_, _ = conn.ExecContext(context.Background(), `ROLLBACK`)
		return nil
	}
	return conn, done, nil
}
