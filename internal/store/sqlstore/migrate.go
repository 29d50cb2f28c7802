package sqlstore

import (
	"context"
	"fmt"

	"github.com/veritrail/veritrail/internal/migrate"
)

// migrations are the store's schema versions (package migrate), recorded in store_migrations.
// A released migration is never edited; a schema change is a new one appended here.
//
// Version 1 is the schema as builds up to 085c4de made it (schemaStatements and
// policyStatements, then addedColumns). Those builds recorded a digest of it in schema_version
// instead of a version: a database whose digest is this schema's is stamped version 1 with no
// DDL (Baseline); one from an older build still runs version 1, whose statements only add what
// is missing. Wipe reads table names from version 1's statements: a migration that adds a
// table must add it there too.
func (d dialect) migrations() migrate.Plan {
	return migrate.Plan{
		Postgres: d.name == postgresDialect.name,
		Table:    "store_migrations",
		LockKey:  migrateLockKey,
		Baseline: d.madeAtVersion1,
		Migrations: []migrate.Migration{
			{Version: 1, Name: "tables of 085c4de", Up: d.createTables},
			// The digest table of the builds before versions, read once by Baseline above.
			{Version: 2, Name: "drop schema_version", Up: migrate.Statements(`DROP TABLE IF EXISTS schema_version`)},
			// A custom type version's summary expressions as JSON; NULL for none (and for
			// versions made before summaries).
			{Version: 3, Name: "custom type summaries", Up: migrate.Statements(`ALTER TABLE custom_type_versions ADD COLUMN summary TEXT`)},
			// The organization a user chose as default (`kosli update default-org`); NULL until then.
			{Version: 4, Name: "user default organization", Up: migrate.Statements(`ALTER TABLE users ADD COLUMN default_org_id TEXT`)},
			// A control version's links ({label: url}) as JSON; NULL for none.
			{Version: 5, Name: "control links", Up: migrate.Statements(`ALTER TABLE control_versions ADD COLUMN links TEXT`)},
			// Repositories, from the repo_info of trails, attestations and artifacts.
			{Version: 6, Name: "repos", Up: migrate.Statements(reposTable, `CREATE INDEX IF NOT EXISTS repos_name ON repos (org_id, name)`)},
			// The web UI's sessions, so that every ingest process knows every signed-in browser.
			{Version: 7, Name: "web sessions", Up: d.webSessions()},
			// A trigger's bus message metadata (the trace context of the change it derives from)
			// as JSON; NULL for none.
			{Version: 8, Name: "trigger metadata", Up: migrate.Statements(`ALTER TABLE trigger_outbox ADD COLUMN metadata TEXT`)},
			// A flow's trails newest first (the API's list with ?flow=, the flow page): without it
			// the list walked every trail of the organization (trails_org) to keep the flow's, so
			// it slowed down with the store. In the list's order, and with org_id, so that the
			// page and the total are read from the index alone.
			{Version: 9, Name: "trails by flow", Up: migrate.Statements(
				`CREATE INDEX IF NOT EXISTS trails_flow ON trails (flow_id, created_at DESC, id, org_id)`)},
			// PostgreSQL: the transaction that inserted each trail, indexed by organization, so that
			// a list's total counts only the trails inserted since its last count (see trailCounts). Trails of earlier
			// builds get 0: they are all committed. SQLite needs nothing (its rowids serve).
			{Version: 10, Name: "trail insert transactions", Up: d.trailXids},
			// PostgreSQL: the same by flow (with the organization, read from the index alone), so
			// that a flow's total is kept between counts too (a COUNT(*) of a flow's 5,000 trails
			// was most of its first page at 1M attestations).
			{Version: 11, Name: "trail insert transactions by flow", Up: d.postgresOnly(
				`CREATE INDEX IF NOT EXISTS trails_flow_xid ON trails (flow_id, xid, org_id)`)},
			// The scopes of the writes in flight (read after write across ingest processes), so
			// that a read waits for another process only when it has writes in flight of what the
			// read depends on, not of anything in the organization.
			{Version: 12, Name: "scopes of writes in flight", Up: migrate.Statements(scopesInFlightTable,
				`CREATE INDEX IF NOT EXISTS writes_in_flight_scopes_process ON writes_in_flight_scopes (org_id, process)`)},
			// Marks of running artifacts whose evidence or verdicts changed since their
			// environment's latest snapshot: the next snapshot takes the others from the last one.
			{Version: 13, Name: "running changes", Up: d.runningChanges()},
			// Large snapshot documents compressed (snapshotdocs.go).
			{Version: 14, Name: "compressed snapshot documents", Up: d.snapshotDocs()},
			// Changes of evidence not yet marked where their artifacts run (PostgreSQL writes them).
			{Version: 15, Name: "change notices", Up: d.changeNotices()},
			// The change notices of flows, read apart from the many of fingerprints.
			{Version: 16, Name: "flow change notices", Up: migrate.Statements(flowNotices)},
		},
	}
}

