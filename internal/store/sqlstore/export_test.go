package sqlstore

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
)

// RetakePageAnchorsAtOnce makes s take a flow's page anchors again as soon as more trails were
// inserted since than anchorEvery, so that the store tests walk that path too.
func RetakePageAnchorsAtOnce(s *Store) {
	s.trailPages.retake = 0
}

// PageAnchored says whether a page of flow's trails that starts at offset starts at a kept
// anchor instead of at the head of the list.
func PageAnchored(t testing.TB, s *Store, org, flow string, offset int) bool {
	t.Helper()
	_, ok, err := s.trailPages.seek(context.Background(), s.reader(), org, flow, offset)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// Setting is a PostgreSQL setting as the store's connections have it (SHOW name).
func Setting(t testing.TB, s *Store, name string) string {
	t.Helper()
	var v string
	if err := s.r.QueryRowContext(context.Background(), "SHOW "+name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// FactsAfterPlan is PostgreSQL's plan of the query TrailAttestationFactsAfter sends for after.
func FactsAfterPlan(t testing.TB, s *Store, after map[string]int64) string {
	t.Helper()
	var args []any
	for _, id := range slices.Sorted(maps.Keys(after)) {
		args = append(args, id, after[id])
	}
	return explain(t, s, s.d.factsAfter(typedRows(len(after), "?", "CAST(? AS BIGINT)")), args...)
}

// TrailsNamedPlan is PostgreSQL's plan of the query TrailIDs sends for names of a flow.
func TrailsNamedPlan(t testing.TB, s *Store, flowID string, names []string) string {
	t.Helper()
	return explain(t, s, s.d.trailsNamed(len(names)), append(anys(names), flowID)...)
}

// VisiblePlan is PostgreSQL's plan of the query Visible sends for ids.
func VisiblePlan(t testing.TB, s *Store, ids []string) string {
	t.Helper()
	return explain(t, s, s.d.visibleAmong(len(ids)), anys(ids)...)
}

// explain is PostgreSQL's generic plan of q, as a prepared statement of the store's has it
// after its first executions (EXPLAIN on one of the store's read connections).
func explain(t testing.TB, s *Store, q string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := s.r.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "RESET plan_cache_mode") //nolint:errcheck // the connection goes back to the pool either way
	rows, err := conn.QueryContext(ctx, "EXPLAIN "+s.d.rebind(q), args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan.String()
}
