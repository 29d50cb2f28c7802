package sqlstore

import (
	"context"
	"fmt"
	"slices"
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
	_, err := t.exec(ctx, "mark running changed", `INSERT INTO running_changes (env_id, fingerprint)
		SELECT DISTINCT r.env_id, r.fingerprint FROM env_running r
		JOIN artifacts a ON a.org_id = r.org_id AND a.fingerprint = r.fingerprint
		WHERE r.org_id = ? AND a.flow_id = ?`, orgID, flowID)
	return err
}

func (t *txn) RunningChanges(ctx context.Context, envID string) ([]store.RunningChange, error) {
	rows, err := t.rows(ctx, `SELECT id, fingerprint FROM running_changes WHERE env_id = ?`, envID)
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
	return preparedChunks(slices.Sorted(slices.Values(ids)), 1, func(part []int64) error {
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
