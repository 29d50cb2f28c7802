package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/veritrail/veritrail/internal/store"
)

// Rejected messages: the dead letters of the evidence topic (store.RejectedMessage).

const rejectedCols = `seq, id, org_id, kind, partition_key, payload, reason, class, rejected_at, state, requested_at, replayed_at`

func scanRejected(sc rowScanner) (store.RejectedMessage, error) {
	var r store.RejectedMessage
	var class, state string
	err := sc.Scan(&r.Seq, &r.ID, &r.OrgID, &r.Kind, &r.PartitionKey, &r.Payload, &r.Reason, &class, &r.RejectedAt, &state,
		&r.RequestedAt, &r.ReplayedAt)
	r.Class, r.State = store.ErrorClass(class), store.ReplayState(state)
	return r, err
}

func (r reads) ListRejected(ctx context.Context, f store.RejectedFilter) ([]store.RejectedMessage, int, error) {
	var conds []string
	var args []any
	if f.OrgID != "" {
		conds, args = append(conds, `org_id = ?`), append(args, f.OrgID)
	}
	if f.State != "" {
		conds, args = append(conds, `state = ?`), append(args, string(f.State))
	}
	where := ""
	if len(conds) > 0 {
		where = ` WHERE ` + strings.Join(conds, ` AND `)
	}
	total, err := r.count(ctx, "rejected messages", `SELECT COUNT(*) FROM rejected_messages`+where, args...)
	if err != nil {
		return nil, 0, err
	}
	order := ` ORDER BY seq DESC`
	if f.OldestFirst {
		order = ` ORDER BY seq`
	}
	rows, err := r.rows(ctx, `SELECT `+rejectedCols+` FROM rejected_messages`+where+order+pageClause(f.Page), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlstore: list rejected messages: %w", err)
	}
	defer rows.Close()
	var out []store.RejectedMessage
	for rows.Next() {
		m, err := scanRejected(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("sqlstore: list rejected messages: %w", err)
		}
		out = append(out, m)
	}
	return out, total, rows.Err()
}

func (r reads) RejectedMessage(ctx context.Context, orgID, id string) (store.RejectedMessage, error) {
	q, args := `SELECT `+rejectedCols+` FROM rejected_messages WHERE id = ?`, []any{id}
	if orgID != "" {
		q, args = q+` AND org_id = ?`, append(args, orgID)
	}
	m, err := scanRejected(r.row(ctx, q, args...))
	if err != nil {
		return m, notFound(err, "rejected message "+id)
	}
	return m, nil
}

func (t *txn) InsertRejected(ctx context.Context, m store.RejectedMessage) error {
	_, err := t.exec(ctx, "insert rejected message", `INSERT INTO rejected_messages (id, org_id, kind, partition_key, payload,
		reason, class, rejected_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		m.ID, m.OrgID, m.Kind, m.PartitionKey, m.Payload, m.Reason, string(m.Class), m.RejectedAt, string(store.StateRejected))
	return err
}

// ClaimReplay's UPDATE is what serialises evaluators: on PostgreSQL the second one waits for
// the first's row lock, then finds the state changed and updates nothing.
func (t *txn) ClaimReplay(ctx context.Context, id string, at float64) (bool, error) {
	n, err := t.exec(ctx, "claim replay", `UPDATE rejected_messages SET state = ?, replayed_at = ? WHERE id = ? AND state = ?`,
		string(store.StateReplayed), at, id, string(store.StateReplayRequested))
	if err != nil || n == 0 {
		return false, err
	}
	_, err = t.exec(ctx, "audit replay", `UPDATE audit_log SET outcome = ? WHERE id = ? AND outcome = ?`,
		store.AuditApplied, id, store.AuditRejected)
	return err == nil, err
}

func (t *txn) RejectAgain(ctx context.Context, id, reason string, class store.ErrorClass, at float64) error {
	_, err := t.exec(ctx, "reject again", `UPDATE rejected_messages SET state = ?, reason = ?, class = ?, rejected_at = ?
		WHERE id = ? AND state = ?`, string(store.StateRejected), reason, string(class), at, id, string(store.StateReplayRequested))
	return err
}

func (t *txn) RequestReplay(ctx context.Context, orgID, id string, at float64) (store.RejectedMessage, error) {
	q, args := `UPDATE rejected_messages SET state = ?, requested_at = ? WHERE id = ? AND state <> ?`,
		[]any{string(store.StateReplayRequested), at, id, string(store.StateReplayed)}
	if orgID != "" {
		q, args = q+` AND org_id = ?`, append(args, orgID)
	}
	if _, err := t.exec(ctx, "request replay", q, args...); err != nil {
		return store.RejectedMessage{}, err
	}
	return t.RejectedMessage(ctx, orgID, id)
}

func (t *txn) RequestReplays(ctx context.Context, orgID string, at float64) (int, error) {
	q, args := `UPDATE rejected_messages SET state = ?, requested_at = ? WHERE state = ?`,
		[]any{string(store.StateReplayRequested), at, string(store.StateRejected)}
	if orgID != "" {
		q, args = q+` AND org_id = ?`, append(args, orgID)
	}
	n, err := t.exec(ctx, "request replays", q, args...)
	return int(n), err
}

// Reads of the Store use the read pool.

func (s *Store) ListRejected(ctx context.Context, f store.RejectedFilter) ([]store.RejectedMessage, int, error) {
	return s.reader().ListRejected(ctx, f)
}

func (s *Store) RejectedMessage(ctx context.Context, orgID, id string) (store.RejectedMessage, error) {
	return s.reader().RejectedMessage(ctx, orgID, id)
}
