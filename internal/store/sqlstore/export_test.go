package sqlstore

import (
	"context"
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
