package storetest

import (
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
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-1", "p1", 100))
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-1", "p2", 50))
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-2", "p1", 100))
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
	must(t, "MarkInFlight", e.s.MarkInFlight(e.ctx, "org-2", "p1", 300)) // marking again moves the lease
	marks("org-2", store.InFlightMark{OrgID: "org-2", Process: "p1", Until: 300})
}
