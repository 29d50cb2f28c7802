package sqlstore

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	"github.com/veritrail/veritrail/internal/store"
)

// --- keys

// A service account's keys take the account's organization, name and privilege as they are
// now; the key row keeps the values of its creation for keys whose account was deleted.
const keyCols = `k.id, k.hash, COALESCE(sa.org_id, k.org_id), k.user_id, k.service_account_id, COALESCE(sa.name, k.name),
	k.description, COALESCE(sa.privilege, k.role), k.created_at, k.expires_at, k.revoked`

const keyFrom = ` FROM api_keys k LEFT JOIN service_accounts sa ON sa.id = k.service_account_id `

func scanKey(sc rowScanner) (store.APIKey, error) {
	var k store.APIKey
	var role string
	var revoked int
	err := sc.Scan(&k.ID, &k.Hash, &k.OrgID, &k.UserID, &k.ServiceAccountID, &k.Name, &k.Description, &role,
		&k.CreatedAt, &k.ExpiresAt, &revoked)
	k.Role, k.Revoked = store.Role(role), revoked != 0
	return k, err
}

func (r reads) KeyByHash(ctx context.Context, hash []byte) (store.APIKey, error) {
	k, err := scanKey(r.row(ctx, `SELECT `+keyCols+keyFrom+`WHERE k.hash = ?`, hash))
	if err != nil {
		return k, notFound(err, "api key")
	}
	return k, nil
}

func (r reads) KeyByID(ctx context.Context, id string) (store.APIKey, error) {
	k, err := scanKey(r.row(ctx, `SELECT `+keyCols+keyFrom+`WHERE k.id = ?`, id))
	if err != nil {
		return k, notFound(err, "api key "+id)
	}
	return k, nil
}

