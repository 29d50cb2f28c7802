package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// TestAttestationCountFollowsTheStore: the incremental count agrees with the store's own count
// of the organization's attestations after each commit, and ignores other organizations.
func TestAttestationCountFollowsTheStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlstore.OpenSQLite(ctx, dir+"/state.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := openAttestationCount(dir, "org-a")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seq := 0
	add := func(org string, n int) {
		t.Helper()
		var atts []store.Attestation
		for range n {
			seq++
			atts = append(atts, store.Attestation{ID: fmt.Sprint("att-", seq), OrgID: org, FlowID: "f", TrailID: "t",
				Name: "tests", Type: "generic", Data: []byte(`{}`)})
		}
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.InsertAttestations(ctx, atts) }); err != nil {
			t.Fatal(err)
		}
	}
	for i, step := range []struct {
		a, b int // attestations added to org-a and to another organization
	}{{0, 0}, {3, 0}, {2, 4}, {0, 2}, {1, 1}} {
		add("org-a", step.a)
		add("org-b", step.b)
		got, err := c.count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, want, err := st.ListAttestations(ctx, "org-a", store.Page{Page: 1, PerPage: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("step %d: counted %d, the store has %d", i, got, want)
		}
	}
}
