package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

const ruleCols = `id, org_id, number, name, environments, triggers, targets, created_by, created_at, last_modified_at`

// ruleTarget is a target as stored (inside the targets JSON column).
type ruleTarget struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	URL     string            `json:"url,omitempty"`
	Secret  string            `json:"secret,omitempty"`
	Emails  []string          `json:"emails,omitempty"`
	Plugin  string            `json:"plugin,omitempty"`
	Context map[string]string `json:"context,omitempty"`
}

func scanRule(sc interface{ Scan(...any) error }) (store.NotificationRule, error) {
	var r store.NotificationRule
	var envs, triggers, targets string
	if err := sc.Scan(&r.ID, &r.OrgID, &r.Number, &r.Name, &envs, &triggers, &targets, &r.CreatedBy, &r.CreatedAt,
		&r.LastModifiedAt); err != nil {
		return r, err
	}
	var stored []ruleTarget
	for _, c := range []struct {
		col string
		v   any
	}{{envs, &r.Environments}, {triggers, &r.Triggers}, {targets, &stored}} {
		if err := json.Unmarshal([]byte(c.col), c.v); err != nil {
			return r, fmt.Errorf("notification rule %d: %w", r.Number, err)
		}
	}
	r.Targets = make([]store.NotificationTarget, len(stored))
	for i, t := range stored {
		r.Targets[i] = store.NotificationTarget(t)
	}
	return r, nil
}

func ruleArgs(r store.NotificationRule) (envs, triggers, targets string, err error) {
	stored := make([]ruleTarget, len(r.Targets))
	for i, t := range r.Targets {
		stored[i] = ruleTarget(t)
	}
	var b [3][]byte
	for i, v := range []any{nonNilStrings(r.Environments), nonNilStrings(r.Triggers), stored} {
		if b[i], err = json.Marshal(v); err != nil {
			return "", "", "", fmt.Errorf("sqlstore: encode notification rule: %w", err)
		}
	}
	return string(b[0]), string(b[1]), string(b[2]), nil
}

func (r reads) NotificationRules(ctx context.Context, orgID string) ([]store.NotificationRule, error) {
	rows, err := r.rows(ctx, `SELECT `+ruleCols+` FROM notification_rules WHERE org_id = ? AND deleted = 0 ORDER BY number`, orgID)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: notification rules: %w", err)
	}
	defer rows.Close()
	var out []store.NotificationRule
	for rows.Next() {
		rule, err := scanRule(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: notification rules: %w", err)
		}
		out = append(out, rule)
	}
	return out, rows.Err()
}

func (r reads) NotificationRule(ctx context.Context, orgID string, number int64) (store.NotificationRule, error) {
	rule, err := scanRule(r.row(ctx, `SELECT `+ruleCols+` FROM notification_rules WHERE org_id = ? AND number = ? AND deleted = 0`,
		orgID, number))
	if err != nil {
		return rule, notFound(err, fmt.Sprintf("notification rule %d", number))
	}
	return rule, nil
}

func (r reads) NotificationRuleByID(ctx context.Context, orgID, id string) (store.NotificationRule, error) {
	rule, err := scanRule(r.row(ctx, `SELECT `+ruleCols+` FROM notification_rules WHERE org_id = ? AND id = ? AND deleted = 0`,
		orgID, id))
	if err != nil {
		return rule, notFound(err, "notification rule "+id)
	}
	return rule, nil
}

// InsertNotificationRule numbers the rule after the organization's last one, deleted ones
// included, in the same statement.
func (t *txn) InsertNotificationRule(ctx context.Context, r store.NotificationRule) (int64, error) {
	envs, triggers, targets, err := ruleArgs(r)
	if err != nil {
		return 0, err
	}
	var n int64
	err = t.row(ctx, `INSERT INTO notification_rules (id, org_id, number, name, environments, triggers, targets, created_by,
		created_at, last_modified_at) SELECT ?, ?, COALESCE(MAX(number), 0) + 1, ?, ?, ?, ?, ?, ?, ? FROM notification_rules
		WHERE org_id = ? RETURNING number`,
		r.ID, r.OrgID, r.Name, envs, triggers, targets, r.CreatedBy, r.CreatedAt, r.LastModifiedAt, r.OrgID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: insert notification rule: %w", err)
	}
	return n, nil
}

