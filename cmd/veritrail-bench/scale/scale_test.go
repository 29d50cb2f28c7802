package scale

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// TestFill fills a small SQLite store twice, the second growing the first, and reads back what
// the evaluator made of it: every attestation and trail, the trails evaluated, the
// environments with their snapshots.
func TestFill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	org, err := app.EnsureOrg(ctx, st, Org)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct{ from, to int }{{0, 60}, {60, 100}} {
		if err := Fill(ctx, FillConfig{Store: st, OrgID: org.ID, FromTrail: step.from, ToTrail: step.to, Environments: 4}); err != nil {
			t.Fatalf("fill %d..%d: %v", step.from, step.to, err)
		}
	}
	if _, n, err := st.ListAttestations(ctx, org.ID, store.Page{Page: 1, PerPage: 1}); err != nil || n != 100*AttestationsPerTrail {
		t.Fatalf("attestations: %d, %v; want %d", n, err, 100*AttestationsPerTrail)
	}
	trails, n, err := st.ListTrails(ctx, org.ID, store.TrailFilter{})
	if err != nil || n != 100 {
		t.Fatalf("trails: %d, %v; want 100", n, err)
	}
	states := map[string]int{}
	for _, tr := range trails {
		states[tr.State]++
	}
	// Trails 7 and 57 carry a failing junit attestation; the others pass.
	if states["COMPLIANT"] != 98 || states["NON-COMPLIANT"] != 2 {
		t.Errorf("trail states %v: want 98 compliant and 2 not", states)
	}
	flow, err := st.FlowByName(ctx, org.ID, FlowName(0))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := st.TrailByName(ctx, flow.ID, TrailName(0))
	if err != nil {
		t.Fatal(err)
	}
	if arts, err := st.TrailArtifacts(ctx, tr.ID); err != nil || len(arts) != 1 || arts[0].Fingerprint != Fingerprint(0) {
		t.Errorf("trail 0's artifacts: %+v, %v", arts, err)
	}
	envs, _, err := st.ListEnvironments(ctx, org.ID, store.Page{})
	if err != nil || len(envs) != 4 {
		t.Fatalf("environments: %d, %v; want 4", len(envs), err)
	}
	for _, e := range envs {
		if _, err := st.LatestSnapshot(ctx, e.ID); err != nil {
			t.Errorf("environment %s has no snapshot: %v", e.Name, err)
		}
	}
}

// TestRun measures the embedded product at two small sizes, a few requests a read: each size
// alone, then both alternating.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("fills stores of 10,000 and 20,000 attestations")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Sizes: []int{10_000, 20_000}, Environments: 10, Requests: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sizes) != 2 {
		t.Fatalf("result %+v", res)
	}
	for _, sz := range res.Sizes {
		if sz.Trails != sz.Attestations/AttestationsPerTrail || sz.RSSMB <= 0 || sz.StoreMB <= 0 {
			t.Errorf("size %d: %+v", sz.Attestations, sz)
		}
		for what, ps := range map[string][]Probe{"alternating": sz.Probes, "alone": sz.Alone} {
			if len(ps) != len(probes(1000)) {
				t.Fatalf("size %d, %s: %d probes", sz.Attestations, what, len(ps))
			}
			for _, p := range ps {
				if p.P50ms <= 0 || p.Bytes == 0 {
					t.Errorf("size %d, %s: %s: %+v", sz.Attestations, what, p.Name, p)
				}
			}
		}
	}
	// Each size reads its own flows' middle page.
	if a, b := res.Sizes[0].Probes[4].Path, res.Sizes[1].Probes[4].Path; a == b {
		t.Errorf("both sizes read the middle page %s", a)
	}
	var out bytes.Buffer
	if err := res.WriteTable(&out); err != nil || !strings.Contains(out.String(), "web: trail page") || !strings.Contains(out.String(), "alone") {
		t.Errorf("table: %v\n%s", err, out.String())
	}
}
