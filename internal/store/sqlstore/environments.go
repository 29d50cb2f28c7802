package sqlstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/klauspost/compress/s2"

	"github.com/veritrail/veritrail/internal/store"
)

// maxParams bounds the parameters of one statement (SQLite allows 32766, PostgreSQL 65535),
// so that a snapshot of a few thousand artifacts still takes one statement per table.
const maxParams = 30000

// rowsPer is how many rows of k parameters fit in one statement.
func rowsPer(k int) int { return maxParams / k }

const envCols = `id, org_id, name, type, description, include_scaling, require_provenance, included, tags, archived,
	created_at, last_modified_at, last_reported_at, last_changed_at, state`

func scanEnv(sc interface{ Scan(...any) error }) (store.Environment, error) {
	var e store.Environment
	var scaling, prov, archived int
	var included, tags string
	var state *int64
	err := sc.Scan(&e.ID, &e.OrgID, &e.Name, &e.Type, &e.Description, &scaling, &prov, &included, &tags, &archived,
		&e.CreatedAt, &e.LastModifiedAt, &e.LastReportedAt, &e.LastChangedAt, &state)
	if err != nil {
		return e, err
	}
	e.IncludeScaling, e.RequireProvenance, e.Archived = scaling != 0, prov != 0, archived != 0
	if state != nil {
		b := *state != 0
		e.State = &b
	}
	if err := json.Unmarshal([]byte(included), &e.Included); err != nil {
		return e, fmt.Errorf("environment included: %w", err)
	}
	e.Tags = map[string]string{}
	if err := json.Unmarshal([]byte(tags), &e.Tags); err != nil {
		return e, fmt.Errorf("environment tags: %w", err)
	}
	return e, nil
}

