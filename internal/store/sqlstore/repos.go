package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/veritrail/veritrail/internal/store"
)

// reposTable is migration 6's table. Identity is (org, provider, external id, name).
const reposTable = `CREATE TABLE IF NOT EXISTS repos (
	id TEXT PRIMARY KEY, org_id TEXT NOT NULL, provider TEXT NOT NULL, external_id TEXT NOT NULL, name TEXT NOT NULL,
	url TEXT NOT NULL, tags TEXT NOT NULL DEFAULT '{}', created_at DOUBLE PRECISION NOT NULL,
	UNIQUE (org_id, provider, external_id, name))`

// addedTables are the tables migrations after version 1 create, which Wipe empties too.
var addedTables = []string{reposTable, webSessionsTable, scopesInFlightTable, runningChangesTable, changeNoticesTable}

const repoColumns = `id, org_id, provider, external_id, name, url, tags, created_at`

func scanRepos(rows interface {
	Next() bool
	Scan(...any) error
}) ([]store.Repo, error) {
	var out []store.Repo
	for rows.Next() {
		var r store.Repo
		var tags string
		if err := rows.Scan(&r.ID, &r.OrgID, &r.Provider, &r.ExternalID, &r.Name, &r.URL, &tags, &r.CreatedAt); err != nil {
			return nil, fmt.Errorf("sqlstore: repos: %w", err)
		}
		if err := json.Unmarshal([]byte(tags), &r.Tags); err != nil {
			return nil, fmt.Errorf("sqlstore: repo %s tags: %w", r.ID, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (r reads) ListRepos(ctx context.Context, orgID string) ([]store.Repo, error) {
	rows, err := r.rows(ctx, `SELECT `+repoColumns+` FROM repos WHERE org_id = ? ORDER BY name, provider, external_id`, orgID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list repos: %w", err)
	}
	defer rows.Close()
	out, err := scanRepos(rows)
	if err != nil {
		return nil, err
	}
	return out, rows.Err()
}

func (r reads) RepoByID(ctx context.Context, orgID, id string) (store.Repo, error) {
	rows, err := r.rows(ctx, `SELECT `+repoColumns+` FROM repos WHERE org_id = ? AND id = ?`, orgID, id)
	if err != nil {
		return store.Repo{}, fmt.Errorf("sqlstore: repo: %w", err)
	}
	defer rows.Close()
	out, err := scanRepos(rows)
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return store.Repo{}, err
	}
	if len(out) == 0 {
		return store.Repo{}, fmt.Errorf("sqlstore: repo %s: %w", id, store.ErrNotFound)
	}
	return out[0], nil
}

func (s *Store) ListRepos(ctx context.Context, orgID string) ([]store.Repo, error) {
	return s.reader().ListRepos(ctx, orgID)
}

func (s *Store) RepoByID(ctx context.Context, orgID, id string) (store.Repo, error) {
	return s.reader().RepoByID(ctx, orgID, id)
}

func (t *txn) EnsureRepo(ctx context.Context, r store.Repo) error {
	_, err := t.exec(ctx, "ensure repo", `INSERT INTO repos (`+repoColumns+`) VALUES (?, ?, ?, ?, ?, ?, '{}', ?)
		ON CONFLICT (org_id, provider, external_id, name) DO NOTHING`, r.ID, r.OrgID, r.Provider, r.ExternalID, r.Name, r.URL, r.CreatedAt)
	return err
}

func (t *txn) SetRepoTags(ctx context.Context, orgID, id string, tags map[string]string) error {
	b, err := json.Marshal(tags)
	if err != nil {
		return fmt.Errorf("sqlstore: repo %s tags: %w", id, err)
	}
	n, err := t.exec(ctx, "set repo tags", `UPDATE repos SET tags = ? WHERE org_id = ? AND id = ?`, string(b), orgID, id)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: repo %s: %w", id, store.ErrNotFound)
	}
	return err
}
