package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

// testTrailPages: every page of a flow's trails, deep ones included (which the store may start
// from a kept place in the list), is the list's slice newest first, ties by ID, also after
// trails were inserted at its head, in its middle, and in numbers that renew what it keeps.
func testTrailPages(t *testing.T, e *env) {
	o := e.org(t, "org-1", "acme")
	f1, f2 := e.flow(t, o.ID, "f-1", "web"), e.flow(t, o.ID, "f-2", "api")
	rnd := rand.New(rand.NewPCG(7, 11))
	var want []store.Trail // f1's trails
	n := 0
	insert := func(count int, at func(i int) float64) {
		t.Helper()
		e.update(t, func(tx store.Tx) error {
			for i := range count {
				n++
				f := f1
				if n%5 == 0 {
					f = f2
				}
				// IDs unique and in no order of insertion.
				tr := store.Trail{ID: fmt.Sprintf("tr-%08x-%d", rnd.Uint32(), n), OrgID: o.ID, FlowID: f.ID,
					Name: fmt.Sprintf("trail-%d", n), TemplateID: f.TemplateID, CreatedBy: "ci", CreatedAt: at(i),
					LastModifiedAt: at(i), State: "INCOMPLETE"}
				if _, err := tx.UpsertTrail(e.ctx, tr); err != nil {
					return err
				}
				if f.ID == f1.ID {
					want = append(want, tr)
				}
			}
			return nil
		})
	}
	check := func(stage string) {
		t.Helper()
		slices.SortFunc(want, store.CompareListed)
		for _, per := range []int{20, 37} {
			for page := 1; (page-1)*per <= len(want); page++ {
				got, total, err := e.s.ListTrails(e.ctx, o.ID, store.TrailFilter{FlowIDs: []string{f1.ID},
					Page: store.Page{Page: page, PerPage: per}})
				must(t, "ListTrails", err)
				exp := want[(page-1)*per : min(page*per, len(want))]
				if total != len(want) || !slices.EqualFunc(got, exp, func(a, b store.Trail) bool { return a.ID == b.ID }) {
					t.Fatalf("%s: page %d of %d a page: total %d (want %d), IDs %v, want %v", stage, page, per,
						total, len(want), trailIDs(got), trailIDs(exp))
				}
			}
		}
	}
	// 1,000 trails, ties of three by created_at, inserted in no order.
	insert(1000, func(int) float64 { return t0 + float64(rnd.IntN(333)) })
	check("first")
	insert(60, func(i int) float64 { return t0 + 1000 + float64(i) }) // at the head
	insert(60, func(int) float64 { return t0 + float64(rnd.IntN(333)) + 0.5 })
	insert(10, func(int) float64 { return t0 + 100 }) // ties with some of the first
	check("after a few more")
	insert(700, func(int) float64 { return t0 + float64(rnd.IntN(2000)) }) // more than the store keeps apart
	check("after many more")
}

func trailIDs(trails []store.Trail) []string {
	out := make([]string, len(trails))
	for i, tr := range trails {
		out[i] = tr.ID
	}
	return out
}
