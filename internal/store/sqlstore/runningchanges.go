package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/veritrail/veritrail/internal/migrate"
	"github.com/veritrail/veritrail/internal/store"
)

// runningChangesTable is migration 13's: marks of running artifacts whose evidence or verdicts
// changed since their environment's latest snapshot (store.RunningChange). Rows are only ever
// inserted and deleted by ID, never updated: marking takes no lock a snapshot holds, so it
// cannot wait on one, and a mark committed after a snapshot read the list is not among the IDs
// that snapshot clears.
const runningChangesTable = `CREATE TABLE IF NOT EXISTS running_changes (
	id {{serial}}, env_id TEXT NOT NULL, fingerprint TEXT NOT NULL)`

// runningChanges is migration 13.
func (d dialect) runningChanges() func(context.Context, migrate.Execer) error {
	return migrate.Statements(strings.NewReplacer("{{serial}}", d.serial).Replace(runningChangesTable),
		`CREATE INDEX IF NOT EXISTS running_changes_env ON running_changes (env_id, fingerprint)`)
}

// changeNoticesTable is migration 15's, written on PostgreSQL only: the fingerprints whose
// evidence changed in an organization, not yet marked in the environments where they run.
//
// A transaction that changed an artifact's evidence cannot itself mark where the artifact
// runs, as it did before: on PostgreSQL a snapshot that starts the artifact may be in flight
// beside it, and the environment's running index holds the artifact only once that snapshot
// commits. The snapshot may have read the evidence from before the change, and so may the
// next one (which takes started artifacts anew, settleMarks) if the change still has not
// committed: the snapshots after it then carried the old evidence over for good (the fault
// harness's stale final snapshots). So the transaction writes a notice, and once it has
// committed a statement of its own (expandNotices) marks the environments where the
// fingerprint runs then. Every snapshot that could have missed the change either commits
// before that statement (and is marked by it) or after it (and marks the artifacts it started
// again, for a snapshot that reads after the change). Until the notice is expanded,
// RunningChanges reads it as a mark of every environment where the fingerprint runs.
//
// A notice names a fingerprint, or a flow (whose name, tags or archiving changed) for every
// artifact it reported, with the other column empty.
//
// SQLite has one writer: no snapshot runs beside the change, which marks directly.
const changeNoticesTable = `CREATE TABLE IF NOT EXISTS change_notices (
	id {{serial}}, org_id TEXT NOT NULL, fingerprint TEXT NOT NULL, flow_id TEXT NOT NULL DEFAULT '')`

// expandChunk is the most notices one expansion takes (expandNotices).
const expandChunk = 1000

// flowNotices is migration 16: the notices of flows, few among many of fingerprints, found
// without reading the others (RunningChanges).
const flowNotices = `CREATE INDEX IF NOT EXISTS change_notices_flow ON change_notices (id) WHERE flow_id <> ''`

// changeNotices is migration 15.
func (d dialect) changeNotices() func(context.Context, migrate.Execer) error {
	return migrate.Statements(strings.NewReplacer("{{serial}}", d.serial).Replace(changeNoticesTable),
		`CREATE INDEX IF NOT EXISTS change_notices_fp ON change_notices (org_id, fingerprint)`)
}

func (t *txn) MarkRunningChanged(ctx context.Context, orgID, envID string, fps []string) error {
	switch {
	case envID == "" && len(fps) == 0:
		return nil
	case envID != "" && fps == nil:
		_, err := t.exec(ctx, "mark running changed", `INSERT INTO running_changes (env_id, fingerprint)
			SELECT env_id, fingerprint FROM env_running WHERE env_id = ?`, envID)
		return err
	}
	fps = slices.Compact(slices.Sorted(slices.Values(fps)))
	if envID == "" && t.d.name == postgresDialect.name {
		t.noticed = true
		return preparedChunks(fps, 2, func(part []string) error {
			args := make([]any, 0, 2*len(part))
			for _, fp := range part {
				args = append(args, orgID, fp)
			}
			_, err := t.exec(ctx, "notice running changed", oneOffIf(len(part) > preparedRows)+`INSERT INTO change_notices (org_id, fingerprint)
				VALUES `+rowsOf(len(part), 2), args...)
			return err
		})
	}
	where, lead := `org_id = ?`, orgID
	if envID != "" {
		where, lead = `env_id = ?`, envID
	}
	return preparedChunks(fps, 1, func(part []string) error {
		_, err := t.exec(ctx, "mark running changed", oneOffIf(len(part) > preparedRows)+`INSERT INTO running_changes (env_id, fingerprint)
			SELECT env_id, fingerprint FROM env_running WHERE `+where+` AND fingerprint IN (`+placeholders(len(part))+`)`,
			append([]any{lead}, anys(part)...)...)
		return err
	})
}

func (t *txn) MarkFlowRunningChanged(ctx context.Context, orgID, flowID string) error {
	if t.d.name == postgresDialect.name {
		t.noticed = true
		_, err := t.exec(ctx, "notice running changed", `INSERT INTO change_notices (org_id, fingerprint, flow_id)
			VALUES (?, '', ?)`, orgID, flowID)
		return err
	}
	_, err := t.exec(ctx, "mark running changed", `INSERT INTO running_changes (env_id, fingerprint)
		SELECT DISTINCT r.env_id, r.fingerprint FROM env_running r
		JOIN artifacts a ON a.org_id = r.org_id AND a.fingerprint = r.fingerprint
		WHERE r.org_id = ? AND a.flow_id = ?`, orgID, flowID)
	return err
}

