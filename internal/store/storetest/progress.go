package storetest

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

// testPositions: applied bus positions per topic and partition, which never move back.
func testPositions(t *testing.T, e *env) {
	positions := func(topic string, want map[int32]int64) {
		t.Helper()
		got, err := e.s.Positions(e.ctx, topic)
		must(t, "Positions", err)
		if !maps.Equal(got, want) {
			t.Errorf("Positions(%s) = %v, want %v", topic, got, want)
		}
	}
	positions("evidence", map[int32]int64{})
	must(t, "AdvancePositions", e.s.AdvancePositions(e.ctx, "evidence", map[int32]int64{0: 5, 1: 3}))
	must(t, "AdvancePositions", e.s.AdvancePositions(e.ctx, "evidence", nil))
	positions("evidence", map[int32]int64{0: 5, 1: 3})
	// A redelivery after a rebalance reports an older position: it does not move back.
	must(t, "AdvancePositions", e.s.AdvancePositions(e.ctx, "evidence", map[int32]int64{0: 4, 1: 7, 2: 1}))
	must(t, "AdvancePositions", e.s.AdvancePositions(e.ctx, "other", map[int32]int64{0: 9}))
	positions("evidence", map[int32]int64{0: 5, 1: 7, 2: 1})
	positions("other", map[int32]int64{0: 9})
}

// testInFlight: marks of the ingest processes with writes of an organization in flight.
func testInFlight(t *testing.T, e *env) {
	marks := func(org string, want ...store.InFlightMark) {
		t.Helper()
		got, err := e.s.InFlight(e.ctx, org)
		must(t, "InFlight", err)
		slices.SortFunc(got, func(a, b store.InFlightMark) int {
			if a.Process < b.Process {
				return -1
			}
			return 1
		})
		if !slices.Equal(got, want) {
			t.Errorf("InFlight(%s) = %+v, want %+v", org, got, want)
		}
	}
	marks("org-1")
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-1", "p1", 100, nil))
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-1", "p2", 50, nil))
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-2", "p1", 100, nil))
	marks("org-1", store.InFlightMark{OrgID: "org-1", Process: "p1", Until: 100}, store.InFlightMark{OrgID: "org-1", Process: "p2", Until: 50})
	must(t, "RenewInFlight", e.s.RenewInFlight(e.ctx, "p1", 200))
	marks("org-2", store.InFlightMark{OrgID: "org-2", Process: "p1", Until: 200})
	// Only a mark that ran out is cleared as expired.
	must(t, "ClearExpiredInFlight", e.s.ClearExpiredInFlight(e.ctx, "org-1", "p1", 150))
	must(t, "ClearExpiredInFlight", e.s.ClearExpiredInFlight(e.ctx, "org-1", "p2", 150))
	marks("org-1", store.InFlightMark{OrgID: "org-1", Process: "p1", Until: 200})
	must(t, "ClearInFlight", e.s.ClearInFlight(e.ctx, "org-1", "p1"))
	marks("org-1")
	marks("org-2", store.InFlightMark{OrgID: "org-2", Process: "p1", Until: 200})
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-2", "p1", 300, nil)) // marking again moves the lease
	marks("org-2", store.InFlightMark{OrgID: "org-2", Process: "p1", Until: 300})
}

// testInFlightScopes: the scopes recorded under the marks, which go with them.
func testInFlightScopes(t *testing.T, e *env) {
	// holders checks the answer as "process:scope" items, "process:*" for a mark of every scope.
	holders := func(org string, scopes []string, want ...string) {
		t.Helper()
		held, err := e.s.InFlightScopes(e.ctx, org, scopes)
		must(t, "InFlightScopes", err)
		var got []string
		for _, h := range held {
			if h.Every {
				got = append(got, h.Process+":*")
			} else {
				got = append(got, h.Process+":"+h.Scope)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("InFlightScopes(%s, %q) = %q, want %q", org, scopes, got, want)
		}
	}
	holders("org-1", []string{"t1", ""})
	holders("org-1", nil)
	// A mark with no scope (made by a build before scopes) holds every scope.
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-1", "old", 100, nil))
	holders("org-1", []string{"t1"}, "old:*")
	many := make([]string, 200) // asked in parts: the mark of every scope answered once
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	holders("org-1", many, "old:*")
	must(t, "ClearInFlight", e.s.ClearInFlight(e.ctx, "org-1", "old"))
	holders("org-1", []string{"t1"})
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-1", "p1", 100, []string{"t1", "fp1"}))
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-1", "p1", 100, []string{"t1", "t2"})) // t1 again: no error
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-1", "p2", 50, []string{""}))          // a write naming no scope
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-2", "p3", 100, []string{"t1"}))
	holders("org-1", []string{"t1"}, "p1:t1")
	holders("org-1", []string{"fp1", "t9"}, "p1:fp1")
	holders("org-1", []string{"t9"})
	holders("org-1", []string{"t9", ""}, "p2:")
	holders("org-1", []string{"t1", "t2", ""}, "p1:t1", "p1:t2", "p2:")
	holders("org-2", []string{"t1", "t1"}, "p3:t1")
	// Scopes cleared under a mark that stays; the mark's other scopes stay.
	must(t, "ClearScopesInFlight", e.s.ClearScopesInFlight(e.ctx, "org-1", "p1", []string{"t1", "fp1"}))
	holders("org-1", []string{"t1", "fp1"})
	holders("org-1", []string{"t2"}, "p1:t2")
	// A mark cleared, or cleared as expired, takes its scopes with it.
	must(t, "ClearExpiredInFlight", e.s.ClearExpiredInFlight(e.ctx, "org-1", "p1", 50)) // not expired
	holders("org-1", []string{"t2"}, "p1:t2")
	must(t, "ClearExpiredInFlight", e.s.ClearExpiredInFlight(e.ctx, "org-1", "p2", 60))
	holders("org-1", []string{""})
	must(t, "ClearInFlight", e.s.ClearInFlight(e.ctx, "org-1", "p1"))
	holders("org-1", []string{"t1", "t2", "fp1", ""})
	holders("org-2", []string{"t1"}, "p3:t1")
}
