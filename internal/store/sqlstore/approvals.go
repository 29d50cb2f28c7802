package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/veritrail/veritrail/internal/store"
)

const approvalCols = `id, org_id, flow_id, number, state, created_at, doc`

func scanApproval(sc interface{ Scan(...any) error }) (store.Approval, error) {
	var a store.Approval
	var doc string
	err := sc.Scan(&a.ID, &a.OrgID, &a.FlowID, &a.Number, &a.State, &a.CreatedAt, &doc)
	a.Doc = json.RawMessage(doc)
	return a, err
}

func (r reads) Approval(ctx context.Context, flowID string, number int) (store.Approval, error) {
	a, err := scanApproval(r.row(ctx, `SELECT `+approvalCols+` FROM approvals WHERE flow_id = ? AND number = ?`, flowID, number))
	if err != nil {
		return a, notFound(err, fmt.Sprintf("approval %d", number))
	}
	return a, nil
}

func (r reads) ListApprovals(ctx context.Context, flowID string, p store.Page) ([]store.Approval, int, error) {
	total, err := r.count(ctx, "approvals", `SELECT COUNT(*) FROM approvals WHERE flow_id = ?`, flowID)
	if err != nil {
		return nil, 0, err
	}
	rows, err := r.rows(ctx, `SELECT `+approvalCols+` FROM approvals WHERE flow_id = ? ORDER BY number DESC`+pageClause(p), flowID)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlstore: list approvals: %w", err)
	}
	defer rows.Close()
	var out []store.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("sqlstore: list approvals: %w", err)
		}
		out = append(out, a)
	}
	return out, total, rows.Err()
}

// InsertApproval numbers the approval after the flow's last one, in the same statement.
func (t *txn) InsertApproval(ctx context.Context, a store.Approval) (int, error) {
	var n int
	err := t.row(ctx, `INSERT INTO approvals (id, org_id, flow_id, number, state, created_at, doc)
		SELECT ?, ?, ?, COALESCE(MAX(number), 0) + 1, ?, ?, ? FROM approvals WHERE flow_id = ? RETURNING number`,
		a.ID, a.OrgID, a.FlowID, a.State, a.CreatedAt, string(a.Doc), a.FlowID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: insert approval: %w", err)
	}
	return n, nil
}

func (s *Store) Approval(ctx context.Context, flowID string, number int) (store.Approval, error) {
	return s.reader().Approval(ctx, flowID, number)
}

func (s *Store) ListApprovals(ctx context.Context, flowID string, p store.Page) ([]store.Approval, int, error) {
	return s.reader().ListApprovals(ctx, flowID, p)
}