func (t *txn) RunningChanges(ctx context.Context, envID string) ([]store.RunningChange, error) {
	q, args := `SELECT id, fingerprint FROM running_changes WHERE env_id = ?`, []any{envID}
	if t.d.name == postgresDialect.name { // and the notices not expanded yet, as marks with no ID
		// A flow's notices drive their lookups, through the index of flow notices (migration 16),
		// each behind OFFSET 0 so that it is not flattened into a join: planned as one, the
		// EXISTS below hashed every artifact of the store at every snapshot.
		q += ` UNION ALL SELECT 0, x.fingerprint FROM (
			SELECT r.fingerprint FROM env_running r JOIN change_notices n ON n.org_id = r.org_id AND n.fingerprint = r.fingerprint
			WHERE r.env_id = ?
			UNION SELECT r.fingerprint FROM change_notices n CROSS JOIN LATERAL (SELECT r.fingerprint FROM env_running r
				WHERE r.env_id = ? AND r.org_id = n.org_id AND EXISTS (SELECT 1 FROM artifacts a
					WHERE a.org_id = r.org_id AND a.fingerprint = r.fingerprint AND a.flow_id = n.flow_id) OFFSET 0) r
			WHERE n.flow_id <> '') x`
		args = append(args, envID, envID)
	}
	rows, err := t.rows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: running changes: %w", err)
	}
	defer rows.Close()
	var out []store.RunningChange
	for rows.Next() {
		var c store.RunningChange
		if err := rows.Scan(&c.ID, &c.Fingerprint); err != nil {
			return nil, fmt.Errorf("sqlstore: running changes: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func (t *txn) ClearRunningChanges(ctx context.Context, ids []int64) error {
	ids = slices.DeleteFunc(slices.Sorted(slices.Values(ids)), func(id int64) bool { return id == 0 }) // notices stay
	return preparedChunks(ids, 1, func(part []int64) error {
		_, err := t.exec(ctx, "clear running changes", oneOffIf(len(part) > preparedRows)+`DELETE FROM running_changes WHERE id IN (`+
			placeholders(len(part))+`)`, anys(part)...)
		return err
	})
}

// CompactRunningChanges keeps one mark per fingerprint. Deleting a committed mark that has a
// committed twin loses nothing, and a mark being inserted is not visible to the delete.
func (t *txn) CompactRunningChanges(ctx context.Context, envID string) error {
	_, err := t.exec(ctx, "compact running changes", `DELETE FROM running_changes WHERE env_id = ? AND id < (
		SELECT MAX(c.id) FROM running_changes c WHERE c.env_id = running_changes.env_id AND c.fingerprint = running_changes.fingerprint)`, envID)
	return err
}

// expandNotices marks, in every environment where they run now, the fingerprints of the change
// notices committed so far, and deletes those notices, in one statement of its own: it must
// read the running index after the transactions that wrote the notices committed
// (changeNoticesTable). Notices another process is expanding meanwhile are left to it.
//
// It looks up each notice's environments by index, driven by the notices (each subquery behind
// OFFSET 0, which keeps PostgreSQL from flattening it into a join). Written as a join, the
// planner guessed the notices from the table's size, dead rows included, at tens of thousands,
// merged them with the whole running index, and at 1M attestations took 57 ms a save to mark
// nothing (and 0.6 s more compiling that plan, before JIT was turned off). At most
// expandChunk notices go at once; the rest are the next expansion's, and read as marks until
// then.
func (s *Store) expandNotices(ctx context.Context) error {
	s.sent.Add(1)
	_, err := s.w.ExecContext(ctx, `WITH taken AS (
		DELETE FROM change_notices WHERE id IN (SELECT id FROM change_notices ORDER BY id LIMIT `+strconv.Itoa(expandChunk)+`
			FOR UPDATE SKIP LOCKED)
		RETURNING org_id, fingerprint, flow_id)
		INSERT INTO running_changes (env_id, fingerprint)
		SELECT r.env_id, r.fingerprint FROM taken n CROSS JOIN LATERAL (SELECT env_id, fingerprint FROM env_running r
			WHERE r.org_id = n.org_id AND r.fingerprint = n.fingerprint OFFSET 0) r WHERE n.fingerprint <> ''
		UNION SELECT r.env_id, r.fingerprint FROM taken n CROSS JOIN LATERAL (SELECT env_id, fingerprint FROM env_running r
			WHERE r.org_id = n.org_id AND EXISTS (SELECT 1 FROM artifacts a
				WHERE a.org_id = r.org_id AND a.fingerprint = r.fingerprint AND a.flow_id = n.flow_id) OFFSET 0) r
			WHERE n.flow_id <> ''`)
	if err != nil {
		return fmt.Errorf("sqlstore: mark noticed changes: %w", err)
	}
	return nil
}
