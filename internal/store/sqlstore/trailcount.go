package sqlstore

import (
	"context"
	"fmt"
	"sync"
)

// trailCounts keeps, per organization and flow, how many trails a list's total counted and
// up to where, so that the next total counts only the trails inserted since: COUNT(*) over an
// organization's trails grew with the store (8 ms at 100,000 trails on SQLite, the whole of a
// list's time). Exact because trails are never deleted (Wipe clears the counts) and the mark
// is one no later snapshot can see a new trail below: on SQLite the table's last rowid then (one
// writer inserts rowids in commit order), on PostgreSQL the snapshot's xmin over the trails'
// inserting transactions (countPostgres).
type trailCounts struct {
	mu sync.Mutex
	m  map[trailCountKey]trailCountMark
}

type trailCountKey struct{ org, flow string } // flow "" counts every flow

type trailCountMark struct {
	n     int
	rowid int64 // SQLite: the last rowid counted; PostgreSQL: the xmin counted below
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
	if r.d.name == postgresDialect.name {
		return c.countPostgres(ctx, r, key, mark)
	}
	// The first count walks the organization's (or flow's) index. The mark is the table's last
	// rowid, read in the same statement: a later count walks only the rows inserted since, not
	// every row after the flow's last trail (a quiet flow's in a busy store).
	const last = `(SELECT COALESCE(MAX(rowid), 0) FROM trails)`
	q := `SELECT COUNT(*), ` + last + ` FROM trails WHERE org_id = ?`
	args := []any{orgID}
	if flow != "" {
		q += ` AND flow_id = ?`
		args = append(args, flow)
	}
	if mark.rowid > 0 {
		q = `SELECT COUNT(*), ` + last + ` FROM trails WHERE rowid > ? AND +org_id = ?`
		args = []any{mark.rowid, orgID}
		if flow != "" {
			q += ` AND +flow_id = ?`
			args = append(args, flow)
		}
	}
	var n int
	var upTo int64
	if err := r.row(ctx, q, args...).Scan(&n, &upTo); err != nil {
		return 0, fmt.Errorf("sqlstore: count trails: %w", err)
	}
	total := mark.n + n
	if upTo > mark.rowid {
		c.mu.Lock()
		// A reader on an older snapshot counted fewer rows up to a lower rowid: keep the newest.
		if cur := c.m[key]; upTo > cur.rowid {
			c.m[key] = trailCountMark{n: total, rowid: upTo}
		}
		c.mu.Unlock()
	}
	return total, nil
}

// countPostgres is count on PostgreSQL, where the mark is a transaction ID instead of a rowid:
// every transaction below the snapshot's xmin has ended, so the trails they inserted that this
// snapshot sees are seen by every later one and their count can be kept; the trails of later
// transactions are counted afresh each time, from the organization's xid index (migration 10)
// or the flow's (migration 11). The mark starts at 0, which the trails of builds before
// migration 10 carry.
func (c *trailCounts) countPostgres(ctx context.Context, r reads, key trailCountKey, mark trailCountMark) (int, error) {
	filter, args := `org_id = ?`, []any{key.org}
	if key.flow != "" {
		filter, args = `flow_id = ? AND org_id = ?`, []any{key.flow, key.org}
	}
	q := `WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS h)
		SELECT (SELECT COUNT(*) FROM trails WHERE ` + filter + ` AND xid >= ? AND xid < s.h),
			(SELECT COUNT(*) FROM trails WHERE ` + filter + ` AND xid >= s.h), s.h FROM s`
	args = append(append(args, mark.rowid), args...)
	var settled, recent int
	var h int64
	if err := r.row(ctx, q, args...).Scan(&settled, &recent, &h); err != nil {
		return 0, fmt.Errorf("sqlstore: count trails: %w", err)
	}
	if h > mark.rowid {
		c.mu.Lock()
		if cur := c.m[key]; h > cur.rowid {
			c.m[key] = trailCountMark{n: mark.n + settled, rowid: h}
		}
		c.mu.Unlock()
	}
	return mark.n + settled + recent, nil
}
