package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// trailPages keeps, per flow, every anchorEvery-th trail of its list (newest first) with its
// position, so that a deep page of the list starts walking at the nearest anchor before it
// instead of at the head: OFFSET steps through every index entry it skips, and a flow's middle
// page at 1M attestations skipped 2,500 (1.9x its time at 10k on SQLite; on PostgreSQL, 1.5-2.2x).
// Trails are never deleted (Wipe resets this) and their created_at never changes, so an anchor's
// position moves only by the trails inserted after its mark, read with each deep page, which
// also give the flow's total (the page needs no count of its own). The mark is the one the trail
// counts keep (trailCounts): on SQLite the table's last rowid when the anchors were taken (one
// writer inserts rowids in commit order); on PostgreSQL the taking snapshot's xmin, with the
// anchors taken among the trails of transactions below it, which every later snapshot sees
// alike. Once there are more than anchorEvery trails past the mark, the anchors are taken again.
type trailPages struct {
	mu     sync.Mutex
	m      map[trailCountKey]*pageAnchors // flow is never ""
	retake time.Duration                  // retakeAfter; tests set 0
}

// anchorEvery is the distance between anchors: a deep page skips fewer than this many trails
// before its first, beyond those inserted since the anchors were taken.
const anchorEvery = 256

// retakeAfter is how long anchors are kept at least, however many trails were inserted since,
// so that a flow written to fast is walked at most once a second.
const retakeAfter = time.Second

// maxRecent bounds the trails past the mark that a deep page reads; with more, it walks from the
// head.
const maxRecent = 4 * anchorEvery

// sinceLimit is maxRecent+1 as SQL text.
var sinceLimit = strconv.Itoa(maxRecent + 1)

// maxAnchoredFlows bounds the flows kept; past it the map starts again (a re-walk per flow).
const maxAnchoredFlows = 4096

// pageAnchors are one flow's anchors, as of mark.
type pageAnchors struct {
	keys  []trailKey // keys[i] is the trail at position i*anchorEvery among those up to mark
	n     int        // the trails up to mark
	mark  int64      // SQLite: the table's last rowid when they were taken; PostgreSQL: that snapshot's xmin
	taken time.Time
}

// trailKey is a trail's place in a list: created_at descending, then id.
type trailKey struct {
	createdAt float64
	id        string
}

func newTrailPages() *trailPages {
	return &trailPages{m: map[trailCountKey]*pageAnchors{}, retake: retakeAfter}
}

// reset forgets every anchor (the trails were wiped).
func (p *trailPages) reset() {
	p.mu.Lock()
	p.m = map[trailCountKey]*pageAnchors{}
	p.mu.Unlock()
}

// pagePlace is where a deep page starts: walk the list from the anchor, skipping skip trails
// (the anchor's row counts as the first). With it comes the flow's total, which the anchors and
// the trails inserted since tell exactly: the page needs no count of its own.
type pagePlace struct {
	from  trailKey
	skip  int
	total int
}

// seek returns where the flow's list reaches offset. ok is false when the offset is near the
// head (walked as it is) or the flow has no anchor before it.
func (p *trailPages) seek(ctx context.Context, r reads, org, flow string, offset int) (place pagePlace, ok bool, err error) {
	if offset < anchorEvery {
		return pagePlace{}, false, nil
	}
	key := trailCountKey{org, flow}
	p.mu.Lock()
	a := p.m[key]
	p.mu.Unlock()
	var recent []trailKey
	if a != nil {
		if recent, err = p.since(ctx, r, key, a.mark); err != nil {
			return pagePlace{}, false, err
		}
	}
	if a == nil || len(recent) > anchorEvery && time.Since(a.taken) >= p.retake {
		if a, err = p.take(ctx, r, key); err != nil || len(a.keys) == 0 {
			return pagePlace{}, false, err
		}
		if recent, err = p.since(ctx, r, key, a.mark); err != nil {
			return pagePlace{}, false, err
		}
	}
	if len(recent) > maxRecent {
		// The mark stays behind (on PostgreSQL a long transaction anywhere in the cluster holds
		// the xmin back): reading what is past it would cost more than the walk.
		return pagePlace{}, false, nil
	}
	// The anchors' positions now: their own, plus the recent trails before each.
	slices.SortFunc(recent, compareKeys)
	best, bestPos := -1, 0
	for i, k := range a.keys {
		pos := i*anchorEvery + countBefore(recent, k)
		if pos > offset {
			break
		}
		best, bestPos = i, pos
	}
	if best < 0 {
		return pagePlace{}, false, nil
	}
	return pagePlace{from: a.keys[best], skip: offset - bestPos, total: a.n + len(recent)}, true, nil
}

