package sqlstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// TestPostgresPageAnchorsAndLateCommits: on PostgreSQL a deep page of a flow's trails starts at
// an anchor, and a trail whose transaction began before the anchors were taken but committed
// after is still placed and counted once, as are the trails committed meanwhile; with the mark
// held back behind more trails than a page reads, pages are walked from the head, still exact.
func TestPostgresPageAnchorsAndLateCommits(t *testing.T) {
	s, _, _ := openLockStore(t)
	ctx := context.Background()
	var want []store.Trail
	trail := func(n int, at float64) store.Trail {
		return store.Trail{ID: fmt.Sprintf("tr-%04d", n), OrgID: "org-a", FlowID: "flow-1", Name: fmt.Sprintf("t-%d", n),
			TemplateID: "tpl", CreatedAt: at, LastModifiedAt: at, State: "INCOMPLETE"}
	}
	insert := func(trails ...store.Trail) {
		t.Helper()
		err := s.Update(ctx, func(tx store.Tx) error {
			for _, tr := range trails {
				if _, err := tx.UpsertTrail(ctx, tr); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, trails...)
	}
	check := func(stage string) {
		t.Helper()
		slices.SortFunc(want, store.CompareListed)
		const per = 20
		for page := 1; (page-1)*per < len(want); page++ {
			got, total, err := s.ListTrails(ctx, "org-a", store.TrailFilter{FlowIDs: []string{"flow-1"},
				Page: store.Page{Page: page, PerPage: per}})
			if err != nil {
				t.Fatal(err)
			}
			exp := want[(page-1)*per : min(page*per, len(want))]
			if total != len(want) || len(got) != len(exp) {
				t.Fatalf("%s: page %d: total %d (want %d), %d trails (want %d)", stage, page, total, len(want), len(got), len(exp))
			}
			for i := range got {
				if got[i].ID != exp[i].ID {
					t.Fatalf("%s: page %d, row %d: %s, want %s", stage, page, i, got[i].ID, exp[i].ID)
				}
			}
		}
	}
	// holdOpen inserts late in a transaction it keeps open until the returned function commits it.
	holdOpen := func(late store.Trail) (commit func()) {
		t.Helper()
		inserted, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- s.Update(ctx, func(tx store.Tx) error {
				if _, err := tx.UpsertTrail(ctx, late); err != nil {
					close(inserted)
					return err
				}
				close(inserted)
				<-release
				return nil
			})
		}()
		<-inserted
		return func() {
			t.Helper()
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want = append(want, late)
		}
	}

	var first []store.Trail
	for i := range 600 {
		first = append(first, trail(i, float64(1000+i)))
	}
	insert(first...)
	check("just inserted")
	// The anchors are taken among the trails of transactions below the oldest one running in the
	// cluster: other tests' may still run for a while.
	for deadline := time.Now().Add(time.Minute); !sqlstore.PageAnchored(t, s, "org-a", "flow-1", 300); {
		if time.Now().After(deadline) {
			t.Fatal("a deep page of 600 settled trails does not start at an anchor")
		}
		time.Sleep(10 * time.Millisecond)
	}
	check("settled")

	// A transaction that inserted a trail in the middle of the list stays open while others
	// commit ahead of the list and the anchors are taken again (they are retaken at once once
	// more than 256 trails are past the mark: the test store retakes without waiting).
	commit := holdOpen(trail(9999, 1299.5))
	var ahead []store.Trail
	for i := range 300 {
		ahead = append(ahead, trail(600+i, float64(5000+i)))
	}
	insert(ahead...)
	check("with a transaction open")
	if !sqlstore.PageAnchored(t, s, "org-a", "flow-1", 500) {
		t.Fatal("a deep page does not start at an anchor while a transaction is open")
	}
	commit()
	check("after the late commit")

	// With more trails past the mark than a page would read, pages walk from the head.
	commit = holdOpen(trail(9998, 1100.5))
	ahead = ahead[:0]
	for i := range 1100 {
		ahead = append(ahead, trail(1000+i, float64(9000+i)))
	}
	insert(ahead...)
	if sqlstore.PageAnchored(t, s, "org-a", "flow-1", 1500) {
		t.Fatal("a deep page starts at an anchor with 1,100 trails past its mark")
	}
	check("held back")
	commit()
	check("after the second late commit")
}