// migrateLockKey is the advisory lock migrations take, beside the schema's hash (relayLockKey's
// neighbour: the two must differ). Builds before versions took it too, so an old process
// opening the schema waits for a new one's migrations.
const migrateLockKey int32 = 74657275

// version1Digests are the schema_version digests builds up to 085c4de wrote for version 1's
// schema, per dialect (TestVersion1IsFrozen recomputes them from version 1's statements).
var version1Digests = map[string]string{
	sqliteDialect.name:   "4765c65da6289b5ee94d0eaf69a639823a06a7037f9aed44e853e6e6523581c4",
	postgresDialect.name: "6fe6a6dce0cb03c51bf6736500afecaebfc36e19bfb89dc86f84b752d34304c3",
}

// madeAtVersion1 reports whether schema_version holds version 1's digest.
func (d dialect) madeAtVersion1(ctx context.Context, tx migrate.Execer) (bool, error) {
	exists := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'`
	if d.name == postgresDialect.name {
		exists = `SELECT COUNT(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'schema_version'`
	}
	var n int
	if err := tx.QueryRowContext(ctx, exists).Scan(&n); err != nil {
		return false, fmt.Errorf("look for schema_version: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT digest FROM schema_version`)
	if err != nil {
		return false, fmt.Errorf("read schema_version: %w", err)
	}
	defer rows.Close()
	match := false
	for rows.Next() {
		var digest string
		if err := rows.Scan(&digest); err != nil {
			return false, fmt.Errorf("read schema_version: %w", err)
		}
		match = digest == version1Digests[d.name]
	}
	return match, rows.Err()
}

// createTables is version 1: every statement creates only what is missing, so that it also
// completes a database made by a build older than the digest.
func (d dialect) createTables(ctx context.Context, tx migrate.Execer) error {
	if err := migrate.Statements(d.schema()...)(ctx, tx); err != nil {
		return err
	}
	return d.addColumns(ctx, tx)
}

type addedColumn struct{ table, column, def string }

// addedColumns are columns a table gained after it was first released, before versioned
// migrations. CREATE TABLE IF NOT EXISTS leaves a table made by an older build as it was, so
// version 1 adds them when missing. Each is also in its table's CREATE statement.
func addedColumns() []addedColumn {
	return []addedColumn{
		{"api_keys", "service_account_id", "TEXT NOT NULL DEFAULT ''"},
		{"api_keys", "description", "TEXT NOT NULL DEFAULT ''"},
		{"applied_messages", "generation", "BIGINT NOT NULL DEFAULT 0"},
		{"dirty_trails", "evaluated", "BIGINT NOT NULL DEFAULT 0"},
	}
}

func (d dialect) addColumns(ctx context.Context, tx migrate.Execer) error {
	exists := `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`
	if d.name == postgresDialect.name {
		exists = `SELECT COUNT(*) FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`
	}
	for _, c := range addedColumns() {
		var n int
		if err := tx.QueryRowContext(ctx, exists, c.table, c.column).Scan(&n); err != nil {
			return fmt.Errorf("look for %s.%s: %w", c.table, c.column, err)
		}
		if n > 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, "ALTER TABLE "+c.table+" ADD COLUMN "+c.column+" "+c.def); err != nil {
			return fmt.Errorf("add %s.%s: %w", c.table, c.column, err)
		}
	}
	return nil
}

// postgresOnly runs statements on PostgreSQL and nothing on SQLite.
func (d dialect) postgresOnly(statements ...string) func(context.Context, migrate.Execer) error {
	return func(ctx context.Context, tx migrate.Execer) error {
		if d.name != postgresDialect.name {
			return nil
		}
		return migrate.Statements(statements...)(ctx, tx)
	}
}

// trailXids is version 10 (PostgreSQL only).
func (d dialect) trailXids(ctx context.Context, tx migrate.Execer) error {
	if d.name != postgresDialect.name {
		return nil
	}
	return migrate.Statements(
		`ALTER TABLE trails ADD COLUMN IF NOT EXISTS xid BIGINT NOT NULL DEFAULT 0`,
		`ALTER TABLE trails ALTER COLUMN xid SET DEFAULT (pg_current_xact_id()::text::bigint)`,
		`CREATE INDEX IF NOT EXISTS trails_org_xid ON trails (org_id, xid)`,
	)(ctx, tx)
}