func (r reads) ServiceAccountKeys(ctx context.Context, serviceAccountID string) ([]store.APIKey, error) {
	rows, err := r.rows(ctx, `SELECT `+keyCols+keyFrom+`WHERE k.service_account_id = ? AND k.revoked = 0
		ORDER BY k.created_at, k.id`, serviceAccountID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: service account keys: %w", err)
	}
	defer rows.Close()
	var out []store.APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: service account keys: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

const insertKey = `INSERT INTO api_keys (id, hash, org_id, user_id, service_account_id, name, description, role, created_at,
	expires_at, revoked) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

func keyArgs(k store.APIKey) []any {
	return []any{k.ID, k.Hash, k.OrgID, k.UserID, k.ServiceAccountID, k.Name, k.Description, string(k.Role), k.CreatedAt,
		k.ExpiresAt, b2i(k.Revoked)}
}

func (s *Store) CreateKey(ctx context.Context, k store.APIKey) error {
	return s.exec(ctx, "create key", insertKey, keyArgs(k)...)
}

func (t *txn) CreateKey(ctx context.Context, k store.APIKey) error {
	_, err := t.exec(ctx, "create key", insertKey, keyArgs(k)...)
	return err
}

func (t *txn) SetDefaultOrg(ctx context.Context, userID, orgID string) error {
	n, err := t.exec(ctx, "set default organization", `UPDATE users SET default_org_id = ? WHERE id = ?`, orgID, userID)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: set default organization of user %s: %w", userID, store.ErrNotFound)
	}
	return err
}

func (t *txn) RevokeKey(ctx context.Context, id string) error {
	n, err := t.exec(ctx, "revoke key", `UPDATE api_keys SET revoked = 1 WHERE id = ? AND revoked = 0`, id)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: revoke key %s: %w", id, store.ErrNotFound)
	}
	return err
}

func (t *txn) ExpireKeyBy(ctx context.Context, id string, at float64) error {
	live, err := t.count(ctx, "live key", `SELECT COUNT(*) FROM api_keys WHERE id = ? AND revoked = 0`, id)
	if err != nil {
		return err
	}
	if live == 0 {
		return fmt.Errorf("sqlstore: expire key %s: %w", id, store.ErrNotFound)
	}
	_, err = t.exec(ctx, "expire key", `UPDATE api_keys SET expires_at = ? WHERE id = ? AND (expires_at = 0 OR expires_at > ?)`,
		at, id, at)
	return err
}

// --- service accounts

const saCols = `id, org_id, name, description, privilege, created_by, created_at, last_modified_at`

func scanServiceAccount(sc rowScanner) (store.ServiceAccount, error) {
	var sa store.ServiceAccount
	var priv string
	err := sc.Scan(&sa.ID, &sa.OrgID, &sa.Name, &sa.Description, &priv, &sa.CreatedBy, &sa.CreatedAt, &sa.LastModifiedAt)
	sa.Privilege = store.Role(priv)
	return sa, err
}

func (r reads) ServiceAccountByName(ctx context.Context, orgID, name string) (store.ServiceAccount, error) {
	sa, err := scanServiceAccount(r.row(ctx, `SELECT `+saCols+` FROM service_accounts WHERE org_id = ? AND name = ?`, orgID, name))
	if err != nil {
		return sa, notFound(err, "service account "+name)
	}
	return sa, nil
}

func (r reads) ListServiceAccounts(ctx context.Context, orgID string) ([]store.ServiceAccount, error) {
	rows, err := r.rows(ctx, `SELECT `+saCols+` FROM service_accounts WHERE org_id = ? ORDER BY name`, orgID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: list service accounts: %w", err)
	}
	defer rows.Close()
	var out []store.ServiceAccount
	for rows.Next() {
		sa, err := scanServiceAccount(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: list service accounts: %w", err)
		}
		out = append(out, sa)
	}
	return out, rows.Err()
}

func (t *txn) CreateServiceAccount(ctx context.Context, sa store.ServiceAccount) error {
	_, err := t.exec(ctx, "create service account", `INSERT INTO service_accounts (`+saCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		sa.ID, sa.OrgID, sa.Name, sa.Description, string(sa.Privilege), sa.CreatedBy, sa.CreatedAt, sa.LastModifiedAt)
	return err
}

func (t *txn) UpdateServiceAccount(ctx context.Context, sa store.ServiceAccount) error {
	n, err := t.exec(ctx, "update service account", `UPDATE service_accounts SET name = ?, description = ?, privilege = ?,
		last_modified_at = ? WHERE org_id = ? AND id = ?`,
		sa.Name, sa.Description, string(sa.Privilege), sa.LastModifiedAt, sa.OrgID, sa.ID)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: update service account %s: %w", sa.ID, store.ErrNotFound)
	}
	return err
}

func (t *txn) DeleteServiceAccount(ctx context.Context, orgID, id string) error {
	n, err := t.exec(ctx, "delete service account", `DELETE FROM service_accounts WHERE org_id = ? AND id = ?`, orgID, id)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: delete service account %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return err
	}
	_, err = t.exec(ctx, "revoke service account keys", `UPDATE api_keys SET revoked = 1 WHERE service_account_id = ?`, id)
	return err
}

// UpdateIdentities runs fn in one transaction of the write pool.
func (s *Store) UpdateIdentities(ctx context.Context, fn func(store.IdentityTx) error) error {
	return s.Update(ctx, func(tx store.Tx) error { return fn(tx.(*txn)) })
}

// --- audit

const auditCols = `id, org_id, key_id, actor, operation, target, outcome, at`

func (t *txn) InsertAudit(ctx context.Context, a store.AuditRecord) error {
	_, err := t.exec(ctx, "insert audit record", `INSERT INTO audit_log (`+auditCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`, a.ID, a.OrgID, a.KeyID, a.Actor, a.Operation, a.Target, a.Outcome, a.At)
	return err
}

func (t *txn) InsertAudits(ctx context.Context, rs []store.AuditRecord) error {
	return preparedChunks(rs, 8, func(part []store.AuditRecord) error {
		args := make([]any, 0, 8*len(part))
		for _, a := range part {
			args = append(args, a.ID, a.OrgID, a.KeyID, a.Actor, a.Operation, a.Target, a.Outcome, a.At)
		}
		q := oneOffIf(len(part) > preparedRows) + `INSERT INTO audit_log (` + auditCols + `) VALUES ` + rowsOf(len(part), 8) +
			` ON CONFLICT (id) DO NOTHING`
		_, err := t.exec(ctx, "insert audit records", q, args...)
		return err
	})
}

func (r reads) ListAudit(ctx context.Context, orgID string, f store.AuditFilter) ([]store.AuditRecord, int, error) {
	where, args := ` WHERE org_id = ?`, []any{orgID}
	if f.KeyID != "" {
		where, args = where+` AND key_id = ?`, append(args, f.KeyID)
	}
	total, err := r.count(ctx, "audit records", `SELECT COUNT(*) FROM audit_log`+where, args...)
	if err != nil {
		return nil, 0, err
	}
	rows, err := r.rows(ctx, `SELECT `+auditCols+` FROM audit_log`+where+` ORDER BY at DESC, seq DESC`+pageClause(f.Page), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlstore: list audit: %w", err)
	}
	defer rows.Close()
	var out []store.AuditRecord
	for rows.Next() {
		var a store.AuditRecord
		if err := rows.Scan(&a.ID, &a.OrgID, &a.KeyID, &a.Actor, &a.Operation, &a.Target, &a.Outcome, &a.At); err != nil {
			return nil, 0, fmt.Errorf("sqlstore: list audit: %w", err)
		}
		out = append(out, a)
	}
	return out, total, rows.Err()
}

// --- admin

// execOne runs a statement that must change one row; none is ErrNotFound.
func (s *Store) execOne(ctx context.Context, what, q string, args ...any) error {
	res, err := s.w.ExecContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("sqlstore: %s: %w", what, store.ErrNotFound)
	}
	return nil
}

