package faults

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver
)

// pgRun is the run's private schema of the PostgreSQL database.
type pgRun struct {
	admin  *sql.DB
	base   *url.URL
	id     string // random; names the schema and marks the processes' connections
	schema string
}

// newPGRun creates a fresh schema in the database at dsn (a postgres:// URL).
func newPGRun(ctx context.Context, dsn string) (*pgRun, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("faults: the PostgreSQL DSN must be a postgres:// URL, got %q", dsn)
	}
	admin, err := sql.Open("pgx", dsn)
	if err == nil {
		err = admin.PingContext(ctx)
	}
	if err != nil {
		if admin != nil {
			admin.Close()
		}
		return nil, fmt.Errorf("faults: PostgreSQL at %s: %w", u.Redacted(), err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	r := &pgRun{admin: admin, base: u, id: hex.EncodeToString(b)}
	r.schema = "vt_faults_" + r.id
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+r.schema); err != nil {
		admin.Close()
		return nil, fmt.Errorf("faults: create schema: %w", err)
	}
	return r, nil
}

// dsn is the schema's DSN for one process. Its application_name marks the connections that
// terminateBackends ends; the harness's own use another prefix.
func (r *pgRun) dsn(process string) string {
	u := *r.base
	q := u.Query()
	q.Set("search_path", r.schema)
	q.Set("application_name", r.appPrefix()+process)
	u.RawQuery = q.Encode()
	return u.String()
}

func (r *pgRun) appPrefix() string { return "vtf_" + r.id + "_" }

// harnessDB is the harness's own connection to the schema.
func (r *pgRun) harnessDB() (*sql.DB, error) {
	u := *r.base
	q := u.Query()
	q.Set("search_path", r.schema)
	q.Set("application_name", "vtfh_"+r.id)
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		return nil, fmt.Errorf("faults: open the schema: %w", err)
	}
	db.SetMaxOpenConns(4)
	return db, nil
}

// terminateBackends ends the server processes of every connection the run's processes hold.
func (r *pgRun) terminateBackends(ctx context.Context) (int, error) {
	var n int
	err := r.admin.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
		WHERE starts_with(application_name, $1) AND pid <> pg_backend_pid()) t WHERE ok`, r.appPrefix()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("faults: terminate backends: %w", err)
	}
	return n, nil
}

// deadlocks is the database's count of deadlocks detected (all of its users, not only this run).
func (r *pgRun) deadlocks(ctx context.Context) (int64, error) {
	var n int64
	if _, err := r.admin.ExecContext(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return 0, fmt.Errorf("faults: pg_stat_database: %w", err)
	}
	err := r.admin.QueryRowContext(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("faults: pg_stat_database: %w", err)
	}
	return n, nil
}

// close drops the schema.
func (r *pgRun) close(ctx context.Context) error {
	_, err := r.admin.ExecContext(ctx, "DROP SCHEMA "+r.schema+" CASCADE")
	if err != nil {
		err = fmt.Errorf("faults: drop schema %s: %w", r.schema, err)
	}
	r.admin.Close()
	return err
}

// openSQLite reads the embedded mode's state while `serve` writes it (WAL allows both).
func openSQLite(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		return nil, fmt.Errorf("faults: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(2)
	return db, nil
}

// counts is what the sampler and the drain read from the store: the load's attestations (not
// those of the snapshots' trails, snapshots.go), the trails waiting for evaluation (all of
// them) and the messages applied.
type counts struct {
	attestations, dirty, applied int
}

func readCounts(ctx context.Context, db *sql.DB) (counts, error) {
	var c counts
	err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM attestations) - (SELECT count(*) FROM attestations
		WHERE trail_id IN (SELECT id FROM trails WHERE name LIKE '`+snapTrailPrefix+`%')), (SELECT count(*) FROM dirty_trails),
		(SELECT count(*) FROM applied_messages)`).Scan(&c.attestations, &c.dirty, &c.applied)
	if err != nil {
		return c, fmt.Errorf("faults: read counts: %w", err)
	}
	return c, nil
}

// storedAtt is one stored attestation.
type storedAtt struct {
	trail, name string
	compliant   bool
}

// storeView is what the store holds at the end: every attestation, and every trail's state,
// but the snapshots' trails (snapshots.go checks those).
type storeView struct {
	atts   []storedAtt
	trails map[string]string // name -> compliance state
}

func readStore(ctx context.Context, db *sql.DB) (storeView, error) {
	v := storeView{trails: map[string]string{}}
	rows, err := db.QueryContext(ctx, `SELECT t.name, a.name, a.is_compliant FROM attestations a JOIN trails t ON t.id = a.trail_id`)
	if err != nil {
		return v, fmt.Errorf("faults: read attestations: %w", err)
	}
	for rows.Next() {
		var a storedAtt
		var ok int
		if err := rows.Scan(&a.trail, &a.name, &ok); err != nil {
			rows.Close()
			return v, fmt.Errorf("faults: read attestations: %w", err)
		}
		a.compliant = ok != 0
		if !isSnapTrail(a.trail) {
			v.atts = append(v.atts, a)
		}
	}
	if err := rows.Close(); err != nil {
		return v, err
	}
	if err := rows.Err(); err != nil {
		return v, fmt.Errorf("faults: read attestations: %w", err)
	}
	rows, err = db.QueryContext(ctx, `SELECT name, state FROM trails`)
	if err != nil {
		return v, fmt.Errorf("faults: read trails: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, state string
		if err := rows.Scan(&name, &state); err != nil {
			return v, fmt.Errorf("faults: read trails: %w", err)
		}
		if !isSnapTrail(name) {
			v.trails[name] = state
		}
	}
	return v, rows.Err()
}
