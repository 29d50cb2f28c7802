package sqlstore

import (
	"context"
	"fmt"
	"sync"
)

// trailCounts keeps, per organization and flow, how many trails a list's total counted and
// the last rowid it counted, so that the next total counts only the trails inserted since:
// COUNT(*) over an organization's trails grew with the store (8 ms at 100,000 trails, the
// whole of a list's time). SQLite only, where it is exact: one writer inserts rowids in
// commit order and trails are never deleted (Wipe clears the counts), so every trail with a
// rowid at or below one a snapshot sees is in that snapshot. On PostgreSQL no such order
// exists and the list counts.
type trailCounts struct {
	mu sync.Mutex
	m  map[trailCountKey]trailCountMark
}

type trailCountKey struct{ org, flow string } // flow "" counts every flow

type trailCountMark struct {
	n     int
	rowid int64
}

func newTrailCounts() *trailCounts { return &trailCounts{m: map[trailCountKey]trailCountMark{}} }

// reset forgets every count (the trails were wiped, their rowids start again).
func (c *trailCounts) reset() {
	c.mu.Lock()
	c.m = map[trailCountKey]trailCountMark{}
	c.mu.Unlock()
}

// count is the number of trails of the organization (of flow, when not "") as r's snapshot
// sees them: the kept count plus a count of the rows after its rowid, found by the rowid
// itself (the unary + keeps SQLite from walking the organization's index instead).
func (c *trailCounts) count(ctx context.Context, r reads, orgID, flow string) (int, error) {
	key := trailCountKey{orgID, flow}
	c.mu.Lock()
	mark := c.m[key]
	c.mu.Unlock()
	// The first count walks the organization's (or flow's) index, which holds the rowids too.
	q := `SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM trails WHERE org_id = ?`
	args := []any{orgID}
	if flow != "" {
		q += ` AND flow_id = ?`
		args = append(args, flow)
	}
	if mark.rowid > 0 {
		q = `SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM trails WHERE rowid > ? AND +org_id = ?`
		args = []any{mark.rowid, orgID}
		if flow != "" {
			q += ` AND +flow_id = ?`
			args = append(args, flow)
		}
	}
	var n int
	var last int64
	if err := r.row(ctx, q, args...).Scan(&n, &last); err != nil {
		return 0, fmt.Errorf("sqlstore: count trails: %w", err)
	}
	total := mark.n + n
	if n > 0 {
		c.mu.Lock()
		// A reader on an older snapshot counted fewer rows up to a lower rowid: keep the newest.
		if cur := c.m[key]; last > cur.rowid {
			c.m[key] = trailCountMark{n: total, rowid: last}
		}
		c.mu.Unlock()
	}
	return total, nil
}