func (s *Store) SetOrgPublic(ctx context.Context, orgID string, public bool) error {
	return s.execOne(ctx, "set org public", `UPDATE orgs SET public = ? WHERE id = ?`, b2i(public), orgID)
}

func (s *Store) SetUserDisplayName(ctx context.Context, userID, displayName string) error {
	return s.execOne(ctx, "set user display name", `UPDATE users SET display_name = ? WHERE id = ?`, displayName, userID)
}

var createTableRE = regexp.MustCompile(`^CREATE TABLE IF NOT EXISTS (\w+)`)

// Wipe empties every table of the schema in one transaction. The tables are read from the
// schema itself, so a table added later is wiped too.
func (s *Store) Wipe(ctx context.Context) error {
	defer s.trailCounts.reset() // after the delete: a count between would keep the old rows
	defer s.trailPages.reset()
	return s.Update(ctx, func(tx store.Tx) error {
		t := tx.(*txn)
		for _, stmt := range slices.Concat(schemaStatements, policyStatements, addedTables) {
			m := createTableRE.FindStringSubmatch(stmt)
			if m == nil {
				continue
			}
			if _, err := t.exec(ctx, "wipe "+m[1], `DELETE FROM `+m[1]); err != nil {
				return err
			}
		}
		return nil
	})
}

// Identity reads of the Store use the read pool.

func (s *Store) ServiceAccountByName(ctx context.Context, orgID, name string) (store.ServiceAccount, error) {
	return s.reader().ServiceAccountByName(ctx, orgID, name)
}

func (s *Store) ListServiceAccounts(ctx context.Context, orgID string) ([]store.ServiceAccount, error) {
	return s.reader().ListServiceAccounts(ctx, orgID)
}

func (s *Store) ServiceAccountKeys(ctx context.Context, serviceAccountID string) ([]store.APIKey, error) {
	return s.reader().ServiceAccountKeys(ctx, serviceAccountID)
}

func (s *Store) KeyByID(ctx context.Context, id string) (store.APIKey, error) {
	return s.reader().KeyByID(ctx, id)
}

func (s *Store) ListAudit(ctx context.Context, orgID string, f store.AuditFilter) ([]store.AuditRecord, int, error) {
	return s.reader().ListAudit(ctx, orgID, f)
}