func (r reads) envs(ctx context.Context, what, q string, args ...any) ([]store.Environment, error) {
	rows, err := r.rows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	defer rows.Close()
	var out []store.Environment
	for rows.Next() {
		e, err := scanEnv(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: %s: %w", what, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (r reads) EnvironmentByName(ctx context.Context, orgID, name string) (store.Environment, error) {
	e, err := scanEnv(r.row(ctx, `SELECT `+envCols+` FROM environments WHERE org_id = ? AND name = ? AND archived = 0`, orgID, name))
	if err != nil {
		return e, notFound(err, "environment "+name)
	}
	return e, nil
}

func (r reads) EnvironmentByID(ctx context.Context, orgID, id string) (store.Environment, error) {
	e, err := scanEnv(r.row(ctx, `SELECT `+envCols+` FROM environments WHERE org_id = ? AND id = ?`, orgID, id))
	if err != nil {
		return e, notFound(err, "environment "+id)
	}
	return e, nil
}

func (r reads) ListEnvironments(ctx context.Context, orgID string, p store.Page) ([]store.Environment, int, error) {
	total, err := r.count(ctx, "environments", `SELECT COUNT(*) FROM environments WHERE org_id = ? AND archived = 0`, orgID)
	if err != nil {
		return nil, 0, err
	}
	out, err := r.envs(ctx, "list environments", `SELECT `+envCols+` FROM environments WHERE org_id = ? AND archived = 0 ORDER BY name`+pageClause(p), orgID)
	return out, total, err
}

func (r reads) LogicalEnvironments(ctx context.Context, envID string) ([]store.Environment, error) {
	return r.envs(ctx, "logical environments", `SELECT `+envCols+` FROM environments WHERE archived = 0 AND id IN
		(SELECT logical_id FROM env_members WHERE physical_id = ?) ORDER BY name`, envID)
}

const snapshotCols = `env_id, idx, timestamp, type, compliant, artifacts, artifacts_s2`

func scanSnapshot(sc interface{ Scan(...any) error }) (store.Snapshot, error) {
	var s store.Snapshot
	var compliant *int64
	var arts string
	var compressed []byte
	if err := sc.Scan(&s.EnvID, &s.Index, &s.Timestamp, &s.Type, &compliant, &arts, &compressed); err != nil {
		return s, err
	}
	if compliant != nil {
		b := *compliant != 0
		s.Compliant = &b
	}
	var err error
	s.Artifacts, err = decodeSnapshotDoc(arts, compressed)
	return s, err
}

func (r reads) LatestSnapshotDigest(ctx context.Context, envID string) (int, []byte, error) {
	var d []byte
	var index int
	if err := r.row(ctx, `SELECT idx, digest FROM snapshot_digests WHERE env_id = ?`, envID).Scan(&index, &d); err != nil {
		return 0, nil, notFound(err, "snapshot digest of "+envID)
	}
	if len(d) == 0 {
		return 0, nil, fmt.Errorf("sqlstore: snapshot digest of %s: %w", envID, store.ErrNotFound)
	}
	return index, d, nil
}

func (r reads) LatestSnapshot(ctx context.Context, envID string) (store.Snapshot, error) {
	s, err := scanSnapshot(r.row(ctx, `SELECT `+snapshotCols+` FROM snapshots WHERE env_id = ? ORDER BY idx DESC LIMIT 1`, envID))
	if err != nil {
		return s, notFound(err, "latest snapshot")
	}
	return s, nil
}

func (r reads) SnapshotByIndex(ctx context.Context, envID string, index int) (store.Snapshot, error) {
	s, err := scanSnapshot(r.row(ctx, `SELECT `+snapshotCols+` FROM snapshots WHERE env_id = ? AND idx = ?`, envID, index))
	if err != nil {
		return s, notFound(err, fmt.Sprintf("snapshot %d", index))
	}
	return s, nil
}

func (r reads) SnapshotTimestamps(ctx context.Context, envID string) ([]float64, error) {
	rows, err := r.rows(ctx, `SELECT timestamp FROM snapshots WHERE env_id = ? ORDER BY idx`, envID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: snapshot timestamps: %w", err)
	}
	defer rows.Close()
	var out []float64
	for rows.Next() {
		var ts float64
		if err := rows.Scan(&ts); err != nil {
			return nil, fmt.Errorf("sqlstore: snapshot timestamps: %w", err)
		}
		out = append(out, ts)
	}
	return out, rows.Err()
}

// ListSnapshots returns snapshots fromIndex..toIndex (inclusive) newest first, without their
// artifacts (lists show only the summary).
func (r reads) ListSnapshots(ctx context.Context, envID string, fromIndex, toIndex int) ([]store.Snapshot, error) {
	rows, err := r.rows(ctx, `SELECT env_id, idx, timestamp, type, compliant, '[]', NULL FROM snapshots
		WHERE env_id = ? AND idx >= ? AND idx <= ? ORDER BY idx DESC`, envID, fromIndex, toIndex)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list snapshots: %w", err)
	}
	defer rows.Close()
	var out []store.Snapshot
	for rows.Next() {
		s, err := scanSnapshot(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: list snapshots: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func (r reads) EnvEvents(ctx context.Context, envID string, f store.EventFilter) ([]store.EnvEvent, int, error) {
	where := ` WHERE env_id = ?`
	args := []any{envID}
	if f.FromIndex > 0 {
		where += ` AND snapshot_index >= ?`
		args = append(args, f.FromIndex)
	}
	if f.ToIndex > 0 {
		where += ` AND snapshot_index <= ?`
		args = append(args, f.ToIndex)
	}
	if f.FromTS > 0 {
		where += ` AND reported_at >= ?`
		args = append(args, f.FromTS)
	}
	if f.ToTS > 0 {
		where += ` AND reported_at <= ?`
		args = append(args, f.ToTS)
	}
	if len(f.RepoNames) > 0 {
		// repo_names holds a JSON array; match any of the quoted names in it.
		var ors []string
		for _, n := range f.RepoNames {
			ors = append(ors, `repo_names LIKE ? ESCAPE '!'`)
			args = append(args, `%"`+likeLiteral(n)+`"%`)
		}
		where += ` AND (` + strings.Join(ors, " OR ") + `)`
	}
	total, err := r.count(ctx, "env events", `SELECT COUNT(*) FROM env_events`+where, args...)
	if err != nil {
		return nil, 0, err
	}
	order := ` ORDER BY seq DESC`
	if f.Reverse {
		order = ` ORDER BY seq`
	}
	rows, err := r.rows(ctx, `SELECT seq, env_id, snapshot_index, type, artifact_name, fingerprint, description, reported_at,
		repo_names, doc FROM env_events`+where+order+pageClause(f.Page), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlstore: env events: %w", err)
	}
	defer rows.Close()
	var out []store.EnvEvent
	for rows.Next() {
		var e store.EnvEvent
		var repos, doc string
		if err := rows.Scan(&e.Seq, &e.EnvID, &e.SnapshotIndex, &e.Type, &e.ArtifactName, &e.Fingerprint, &e.Description,
			&e.ReportedAt, &repos, &doc); err != nil {
			return nil, 0, fmt.Errorf("sqlstore: env events: %w", err)
		}
		_ = json.Unmarshal([]byte(repos), &e.RepoNames) // written by us as a JSON array
		e.Doc = json.RawMessage(doc)
		out = append(out, e)
	}
	return out, total, rows.Err()
}

// likeLiteral escapes LIKE wildcards with '!'.
func likeLiteral(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}

func (r reads) RunningIn(ctx context.Context, orgID, fingerprint string) ([]store.Running, error) {
	rows, err := r.rows(ctx, `SELECT env_id, fingerprint, name, since FROM env_running WHERE org_id = ? AND fingerprint = ?
		ORDER BY since`, orgID, fingerprint)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: running in: %w", err)
	}
	defer rows.Close()
	var out []store.Running
	for rows.Next() {
		var x store.Running
		if err := rows.Scan(&x.EnvID, &x.Fingerprint, &x.Name, &x.Since); err != nil {
			return nil, fmt.Errorf("sqlstore: running in: %w", err)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

func (r reads) FingerprintEvents(ctx context.Context, orgID, fingerprint string) ([]store.EnvEvent, error) {
	rows, err := r.rows(ctx, `SELECT v.seq, v.env_id, v.snapshot_index, v.type, v.artifact_name, v.fingerprint, v.description,
		v.reported_at, v.repo_names, v.doc FROM env_events v JOIN environments e ON e.id = v.env_id
		WHERE v.fingerprint = ? AND e.org_id = ? ORDER BY v.reported_at, v.seq`, fingerprint, orgID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: fingerprint events: %w", err)
	}
	defer rows.Close()
	var out []store.EnvEvent
	for rows.Next() {
		var e store.EnvEvent
		var repos, doc string
		if err := rows.Scan(&e.Seq, &e.EnvID, &e.SnapshotIndex, &e.Type, &e.ArtifactName, &e.Fingerprint, &e.Description,
			&e.ReportedAt, &repos, &doc); err != nil {
			return nil, fmt.Errorf("sqlstore: fingerprint events: %w", err)
		}
		_ = json.Unmarshal([]byte(repos), &e.RepoNames) // written by us as a JSON array
		e.Doc = json.RawMessage(doc)
		out = append(out, e)
	}
	return out, rows.Err()
}

// ArtifactsByFingerprints finds every report of the fingerprints, in one query per 500.
func (r reads) ArtifactsByFingerprints(ctx context.Context, orgID string, fps []string) ([]store.Artifact, error) {
	var out []store.Artifact
	for start, n := 0, rowsPer(1); start < len(fps); start += n {
		part := fps[start:min(start+n, len(fps))]
		args := []any{orgID}
		for _, fp := range part {
			args = append(args, fp)
		}
		// One fingerprint (an assert) is a statement worth preparing; a list is not.
		arts, err := r.artifacts(ctx, "artifacts by fingerprints", oneOffIf(len(part) > 1)+`SELECT `+artifactCols+` FROM artifacts WHERE org_id = ?
			AND fingerprint IN (`+placeholders(len(part))+`) ORDER BY seq`, args...)
		if err != nil {
			return nil, err
		}
		out = append(out, arts...)
	}
	return out, nil
}

// TrailsByIDs loads trails in one query per 500.
func (r reads) TrailsByIDs(ctx context.Context, ids []string) ([]store.Trail, error) {
	var out []store.Trail
	for start, n := 0, rowsPer(1); start < len(ids); start += n {
		part := ids[start:min(start+n, len(ids))]
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		rows, err := r.rows(ctx, oneOffIf(len(part) > 1)+`SELECT `+trailCols+` FROM trails WHERE id IN (`+placeholders(len(part))+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: trails by ids: %w", err)
		}
		for rows.Next() {
			t, err := scanTrail(rows)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlstore: trails by ids: %w", err)
			}
			out = append(out, t)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("sqlstore: trails by ids: %w", err)
		}
	}
	return out, nil
}

func (r reads) Allowlist(ctx context.Context, envID string) ([]store.AllowlistEntry, error) {
	rows, err := r.rows(ctx, `SELECT id, env_id, fingerprint, artifact_name, description, allowed_by, timestamp FROM allowlist
		WHERE env_id = ? ORDER BY timestamp`, envID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: allowlist: %w", err)
	}
	defer rows.Close()
	var out []store.AllowlistEntry
	for rows.Next() {
		var a store.AllowlistEntry
		if err := rows.Scan(&a.ID, &a.EnvID, &a.Fingerprint, &a.ArtifactName, &a.Description, &a.AllowedBy, &a.Timestamp); err != nil {
			return nil, fmt.Errorf("sqlstore: allowlist: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// SearchArtifacts matches fingerprint or commit prefixes (callers validate them as hex).
func (r reads) SearchArtifacts(ctx context.Context, orgID, prefix string, limit int) ([]store.Artifact, error) {
	hi := prefix + "g" // sorts after every hex digit: two index range scans
	return r.artifacts(ctx, "search artifacts", `SELECT `+artifactCols+` FROM artifacts WHERE org_id = ?
		AND ((fingerprint >= ? AND fingerprint < ?) OR (git_commit >= ? AND git_commit < ?))
		ORDER BY seq DESC LIMIT `+fmt.Sprint(max(limit, 1)), orgID, prefix, hi, prefix, hi)
}

// --- writes

func envRowArgs(e store.Environment) ([]any, error) {
	included, err := json.Marshal(nonNilStrings(e.Included))
	if err != nil {
		return nil, fmt.Errorf("sqlstore: environment included: %w", err)
	}
	tags, err := json.Marshal(nonNilTags(e.Tags))
	if err != nil {
		return nil, fmt.Errorf("sqlstore: environment tags: %w", err)
	}
	var state any
	if e.State != nil {
		state = b2i(*e.State)
	}
	return []any{e.Name, e.Type, e.Description, b2i(e.IncludeScaling), b2i(e.RequireProvenance), string(included), string(tags),
		b2i(e.Archived), e.LastModifiedAt, e.LastReportedAt, e.LastChangedAt, state}, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (t *txn) UpsertEnvironment(ctx context.Context, e store.Environment) (bool, error) {
	if _, err := t.EnvironmentByName(ctx, e.OrgID, e.Name); err == nil {
		return false, t.updateEnvByName(ctx, e)
	}
	args, err := envRowArgs(e)
	if err != nil {
		return false, err
	}
	args = append([]any{e.ID, e.OrgID, e.CreatedAt}, args...)
	if _, err := t.exec(ctx, "insert environment", `INSERT INTO environments (id, org_id, created_at, name, type, description,
		include_scaling, require_provenance, included, tags, archived, last_modified_at, last_reported_at, last_changed_at, state)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...); err != nil {
		return false, err
	}
	return true, t.setMembers(ctx, e.ID, e.Included)
}

// updateEnvByName replaces the settings of the live environment of that name, keeping its
// reporting history.
func (t *txn) updateEnvByName(ctx context.Context, e store.Environment) error {
	cur, err := t.EnvironmentByName(ctx, e.OrgID, e.Name)
	if err != nil {
		return err
	}
	cur.Type, cur.Description, cur.IncludeScaling, cur.RequireProvenance = e.Type, e.Description, e.IncludeScaling, e.RequireProvenance
	cur.Included, cur.LastModifiedAt = e.Included, e.LastModifiedAt
	return t.UpdateEnvironment(ctx, cur)
}

func (t *txn) UpdateEnvironment(ctx context.Context, e store.Environment) error {
	args, err := envRowArgs(e)
	if err != nil {
		return err
	}
	if err := t.enqueueComplianceChange(ctx, e); err != nil {
		return err
	}
	args = append(args, e.OrgID, e.ID)
	n, err := t.exec(ctx, "update environment", `UPDATE environments SET name = ?, type = ?, description = ?, include_scaling = ?,
		require_provenance = ?, included = ?, tags = ?, archived = ?, last_modified_at = ?, last_reported_at = ?,
		last_changed_at = ?, state = ? WHERE org_id = ? AND id = ?`, args...)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("sqlstore: update environment %s: %w", e.ID, store.ErrNotFound)
	}
	return t.setMembers(ctx, e.ID, e.Included)
}

func (t *txn) setMembers(ctx context.Context, logicalID string, physical []string) error {
	if _, err := t.exec(ctx, "clear members", `DELETE FROM env_members WHERE logical_id = ?`, logicalID); err != nil {
		return err
	}
	if len(physical) == 0 {
		return nil
	}
	args := make([]any, 0, 2*len(physical))
	for _, p := range physical {
		args = append(args, logicalID, p)
	}
	_, err := t.exec(ctx, "set members", `/* one-off */ INSERT INTO env_members (logical_id, physical_id) VALUES `+rowsOf(len(physical), 2)+
		` ON CONFLICT DO NOTHING`, args...)
	return err
}

// rowsOf is "(?, ?), (?, ?)" for n rows of k columns.
func rowsOf(n, k int) string {
	row := "(" + placeholders(k) + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

func (t *txn) InsertSnapshot(ctx context.Context, s store.Snapshot) error {
	var compliant any
	if s.Compliant != nil {
		compliant = b2i(*s.Compliant)
	}
	// The compression's output, about as large as the document, goes in a buffer the store
	// reuses: a 1,000-artifact snapshot would otherwise allocate half a megabyte for it.
	scratch := t.scratch.get(s2.MaxEncodedLen(len(s.Artifacts)))
	defer t.scratch.put(scratch)
	text, compressed := t.d.encodeSnapshotDoc(s.Artifacts, *scratch)
	_, err := t.exec(ctx, "insert snapshot", `INSERT INTO snapshots (env_id, idx, timestamp, type, compliant, artifacts, artifacts_s2)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, s.EnvID, s.Index, s.Timestamp, s.Type, compliant, text, compressed)
	if err != nil {
		return err
	}
	// A snapshot without a digest clears the old one, which no longer describes the latest.
	_, err = t.exec(ctx, "snapshot digest", `INSERT INTO snapshot_digests (env_id, idx, digest) VALUES (?, ?, ?)
		ON CONFLICT (env_id) DO UPDATE SET idx = excluded.idx, digest = excluded.digest`, s.EnvID, s.Index, s.Digest)
	return err
}

func (t *txn) InsertEnvEvents(ctx context.Context, events []store.EnvEvent) error {
	return cut(t.d, events, 9, func(part []store.EnvEvent, prepared bool) error {
		args := make([]any, 0, 9*len(part))
		for _, e := range part {
			repos, err := json.Marshal(nonNilStrings(e.RepoNames))
			if err != nil {
				return fmt.Errorf("sqlstore: event repos: %w", err)
			}
			args = append(args, e.EnvID, e.SnapshotIndex, e.Type, e.ArtifactName, e.Fingerprint, e.Description, e.ReportedAt,
				string(repos), nullJSON(e.Doc))
		}
		_, err := t.exec(ctx, "insert env events", oneOffIf(!prepared)+`INSERT INTO env_events (env_id, snapshot_index,
			type, artifact_name, fingerprint, description, reported_at, repo_names, doc) VALUES `+rowsOf(len(part), 9), args...)
		return err
	})
}

func (t *txn) SetRunning(ctx context.Context, orgID, envID string, gone []string, started []store.Running) error {
	err := cut(t.d, gone, 1, func(part []string, prepared bool) error {
		_, err := t.exec(ctx, "remove running", oneOffIf(!prepared)+`DELETE FROM env_running WHERE env_id = ?
			AND fingerprint IN (`+placeholders(len(part))+`)`, append([]any{envID}, anys(part)...)...)
		return err
	})
	if err != nil {
		return err
	}
	return cut(t.d, started, 5, func(part []store.Running, prepared bool) error {
		args := make([]any, 0, 5*len(part))
		for _, x := range part {
			args = append(args, envID, orgID, x.Fingerprint, x.Name, x.Since)
		}
		_, err := t.exec(ctx, "add running", oneOffIf(!prepared)+`INSERT INTO env_running (env_id, org_id, fingerprint,
			name, since) VALUES `+rowsOf(len(part), 5)+` ON CONFLICT DO NOTHING`, args...)
		return err
	})
}

func (t *txn) AppendTrailEvents(ctx context.Context, events []store.TrailEvent, at float64) error {
	return preparedChunks(events, 3, func(part []store.TrailEvent) error {
		args := make([]any, 0, 3*len(part))
		for _, e := range part {
			args = append(args, e.TrailID, string(e.Doc), cmp.Or(e.At, at))
		}
		_, err := t.exec(ctx, "append trail events", oneOffIf(len(part) > preparedRows)+`INSERT INTO trail_events (trail_id, doc, created_at) VALUES `+
			rowsOf(len(part), 3), args...)
		return err
	})
}

func (t *txn) InsertAllowlist(ctx context.Context, a store.AllowlistEntry) error {
	_, err := t.exec(ctx, "insert allowlist", `INSERT INTO allowlist (id, env_id, fingerprint, artifact_name, description,
		allowed_by, timestamp) VALUES (?, ?, ?, ?, ?, ?, ?)`, a.ID, a.EnvID, a.Fingerprint, a.ArtifactName, a.Description,
		a.AllowedBy, a.Timestamp)
	return err
}
