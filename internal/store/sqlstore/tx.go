package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

// txn is one evaluator transaction; its reads see its own writes.
type txn struct {
	reads
	channel    string // where Announce notifies; empty on SQLite
	scratch    *bufPool
	onCommit   []func()
	onRollback []func()
	// noticed: the transaction wrote change notices, which Update expands once it commits.
	noticed bool
}

func (t *txn) OnCommit(f func())   { t.onCommit = append(t.onCommit, f) }
func (t *txn) OnRollback(f func()) { t.onRollback = append(t.onRollback, f) }

func (t *txn) exec(ctx context.Context, what, q string, args ...any) (int64, error) {
	res, err := t.q.ExecContext(ctx, t.d.rebind(q), args...)
	if err != nil {
		if isUnique(err) {
			return 0, fmt.Errorf("sqlstore: %s: %w", what, store.ErrConflict)
		}
		return 0, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

func (t *txn) Applied(ctx context.Context, id string) (bool, error) {
	n, err := t.count(ctx, "applied", `SELECT COUNT(*) FROM applied_messages WHERE id = ?`, id)
	return n > 0, err
}

func (t *txn) MarkApplied(ctx context.Context, id, trailID string, at float64) error {
	return t.MarkAppliedAll(ctx, []store.AppliedMark{{ID: id, TrailID: trailID, At: at}})
}

// preparedRows is the most rows a prepared multi-row statement takes (preparedChunks).
const preparedRows = 64

func (t *txn) AppliedAmong(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	err := preparedChunks(ids, 1, func(part []string) error {
		rows, err := t.rows(ctx, oneOffIf(len(part) > preparedRows)+`SELECT id FROM applied_messages WHERE id IN (`+placeholders(len(part))+`)`,
			anys(part)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			out[id] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: applied among: %w", err)
	}
	return out, nil
}

func (t *txn) MarkAppliedAll(ctx context.Context, marks []store.AppliedMark) error {
	// Each mark records its trail's dirt generation as this transaction left it (see Visible).
	const row = `(?, ?, ?, COALESCE((SELECT d.generation FROM dirty_trails d WHERE d.trail_id = ?), 0))`
	return preparedChunks(marks, 4, func(part []store.AppliedMark) error {
		args := make([]any, 0, 4*len(part))
		for _, m := range part {
			args = append(args, m.ID, m.TrailID, m.At, m.TrailID)
		}
		q := oneOffIf(len(part) > preparedRows) + `INSERT INTO applied_messages (id, trail_id, applied_at, generation) VALUES ` +
			strings.Repeat(row+", ", len(part)-1) + row
		_, err := t.exec(ctx, "mark applied", q, args...)
		return err
	})
}

func (t *txn) PutTemplate(ctx context.Context, id, content string) error {
	_, err := t.exec(ctx, "put template", `INSERT INTO templates (id, content) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`, id, content)
	return err
}

// UpsertFlow creates the flow, or updates the live (or archived, which it revives) flow of that name.
func (t *txn) UpsertFlow(ctx context.Context, f store.Flow) (bool, error) {
	tags, err := json.Marshal(nonNilTags(f.Tags))
	if err != nil {
		return false, fmt.Errorf("sqlstore: flow tags: %w", err)
	}
	n, err := t.exec(ctx, "update flow", `UPDATE flows SET description = ?, visibility = ?, template_id = ?, archived = 0,
		last_modified_at = ? WHERE org_id = ? AND name = ?`,
		f.Description, f.Visibility, f.TemplateID, f.LastModifiedAt, f.OrgID, f.Name)
	if err != nil || n > 0 {
		return false, err
	}
	_, err = t.exec(ctx, "insert flow", `INSERT INTO flows (id, org_id, name, description, visibility, template_id, tags,
		repo_url, archived, created_at, last_modified_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)`,
		f.ID, f.OrgID, f.Name, f.Description, f.Visibility, f.TemplateID, string(tags), f.RepoURL, f.CreatedAt, f.LastModifiedAt)
	return err == nil, err
}

func nonNilTags(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func (t *txn) RenameFlow(ctx context.Context, orgID, flowID, newName string, at float64) error {
	n, err := t.exec(ctx, "rename flow", `UPDATE flows SET name = ?, last_modified_at = ? WHERE org_id = ? AND id = ?`, newName, at, orgID, flowID)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: rename flow %s: %w", flowID, store.ErrNotFound)
	}
	return err
}

func (t *txn) SetFlowTags(ctx context.Context, orgID, flowID string, tags map[string]string, at float64) error {
	b, err := json.Marshal(nonNilTags(tags))
	if err != nil {
		return fmt.Errorf("sqlstore: flow tags: %w", err)
	}
	n, err := t.exec(ctx, "set flow tags", `UPDATE flows SET tags = ?, last_modified_at = ? WHERE org_id = ? AND id = ?`, string(b), at, orgID, flowID)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: set flow tags %s: %w", flowID, store.ErrNotFound)
	}
	return err
}

// ArchiveFlow hides a flow. Its name gets a suffix so that the name can be used again.
func (t *txn) ArchiveFlow(ctx context.Context, orgID, flowID string, at float64) error {
	n, err := t.exec(ctx, "archive flow", `UPDATE flows SET archived = 1, name = name || ? , last_modified_at = ?
		WHERE org_id = ? AND id = ? AND archived = 0`, "~archived~"+flowID, at, orgID, flowID)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: archive flow %s: %w", flowID, store.ErrNotFound)
	}
	return err
}

func marshalTrailDoc(tr store.Trail) (string, error) {
	b, err := json.Marshal(trailDoc{
		Description: tr.Description, GitCommitInfo: tr.GitCommitInfo, RepoInfo: tr.RepoInfo,
		OriginURL: tr.OriginURL, ExternalURLs: tr.ExternalURLs, UserData: tr.UserData,
	})
	if err != nil {
		return "", fmt.Errorf("sqlstore: trail doc: %w", err)
	}
	return string(b), nil
}

// UpsertTrail creates the trail or replaces its descriptive fields and template.
func (t *txn) UpsertTrail(ctx context.Context, tr store.Trail) (bool, error) {
	doc, err := marshalTrailDoc(tr)
	if err != nil {
		return false, err
	}
	n, err := t.exec(ctx, "update trail", `UPDATE trails SET doc = ?, template_id = ?, last_modified_at = ?
		WHERE flow_id = ? AND name = ?`, doc, tr.TemplateID, tr.LastModifiedAt, tr.FlowID, tr.Name)
	if err != nil || n > 0 {
		return false, err
	}
	_, err = t.exec(ctx, "insert trail", `INSERT INTO trails (id, org_id, flow_id, name, doc, template_id, created_by,
		created_at, last_modified_at, state, compliance, evaluated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', 0)`,
		tr.ID, tr.OrgID, tr.FlowID, tr.Name, doc, tr.TemplateID, tr.CreatedBy, tr.CreatedAt, tr.LastModifiedAt, "INCOMPLETE")
	return err == nil, err
}

func (t *txn) TouchTrail(ctx context.Context, trailID string, at float64) error {
	return t.TouchTrails(ctx, map[string]float64{trailID: at})
}

func (t *txn) TouchTrails(ctx context.Context, at map[string]float64) error {
	// On PostgreSQL the rows are locked in ID order first: an UPDATE joined to a list locks them
	// in whatever order its plan meets them, which differs with the list's size, and two batches
	// touching the same trails (two evaluators on one partition during a rebalance) deadlocked
	// (TestPostgresTouchTrailsInOrder). The parts go in ID order too.
	lockFirst := t.d.name == postgresDialect.name
	return preparedChunks(slices.Sorted(maps.Keys(at)), 2, func(part []string) error {
		args := make([]any, 0, 2*len(part))
		for _, id := range part {
			args = append(args, id, at[id])
		}
		values := `(VALUES ` + typedRows(len(part), "?", "CAST(? AS DOUBLE PRECISION)") + `)`
		q := `UPDATE trails SET last_modified_at = v.column2 FROM ` + values + ` AS v WHERE trails.id = v.column1`
		if lockFirst {
			q = `WITH v AS ` + values + `, locked AS (SELECT t.id FROM trails t JOIN v ON t.id = v.column1 ORDER BY t.id
				FOR NO KEY UPDATE OF t)
				UPDATE trails SET last_modified_at = v.column2 FROM v JOIN locked l ON l.id = v.column1 WHERE trails.id = l.id`
		}
		_, err := t.exec(ctx, "touch trails", oneOffIf(len(part) > preparedRows)+q, args...)
		return err
	})
}

func (t *txn) HoldTrails(ctx context.Context, ids []string) error {
	if t.d.name != postgresDialect.name {
		return nil // one writer at a time: nothing to order
	}
	// NO KEY UPDATE, as an UPDATE of the row would take; in ID order, as every transaction
	// takes these rows (TestPostgresTouchTrailsInOrder). Locking a row marks it without a new
	// version of it: the save writes the trail once, after.
	return preparedChunks(slices.Compact(slices.Sorted(slices.Values(ids))), 1, func(part []string) error {
		_, err := t.exec(ctx, "hold trails", oneOffIf(len(part) > preparedRows)+`SELECT id FROM trails
			WHERE id IN (`+placeholders(len(part))+`) ORDER BY id FOR NO KEY UPDATE`, anys(part)...)
		return err
	})
}

// typedRows is n rows of VALUES, each of the given columns (placeholders, some cast so that
// PostgreSQL knows their type). VALUES names its columns column1, column2, ... in both SQLite
// and PostgreSQL, which the statements joining one rely on.
func typedRows(n int, cols ...string) string {
	return strings.TrimSuffix(strings.Repeat("("+strings.Join(cols, ", ")+"), ", n), ", ")
}

func (t *txn) InsertArtifact(ctx context.Context, a store.Artifact) error {
	_, err := t.exec(ctx, "insert artifact", `INSERT INTO artifacts (id, org_id, flow_id, trail_id, fingerprint, template_name,
		filename, git_commit, repo_name, report, reported_by, created_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.OrgID, a.FlowID, a.TrailID, a.Fingerprint, a.TemplateName, a.Filename, a.GitCommit, a.RepoName,
		nullJSON(a.Report), a.ReportedBy, a.CreatedAt, "INCOMPLETE")
	return err
}

func (t *txn) InsertAttestation(ctx context.Context, a store.Attestation) error {
	return t.InsertAttestations(ctx, []store.Attestation{a})
}

func (t *txn) InsertAttestations(ctx context.Context, as []store.Attestation) error {
	return preparedChunks(as, 16, func(part []store.Attestation) error {
		args := make([]any, 0, 16*len(part))
		for _, a := range part {
			args = append(args, a.ID, a.OrgID, a.FlowID, a.TrailID, a.Name, a.Type, b2i(a.IsCompliant), a.ArtifactFingerprint,
				a.TargetArtifact, a.OverridesID, a.OverrideReason, a.EvidenceSHA256, a.EvidenceName, nullJSON(a.Data), a.ReportedBy,
				a.CreatedAt)
		}
		_, err := t.exec(ctx, "insert attestations", oneOffIf(len(part) > preparedRows)+`INSERT INTO attestations (`+
			attestationCols+`) VALUES `+rowsOf(len(part), 16), args...)
		return err
	})
}

func (t *txn) AppendTrailEvent(ctx context.Context, e store.TrailEvent, at float64) error {
	_, err := t.exec(ctx, "append trail event", `INSERT INTO trail_events (trail_id, doc, created_at) VALUES (?, ?, ?)`,
		e.TrailID, string(e.Doc), at)
	return err
}

// giveWayAfter is GiveWay's bound: well under PostgreSQL's deadlock_timeout (1 s by default), so
// a cycle through a transaction that gives way ends before deadlock detection runs, and well
// above a batch transaction's usual length, so ordinary waits still succeed.
const giveWayAfter = "200ms"

func (t *txn) GiveWay(ctx context.Context) error {
	if t.d.name != postgresDialect.name {
		return nil
	}
	_, err := t.exec(ctx, "give way", `SET LOCAL lock_timeout = '`+giveWayAfter+`'`)
	return err
}

func (t *txn) LockTrails(ctx context.Context, ids []string) (map[string]int64, error) {
	sorted := slices.Compact(slices.Sorted(slices.Values(ids)))
	lock := ""
	if t.d.name == postgresDialect.name {
		// NO KEY UPDATE is what an UPDATE of the row takes, and it does not conflict with the
		// KEY SHARE that inserting an attestation or event (a foreign key to the trail) takes.
		lock = ` FOR NO KEY UPDATE OF t SKIP LOCKED`
	}
	out := make(map[string]int64, len(sorted))
	// Parts in ID order: the locks are taken in the order every transaction takes them.
	err := preparedChunks(sorted, 1, func(part []string) error {
		rows, err := t.rows(ctx, oneOffIf(len(part) > preparedRows)+`SELECT t.id, COALESCE(d.generation, 0) FROM trails t
			LEFT JOIN dirty_trails d ON d.trail_id = t.id WHERE t.id IN (`+placeholders(len(part))+`) ORDER BY t.id`+lock,
			anys(part)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var gen int64
			if err := rows.Scan(&id, &gen); err != nil {
				return err
			}
			out[id] = gen
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: lock trails: %w", err)
	}
	return out, nil
}

func (t *txn) MarkDirty(ctx context.Context, trailID string) error {
	return t.MarkDirtyAll(ctx, []string{trailID})
}

func (t *txn) MarkDirtyAll(ctx context.Context, trailIDs []string) error {
	// Generations come from the clock (and only ever grow) so that a row deleted and
	// re-created never reuses a generation a slow evaluator elsewhere might still clear.
	// A new row counts every earlier generation as evaluated (the trail was clean): messages
	// applied before it stay visible (see Visible).
	gen := time.Now().UnixNano()
	// In ID order, as every transaction that takes several of these rows takes them.
	trailIDs = slices.Sorted(slices.Values(trailIDs))
	return preparedChunks(trailIDs, 3, func(part []string) error {
		args := make([]any, 0, 3*len(part))
		for _, id := range part {
			args = append(args, id, gen, gen-1)
		}
		_, err := t.exec(ctx, "mark dirty", oneOffIf(len(part) > preparedRows)+`INSERT INTO dirty_trails (trail_id, generation, evaluated)
			VALUES `+rowsOf(len(part), 3)+` ON CONFLICT (trail_id) DO UPDATE SET generation = CASE
			WHEN dirty_trails.generation >= excluded.generation THEN dirty_trails.generation + 1 ELSE excluded.generation END`,
			args...)
		return err
	})
}

func (t *txn) ClearDirty(ctx context.Context, trailID string, generation int64) error {
	return t.ClearDirtyAll(ctx, map[string]int64{trailID: generation})
}

func (t *txn) ClearDirtyAll(ctx context.Context, generations map[string]int64) error {
	return preparedChunks(slices.Sorted(maps.Keys(generations)), 2, func(part []string) error {
		args := make([]any, 0, 2*len(part))
		for _, id := range part {
			args = append(args, id, generations[id])
		}
		n, err := t.exec(ctx, "clear dirty", oneOffIf(len(part) > preparedRows)+`DELETE FROM dirty_trails
			WHERE (trail_id, generation) IN (VALUES `+typedRows(len(part), "?", "CAST(? AS BIGINT)")+`)`, args...)
		if err != nil || int(n) == len(part) {
			return err
		}
		// Trails dirtied again since their generation was read stay dirty, evaluated up to it:
		// the messages applied up to that generation are visible now (see Visible).
		_, err = t.exec(ctx, "record evaluated generation", oneOffIf(len(part) > preparedRows)+`UPDATE dirty_trails
			SET evaluated = v.column2 FROM (VALUES `+typedRows(len(part), "?", "CAST(? AS BIGINT)")+`) AS v
			WHERE dirty_trails.trail_id = v.column1 AND dirty_trails.evaluated < v.column2`, args...)
		return err
	})
}

func (t *txn) SaveCompliances(ctx context.Context, saves []store.ComplianceSave) error {
	err := preparedChunks(saves, 5, func(part []store.ComplianceSave) error {
		args := make([]any, 0, 5*len(part))
		for _, c := range part {
			args = append(args, c.TrailID, c.State, string(c.Doc), c.At, c.ModifiedAt)
		}
		_, err := t.exec(ctx, "save compliance", oneOffIf(len(part) > preparedRows)+`UPDATE trails SET state = v.column2,
			compliance = v.column3, evaluated_at = v.column4,
			last_modified_at = CASE WHEN v.column5 > trails.last_modified_at THEN v.column5 ELSE trails.last_modified_at END
			FROM (VALUES `+typedRows(len(part), "?", "?", "?", "CAST(? AS DOUBLE PRECISION)", "CAST(? AS DOUBLE PRECISION)")+
			`) AS v WHERE trails.id = v.column1`, args...)
		return err
	})
	if err != nil {
		return err
	}
	var states [][2]string
	for _, c := range saves {
		for _, id := range slices.Sorted(maps.Keys(c.ArtifactStates)) {
			states = append(states, [2]string{id, c.ArtifactStates[id]})
		}
	}
	return preparedChunks(states, 2, func(part [][2]string) error {
		args := make([]any, 0, 2*len(part))
		for _, st := range part {
			args = append(args, st[0], st[1])
		}
		// An artifact whose state stayed is not written: on PostgreSQL the same value would still
		// make a new row version (and, the page full, new index entries) at every evaluation of
		// its trail, which is every attestation to it.
		_, err := t.exec(ctx, "save artifact states", oneOffIf(len(part) > preparedRows)+`UPDATE artifacts SET state = v.column2
			FROM (VALUES `+rowsOf(len(part), 2)+`) AS v WHERE artifacts.id = v.column1 AND artifacts.state IS DISTINCT FROM v.column2`, args...)
		return err
	})
}

func (t *txn) SaveCompliance(ctx context.Context, trailID, state string, doc json.RawMessage, at float64, artifactStates map[string]string) error {
	return t.SaveCompliances(ctx, []store.ComplianceSave{{TrailID: trailID, State: state, Doc: doc, At: at, ArtifactStates: artifactStates}})
}

func (t *txn) PutCustomTypeVersion(ctx context.Context, orgID, name, description string, v store.CustomTypeVersion) error {
	rules, err := json.Marshal(v.Rules)
	if err != nil {
		return fmt.Errorf("sqlstore: custom type rules: %w", err)
	}
	if _, err := t.exec(ctx, "put custom type", `INSERT INTO custom_types (org_id, name, description, archived) VALUES (?, ?, ?, 0)
		ON CONFLICT (org_id, name) DO UPDATE SET description = excluded.description, archived = 0`, orgID, name, description); err != nil {
		return err
	}
	var summary sql.NullString
	if len(v.Summary) > 0 {
		b, err := json.Marshal(v.Summary)
		if err != nil {
			return fmt.Errorf("sqlstore: custom type summary: %w", err)
		}
		summary = sql.NullString{String: string(b), Valid: true}
	}
	_, err = t.exec(ctx, "put custom type version", `INSERT INTO custom_type_versions (org_id, name, version, schema_json, rules,
		summary, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, orgID, name, v.Version, v.Schema, string(rules), summary,
		v.CreatedBy, v.CreatedAt)
	return err
}

func (t *txn) ArchiveCustomType(ctx context.Context, orgID, name string) error {
	n, err := t.exec(ctx, "archive custom type", `UPDATE custom_types SET archived = 1 WHERE org_id = ? AND name = ?`, orgID, name)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: archive custom type %s: %w", name, store.ErrNotFound)
	}
	return err
}

var _ store.Tx = (*txn)(nil)