func (t *txn) UpdateNotificationRule(ctx context.Context, r store.NotificationRule) error {
	envs, triggers, targets, err := ruleArgs(r)
	if err != nil {
		return err
	}
	n, err := t.exec(ctx, "update notification rule", `UPDATE notification_rules SET name = ?, environments = ?, triggers = ?,
		targets = ?, last_modified_at = ? WHERE org_id = ? AND number = ? AND deleted = 0`,
		r.Name, envs, triggers, targets, r.LastModifiedAt, r.OrgID, r.Number)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: update notification rule %d: %w", r.Number, store.ErrNotFound)
	}
	return err
}

// DeleteNotificationRule keeps the row, marked deleted, so that its number is never given again.
func (t *txn) DeleteNotificationRule(ctx context.Context, orgID string, number int64, at float64) error {
	n, err := t.exec(ctx, "delete notification rule", `UPDATE notification_rules SET deleted = 1, last_modified_at = ?
		WHERE org_id = ? AND number = ? AND deleted = 0`, at, orgID, number)
	if err == nil && n == 0 {
		return fmt.Errorf("sqlstore: delete notification rule %d: %w", number, store.ErrNotFound)
	}
	return err
}

// EnqueueTriggers adds triggers to the outbox. A trigger already there (the same change applied
// again) is left as it is.
func (t *txn) EnqueueTriggers(ctx context.Context, triggers []store.Trigger) error {
	for start, n := 0, rowsPer(6); start < len(triggers); start += n {
		part := triggers[start:min(start+n, len(triggers))]
		args := make([]any, 0, 6*len(part))
		for _, tr := range part {
			md, err := triggerMetadata(tr.Metadata)
			if err != nil {
				return err
			}
			args = append(args, tr.ID, tr.OrgID, tr.EnvID, tr.At, string(tr.Payload), md)
		}
		if _, err := t.exec(ctx, "enqueue triggers", `/* one-off */ INSERT INTO trigger_outbox (id, org_id, env_id, at, payload, metadata)
			VALUES `+rowsOf(len(part), 6)+` ON CONFLICT (id) DO NOTHING`, args...); err != nil {
			return err
		}
	}
	return nil
}

// enqueueComplianceChange enqueues e's compliance trigger when e.State is decided and differs
// from the stored state. One statement: the insert happens only if the stored row still holds
// another state, so it must run before the row is updated.
func (t *txn) enqueueComplianceChange(ctx context.Context, e store.Environment) error {
	if e.State == nil {
		return nil
	}
	tr := &contract.Trigger{ID: uuid.NewString(), OrgID: e.OrgID, EnvID: e.ID, Trigger: contract.TriggerNonCompliantEnv,
		At:          float64(time.Now().UnixMicro()) / 1e6,
		Description: e.Name + " is not compliant",
		Environment: contract.TriggerEnvironment{Name: e.Name, Type: e.Type, Compliant: e.State}}
	if *e.State {
		tr.Trigger, tr.Description = contract.TriggerCompliantEnv, e.Name+" is compliant"
	}
	payload, err := contract.MarshalTrigger(tr)
	if err != nil {
		return fmt.Errorf("sqlstore: %w", err)
	}
	_, err = t.exec(ctx, "enqueue compliance trigger", `INSERT INTO trigger_outbox (id, org_id, env_id, at, payload)
		SELECT ?, ?, ?, CAST(? AS DOUBLE PRECISION), ? WHERE EXISTS (SELECT 1 FROM environments
		WHERE org_id = ? AND id = ? AND (state IS NULL OR state <> ?))`,
		tr.ID, tr.OrgID, tr.EnvID, tr.At, string(payload), e.OrgID, e.ID, b2i(*e.State))
	return err
}

// triggerMetadata is the metadata column's value of md: JSON, or NULL for none.
func triggerMetadata(md map[string]string) (any, error) {
	if len(md) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(md)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: trigger metadata: %w", err)
	}
	return string(b), nil
}

const triggerCols = `seq, id, org_id, env_id, at, payload, metadata`

func (r reads) pendingTriggers(ctx context.Context, limit int) ([]store.Trigger, error) {
	rows, err := r.rows(ctx, `SELECT `+triggerCols+` FROM trigger_outbox WHERE sent_at = 0 ORDER BY seq LIMIT `+fmt.Sprint(max(limit, 1)))
	if err != nil {
		return nil, fmt.Errorf("sqlstore: pending triggers: %w", err)
	}
	defer rows.Close()
	var out []store.Trigger
	for rows.Next() {
		var tr store.Trigger
		var payload string
		var md sql.NullString
		if err := rows.Scan(&tr.Seq, &tr.ID, &tr.OrgID, &tr.EnvID, &tr.At, &payload, &md); err != nil {
			return nil, fmt.Errorf("sqlstore: pending triggers: %w", err)
		}
		tr.Payload = json.RawMessage(payload)
		if md.Valid && md.String != "" {
			if err := json.Unmarshal([]byte(md.String), &tr.Metadata); err != nil {
				return nil, fmt.Errorf("sqlstore: trigger %s metadata: %w", tr.ID, err)
			}
		}
		out = append(out, tr)
	}
	return out, rows.Err()
}

