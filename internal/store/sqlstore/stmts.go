package sqlstore

import (
	"context"
	"database/sql"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
)

// maxStatements bounds the prepared statements kept per pool. Queries past it run unprepared;
// nothing is ever evicted, so a statement is never closed while another goroutine uses it.
const maxStatements = 512

// stmtCache keeps one prepared statement per query text: without it SQLite parses and plans
// every query again (measured at 16% of the CPU of an ingest load).
type stmtCache struct {
	db      *sql.DB
	mu      sync.RWMutex
	m       map[string]*sql.Stmt
	pending map[string]struct{} // seen inside a transaction, to prepare after it
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}, pending: map[string]struct{}{}}
}

// oneOff marks a query whose text varies with its arguments (IN lists, multi-row VALUES):
// preparing it would fill the cache with variants used once.
const oneOff = "/* one-off */ "

func oneOffIf(b bool) string {
	if b {
		return oneOff
	}
	return ""
}

// preparedChunks calls f with consecutive parts of items, of perRow parameters a row. Up to
// preparedBatch items, each part has a size a prepared statement is kept for: preparedRows while
// that many remain, then the largest power of two that fits. A multi-row statement's text varies
// with its row count, and the evaluator's batches come in every size: cut this way a statement
// has at most seven variants, prepared once and reused, where one variant per size filled the
// cache (maxStatements) and left the rest parsed at every call. More items than preparedBatch
// (an import, a large snapshot) go in parts as large as the parameters allow, one-off statements
// (oneOffIf(len(part) > preparedRows)): fewer round trips matter more there than a parse.
func preparedChunks[T any](items []T, perRow int, f func(part []T) error) error {
	if len(items) > preparedBatch {
		return inChunks(items, perRow, f)
	}
	return preparedParts(items, perRow, f)
}

// preparedParts is preparedChunks however many items.
func preparedParts[T any](items []T, perRow int, f func(part []T) error) error {
	most := min(preparedRows, rowsPer(perRow))
	for start := 0; start < len(items); {
		n := min(most, len(items)-start)
		if n < most {
			n = 1 << (bits.Len(uint(n)) - 1)
		}
		if err := f(items[start : start+n]); err != nil {
			return err
		}
		start += n
	}
	return nil
}

// preparedBatch is the most items preparedChunks cuts into prepared statements: the evaluator's
// largest batch.
const preparedBatch = 256

// cut calls f with consecutive parts of items, of perRow parameters a row, cut for d, and says
// whether the part's statement is worth preparing (else it is one-off). On SQLite a statement
// costs no round trip, while parsing one costs about as much as running it: the parts have the
// sizes preparedChunks keeps prepared, however many items. On PostgreSQL each statement is a
// round trip: the parts are as large as the parameters allow, and only a one-row statement is
// prepared.
func cut[T any](d dialect, items []T, perRow int, f func(part []T, prepared bool) error) error {
	if d.name == postgresDialect.name {
		return inChunks(items, perRow, func(part []T) error { return f(part, len(part) == 1) })
	}
	return preparedParts(items, perRow, func(part []T) error { return f(part, true) })
}

// get returns the prepared statement of q, or nil when the cache is full, q is one-off, or q is new and we
// are inside a transaction: preparing then would need a second connection, and SQLite's
// writer pool has one, held by that transaction. Such queries are prepared after it ends.
func (c *stmtCache) get(ctx context.Context, q string, inTx bool) (*sql.Stmt, error) {
	if strings.HasPrefix(q, oneOff) {
		return nil, nil
	}
	c.mu.RLock()
	st, ok := c.m[q]
	n := len(c.m)
	c.mu.RUnlock()
	if ok || n >= maxStatements {
		return st, nil
	}
	if inTx {
		c.mu.Lock()
		c.pending[q] = struct{}{}
		c.mu.Unlock()
		return nil, nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[q]; ok { // prepared concurrently
		st.Close()
		return prev, nil
	}
	c.m[q] = st
	return st, nil
}

// preparePending prepares the queries first seen inside transactions. Failures only mean the
// query stays unprepared.
func (c *stmtCache) preparePending(ctx context.Context) {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	qs := make([]string, 0, len(c.pending))
	for q := range c.pending {
		qs = append(qs, q)
	}
	c.pending = map[string]struct{}{}
	c.mu.Unlock()
	for _, q := range qs {
		_, _ = c.get(ctx, q, false)
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// querier runs a query through the statement cache, inside tx when one is given.
type querier struct {
	stmts *stmtCache
	tx    *sql.Tx
	count *atomic.Int64 // statements sent: the store's round trips
}

func (q querier) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	st, err := q.stmts.get(ctx, query, q.tx != nil)
	if err != nil || st == nil {
		return nil, err
	}
	if q.tx != nil {
		return q.tx.StmtContext(ctx, st), nil
	}
	return st, nil
}

func (q querier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	q.count.Add(1)
	st, err := q.stmt(ctx, query)
	switch {
	case err != nil:
		return nil, err
	case st != nil:
		return st.ExecContext(ctx, args...)
	case q.tx != nil:
		return q.tx.ExecContext(ctx, query, args...)
	}
	return q.stmts.db.ExecContext(ctx, query, args...)
}

func (q querier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	q.count.Add(1)
	st, err := q.stmt(ctx, query)
	switch {
	case err != nil:
		return nil, err
	case st != nil:
		return st.QueryContext(ctx, args...)
	case q.tx != nil:
		return q.tx.QueryContext(ctx, query, args...)
	}
	return q.stmts.db.QueryContext(ctx, query, args...)
}

// queryRow is QueryRowContext; a preparation error surfaces from Scan like any query error.
func (q querier) queryRow(ctx context.Context, query string, args ...any) rowScanner {
	q.count.Add(1)
	st, err := q.stmt(ctx, query)
	switch {
	case err != nil:
		return errRow{err}
	case st != nil:
		return st.QueryRowContext(ctx, args...)
	case q.tx != nil:
		return q.tx.QueryRowContext(ctx, query, args...)
	}
	return q.stmts.db.QueryRowContext(ctx, query, args...)
}

type rowScanner interface{ Scan(...any) error }

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }
