package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/veritrail/veritrail/internal/store"
)

func (r reads) Control(ctx context.Context, orgID, identifier string) (store.Control, error) {
	c := store.Control{OrgID: orgID, Identifier: identifier}
	var archived int
	var tags string
	err := r.row(ctx, `SELECT archived, tags FROM controls WHERE org_id = ? AND identifier = ?`, orgID, identifier).
		Scan(&archived, &tags)
	if err != nil {
		return c, notFound(err, "control "+identifier)
	}
	c.Archived = archived != 0
	if err := json.Unmarshal([]byte(tags), &c.Tags); err != nil {
		return c, fmt.Errorf("sqlstore: control %s tags: %w", identifier, err)
	}
	byID := map[string]*store.Control{identifier: &c}
	err = r.controlVersions(ctx, byID, `SELECT identifier, version, name, description, links, created_by, created_at
		FROM control_versions WHERE org_id = ? AND identifier = ? ORDER BY version`, orgID, identifier)
	return c, err
}

func (r reads) ListControls(ctx context.Context, orgID string, f store.ControlFilter) ([]store.Control, int, error) {
	archived := 0
	if f.Archived {
		archived = 1
	}
	total, err := r.count(ctx, "controls", `SELECT COUNT(*) FROM controls WHERE org_id = ? AND archived = ?`, orgID, archived)
	if err != nil {
		return nil, 0, err
	}
	page := `SELECT identifier FROM controls WHERE org_id = ? AND archived = ? ORDER BY identifier` + pageClause(f.Page)
	rows, err := r.rows(ctx, `SELECT identifier, tags FROM (`+page+`) p JOIN controls c USING (identifier)
		WHERE c.org_id = ? ORDER BY identifier`, orgID, archived, orgID)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlstore: list controls: %w", err)
	}
	var out []store.Control
	for rows.Next() {
		c := store.Control{OrgID: orgID, Archived: f.Archived}
		var tags string
		if err := rows.Scan(&c.Identifier, &tags); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("sqlstore: list controls: %w", err)
		}
		if err := json.Unmarshal([]byte(tags), &c.Tags); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("sqlstore: control %s tags: %w", c.Identifier, err)
		}
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sqlstore: list controls: %w", err)
	}
	byID := make(map[string]*store.Control, len(out))
	for i := range out {
		byID[out[i].Identifier] = &out[i]
	}
	// Every version of the page's controls in one query.
	err = r.controlVersions(ctx, byID, `SELECT v.identifier, v.version, v.name, v.description, v.links, v.created_by, v.created_at
		FROM (`+page+`) p JOIN control_versions v ON v.identifier = p.identifier
		WHERE v.org_id = ? ORDER BY v.identifier, v.version`, orgID, archived, orgID)
	return out, total, err
}

// controlVersions appends the versions q answers (identifier first) to the controls of byID.
func (r reads) controlVersions(ctx context.Context, byID map[string]*store.Control, q string, args ...any) error {
	rows, err := r.rows(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("sqlstore: control versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v store.ControlVersion
		var links sql.NullString
		if err := rows.Scan(&id, &v.Version, &v.Name, &v.Description, &links, &v.CreatedBy, &v.CreatedAt); err != nil {
			return fmt.Errorf("sqlstore: control versions: %w", err)
		}
		if links.Valid {
			if err := json.Unmarshal([]byte(links.String), &v.Links); err != nil {
				return fmt.Errorf("sqlstore: control %s links: %w", id, err)
			}
		}
		if c := byID[id]; c != nil {
			c.Versions = append(c.Versions, v)
		}
	}
	return rows.Err()
}

func (t *txn) PutControlVersion(ctx context.Context, orgID, identifier string, v store.ControlVersion) error {
	if v.Version == 1 {
		if _, err := t.exec(ctx, "create control", `INSERT INTO controls (org_id, identifier, archived, tags) VALUES (?, ?, 0, '{}')`,
			orgID, identifier); err != nil {
			return err
		}
	}
	var links sql.NullString
	if len(v.Links) > 0 {
		b, err := json.Marshal(v.Links)
		if err != nil {
			return fmt.Errorf("sqlstore: control %s links: %w", identifier, err)
		}
		links = sql.NullString{String: string(b), Valid: true}
	}
	_, err := t.exec(ctx, "put control version", `INSERT INTO control_versions (org_id, identifier, version, name, description,
		links, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, orgID, identifier, v.Version, v.Name, v.Description, links,
		v.CreatedBy, v.CreatedAt)
	return err
}

func (t *txn) SetControlArchived(ctx context.Context, orgID, identifier string, archived bool) error {
	a := 0
	if archived {
		a = 1
	}
	n, err := t.exec(ctx, "archive control", `UPDATE controls SET archived = ? WHERE org_id = ? AND identifier = ?`, a, orgID, identifier)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: archive control %s: %w", identifier, store.ErrNotFound)
	}
	return err
}

func (t *txn) SetControlTags(ctx context.Context, orgID, identifier string, tags map[string]string) error {
	b, err := json.Marshal(nonNilTags(tags))
	if err != nil {
		return fmt.Errorf("sqlstore: control tags: %w", err)
	}
	n, err := t.exec(ctx, "set control tags", `UPDATE controls SET tags = ? WHERE org_id = ? AND identifier = ?`, string(b), orgID, identifier)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: set control tags %s: %w", identifier, store.ErrNotFound)
	}
	return err
}