func (t *txn) markTriggersSent(ctx context.Context, triggers []store.Trigger) error {
	at := float64(time.Now().UnixMicro()) / 1e6
	for start, n := 0, rowsPer(1)-1; start < len(triggers); start += n {
		part := triggers[start:min(start+n, len(triggers))]
		args := []any{at}
		for _, tr := range part {
			args = append(args, tr.Seq)
		}
		if _, err := t.exec(ctx, "mark triggers sent", `/* one-off */ UPDATE trigger_outbox SET sent_at = ? WHERE seq IN (`+
			placeholders(len(part))+`)`, args...); err != nil {
			return err
		}
	}
	return nil
}

// relayLockKey is the PostgreSQL advisory lock that makes one evaluate process at a time relay
// the outbox, so that the bus receives triggers in outbox order. It is taken with the schema's
// hash as its first key: advisory locks are per database,
// and deployments (or tests) in other schemas of it must not wait for each other's relay.
const relayLockKey int32 = 74657274

// RelayTriggers implements store.TriggerOutbox. On PostgreSQL the pending rows are read,
// published and marked in one transaction holding an advisory lock, which keeps other processes'
// relays out (they get 0) without blocking the evaluator, whose inserts take no such lock. On
// SQLite one process owns the database: the rows are read from the read pool and marked after
// publish, so the single writer connection is not held while the bus works.
func (s *Store) RelayTriggers(ctx context.Context, limit int, publish func(context.Context, []store.Trigger) error) (int, error) {
	if !s.relayMu.TryLock() {
		return 0, nil
	}
	defer s.relayMu.Unlock()
	if s.d.name == postgresDialect.name {
		return s.relayLocked(ctx, limit, publish)
	}
	pending, err := s.reader().pendingTriggers(ctx, limit)
	if err != nil || len(pending) == 0 {
		return 0, err
	}
	if err := publish(ctx, pending); err != nil {
		return 0, err
	}
	err = s.Update(ctx, func(tx store.Tx) error { return tx.(*txn).markTriggersSent(ctx, pending) })
	if err != nil {
		return 0, fmt.Errorf("sqlstore: triggers were published but not marked sent (they will be again): %w", err)
	}
	return len(pending), nil
}

func (s *Store) relayLocked(ctx context.Context, limit int, publish func(context.Context, []store.Trigger) error) (int, error) {
	n := 0
	err := s.Update(ctx, func(stx store.Tx) error {
		tx := stx.(*txn)
		var locked bool
		if err := tx.row(ctx, `SELECT pg_try_advisory_xact_lock(hashtext(current_schema()), ?)`, relayLockKey).Scan(&locked); err != nil {
			return fmt.Errorf("sqlstore: relay lock: %w", err)
		}
		if !locked {
			return nil
		}
		pending, err := tx.pendingTriggers(ctx, limit)
		if err != nil || len(pending) == 0 {
			return err
		}
		if err := publish(ctx, pending); err != nil {
			return err
		}
		n = len(pending)
		return tx.markTriggersSent(ctx, pending)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

func (s *Store) PruneTriggers(ctx context.Context, sentBefore float64) (int64, error) {
	res, err := s.w.ExecContext(ctx, s.d.rebind(`DELETE FROM trigger_outbox WHERE sent_at > 0 AND sent_at < ?`), sentBefore)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: prune triggers: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// Reader methods on the Store delegate to the read pool.

func (s *Store) NotificationRules(ctx context.Context, orgID string) ([]store.NotificationRule, error) {
	return s.reader().NotificationRules(ctx, orgID)
}

func (s *Store) NotificationRule(ctx context.Context, orgID string, number int64) (store.NotificationRule, error) {
	return s.reader().NotificationRule(ctx, orgID, number)
}

func (s *Store) NotificationRuleByID(ctx context.Context, orgID, id string) (store.NotificationRule, error) {
	return s.reader().NotificationRuleByID(ctx, orgID, id)
}