// compareKeys orders keys as the list does.
func compareKeys(a, b trailKey) int {
	if c := cmp.Compare(b.createdAt, a.createdAt); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// countBefore counts the keys of sorted that come before k.
func countBefore(sorted []trailKey, k trailKey) int {
	n, _ := slices.BinarySearchFunc(sorted, k, compareKeys)
	return n
}

// take walks the flow's list (from its index) and keeps every anchorEvery-th trail, with the
// mark, in one statement: the trails read as recent later are those past the mark, in any flow,
// not every trail after the flow's last one.
func (p *trailPages) take(ctx context.Context, r reads, key trailCountKey) (*pageAnchors, error) {
	q := `SELECT created_at, id, (SELECT COALESCE(MAX(rowid), 0) FROM trails) FROM trails
		WHERE flow_id = ? AND org_id = ? ORDER BY created_at DESC, id`
	if r.d.name == postgresDialect.name {
		// The trails of transactions at or past the snapshot's xmin are left to since: some may
		// still commit, and a later snapshot would see them where this one did not.
		q = `WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS h)
			SELECT t.created_at, t.id, s.h FROM trails t, s
			WHERE t.flow_id = ? AND t.org_id = ? AND t.xid < s.h ORDER BY t.created_at DESC, t.id`
	}
	rows, err := r.rows(ctx, q, key.flow, key.org)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: trail page anchors: %w", err)
	}
	defer rows.Close()
	a := &pageAnchors{taken: time.Now()}
	for rows.Next() {
		var k trailKey
		if err := rows.Scan(&k.createdAt, &k.id, &a.mark); err != nil {
			return nil, fmt.Errorf("sqlstore: trail page anchors: %w", err)
		}
		if a.n%anchorEvery == 0 {
			a.keys = append(a.keys, k)
		}
		a.n++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: trail page anchors: %w", err)
	}
	if a.n == 0 {
		return a, nil // a flow with no (settled) trail yet: no row told the mark, nothing to keep
	}
	p.mu.Lock()
	if len(p.m) >= maxAnchoredFlows {
		p.m = map[trailCountKey]*pageAnchors{}
	}
	p.m[key] = a
	p.mu.Unlock()
	return a, nil
}

// since reads the keys of the flow's trails past mark, at most maxRecent+1 of them: on SQLite
// inserted after that rowid (the unary + keeps SQLite on the rowids, as trailCounts' count
// does), on PostgreSQL inserted by a transaction at or after that xmin (the flow's xid index).
func (p *trailPages) since(ctx context.Context, r reads, key trailCountKey, mark int64) ([]trailKey, error) {
	q := `SELECT created_at, id FROM trails WHERE rowid > ? AND +flow_id = ? AND +org_id = ? LIMIT ` + sinceLimit
	args := []any{mark, key.flow, key.org}
	if r.d.name == postgresDialect.name {
		// The mark is behind a subquery, hidden from the planner: given it, PostgreSQL sees that
		// few trails are past it, which a generic plan cannot, so it would plan this statement
		// afresh at every call (a tenth of a millisecond). The LIMIT is written in for the same
		// reason.
		q = `SELECT created_at, id FROM trails WHERE flow_id = ? AND xid >= (SELECT ?::bigint) AND org_id = ? LIMIT ` + sinceLimit
		args = []any{key.flow, mark, key.org}
	}
	rows, err := r.rows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: trails after the page anchors: %w", err)
	}
	defer rows.Close()
	var out []trailKey
	for rows.Next() {
		var k trailKey
		if err := rows.Scan(&k.createdAt, &k.id); err != nil {
			return nil, fmt.Errorf("sqlstore: trails after the page anchors: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}
