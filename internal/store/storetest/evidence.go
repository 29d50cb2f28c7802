package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

// fp makes a 64-digit fingerprint from a hex prefix.
func fp(prefix string) string { return prefix + strings.Repeat("0", 64-len(prefix)) }

func checkArtifact(t *testing.T, what string, got, want store.Artifact) {
	t.Helper()
	checkJSON(t, what+".Report", got.Report, want.Report)
	got.Report, want.Report = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

func checkAttestation(t *testing.T, what string, got, want store.Attestation) {
	t.Helper()
	checkJSON(t, what+".Data", got.Data, want.Data)
	got.Data, want.Data = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

func testArtifacts(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := e.flow(t, "org-a", "f-1", "web")
	tr := e.trail(t, f, "tr-1", "one", t0)
	other := e.trail(t, f, "tr-2", "two", t0)
	a1 := store.Artifact{ID: "a1", OrgID: "org-a", FlowID: f.ID, TrailID: tr.ID, Fingerprint: fp("abc"), TemplateName: "app",
		Filename: "app.tar", GitCommit: "c1", RepoName: "acme/web",
		Report:     json.RawMessage(`{"filename": "app.tar", "repo_info": {"name": "acme/web"}, "n": 1.5}`),
		ReportedBy: "alice", CreatedAt: t0 + 0.125, State: "INCOMPLETE"}
	e.update(t, func(tx store.Tx) error { return tx.InsertArtifact(e.ctx, a1) })
	// The same fingerprint may be reported again, to another trail or the same one.
	a2 := e.artifact(t, other, "a2", fp("abc"), "c1", "acme/web", t0+1)
	a3 := e.artifact(t, tr, "a3", fp("def"), "c2", "acme/web", t0+2)
	a4 := e.artifact(t, tr, "a4", fp("abc"), "c2", "acme/web", t0+3)

	arts, err := e.s.TrailArtifacts(e.ctx, tr.ID)
	must(t, "TrailArtifacts", err)
	checkIDs(t, "TrailArtifacts", arts, artifactID, "a1", "a3", "a4")
	for i, want := range []store.Artifact{a1, a3, a4} {
		if i < len(arts) {
			checkArtifact(t, "TrailArtifacts", arts[i], want)
		}
	}
	arts, err = e.s.TrailArtifacts(e.ctx, other.ID)
	must(t, "TrailArtifacts", err)
	checkIDs(t, "TrailArtifacts(other)", arts, artifactID, "a2")
	if len(arts) == 1 {
		checkArtifact(t, "TrailArtifacts(other)", arts[0], a2)
	}
	if arts, err := e.s.TrailArtifacts(e.ctx, "nope"); err != nil || len(arts) != 0 {
		t.Errorf("TrailArtifacts(unknown) = %v, %v; want none", arts, err)
	}
	if err := e.s.Update(e.ctx, func(tx store.Tx) error { return tx.InsertArtifact(e.ctx, a1) }); err == nil {
		t.Error("InsertArtifact with a duplicate ID succeeded")
	}
}

func testArtifactsByPrefix(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "beta")
	f1, f2 := e.flow(t, "org-a", "f-1", "web"), e.flow(t, "org-a", "f-2", "api")
	fb := e.flow(t, "org-b", "f-b", "web")
	t1, t2, tb := e.trail(t, f1, "t1", "one", t0), e.trail(t, f2, "t2", "two", t0), e.trail(t, fb, "tb", "one", t0)
	e.artifact(t, t1, "a1", fp("abcde1"), "c1", "acme/web", t0+1)
	e.artifact(t, t2, "a2", fp("abcde2"), "c1", "acme/api", t0+2)
	e.artifact(t, t1, "a3", fp("abcdf"), "c1", "acme/web", t0+3)  // shares only 4 digits
	e.artifact(t, t1, "a4", fp("abcde1"), "c2", "acme/web", t0+4) // same fingerprint again
	e.artifact(t, t1, "a5", "abcde"+strings.Repeat("f", 59), "c2", "acme/web", t0+5)
	e.artifact(t, t1, "a6", fp("abcdd"), "c2", "acme/web", t0+6)
	e.artifact(t, tb, "b1", fp("abcde1"), "c1", "beta/web", t0+7)

	cases := []struct {
		name, org, flow, prefix string
		limit                   int
		want                    []string
	}{
		{"5-digit prefix", "org-a", "", "abcde", 10, []string{"a1", "a2", "a4", "a5"}},
		{"flow filter", "org-a", f1.ID, "abcde", 10, []string{"a1", "a4", "a5"}},
		{"other flow", "org-a", f2.ID, "abcde", 10, []string{"a2"}},
		{"full fingerprint", "org-a", "", fp("abcde1"), 10, []string{"a1", "a4"}},
		{"4-digit prefix", "org-a", "", "abcd", 10, []string{"a1", "a2", "a3", "a4", "a5", "a6"}},
		{"other org", "org-b", "", "abcde", 10, []string{"b1"}},
		{"other org's flow", "org-a", fb.ID, "abcde", 10, nil},
		{"no match", "org-a", "", "fffff", 10, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := e.s.ArtifactsByPrefix(e.ctx, c.org, c.flow, c.prefix, c.limit)
			must(t, "ArtifactsByPrefix", err)
			checkIDSet(t, "ArtifactsByPrefix", got, artifactID, c.want...)
			for _, a := range got {
				if !strings.HasPrefix(a.Fingerprint, c.prefix) || a.OrgID != c.org {
					t.Errorf("ArtifactsByPrefix returned %+v", a)
				}
			}
		})
	}
	t.Run("limit", func(t *testing.T) {
		for _, limit := range []int{1, 2, 3} {
			got, err := e.s.ArtifactsByPrefix(e.ctx, "org-a", "", "abcde", limit)
			must(t, "ArtifactsByPrefix", err)
			if len(got) != limit {
				t.Errorf("limit %d: got %d artifacts", limit, len(got))
			}
		}
	})
}

func testArtifactsByCommit(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "beta")
	f1, f2 := e.flow(t, "org-a", "f-1", "web"), e.flow(t, "org-a", "f-2", "api")
	fb := e.flow(t, "org-b", "f-b", "web")
	t1, t2, tb := e.trail(t, f1, "t1", "one", t0), e.trail(t, f2, "t2", "two", t0), e.trail(t, fb, "tb", "one", t0)
	const sha, sha2 = "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
	a1 := e.artifact(t, t1, "a1", fp("a"), sha, "acme/web", t0+1)
	e.artifact(t, t2, "a2", fp("b"), sha, "acme/api", t0+2)
	e.artifact(t, t1, "a3", fp("c"), sha2, "acme/web", t0+3)
	e.artifact(t, tb, "b1", fp("a"), sha, "beta/web", t0+4)

	cases := []struct {
		name, org, flow, sha string
		want                 []string
	}{
		{"whole org", "org-a", "", sha, []string{"a1", "a2"}},
		{"one flow", "org-a", f1.ID, sha, []string{"a1"}},
		{"other commit", "org-a", "", sha2, []string{"a3"}},
		{"unknown commit", "org-a", "", "0000000000000000000000000000000000000000", nil},
		{"prefix is not a match", "org-a", "", sha[:7], nil},
		{"other org", "org-b", "", sha, []string{"b1"}},
		{"other org's flow", "org-a", fb.ID, sha, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := e.s.ArtifactsByCommit(e.ctx, c.org, c.flow, c.sha)
			must(t, "ArtifactsByCommit", err)
			checkIDSet(t, "ArtifactsByCommit", got, artifactID, c.want...)
		})
	}
	got, err := e.s.ArtifactsByCommit(e.ctx, "org-a", f1.ID, sha)
	if err == nil && len(got) == 1 {
		checkArtifact(t, "ArtifactsByCommit", got[0], a1)
	}
}

func testListArtifacts(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "beta")
	f1, f2 := e.flow(t, "org-a", "f-1", "web"), e.flow(t, "org-a", "f-2", "api")
	fb := e.flow(t, "org-b", "f-b", "web")
	t1, t2, tb := e.trail(t, f1, "t1", "one", t0), e.trail(t, f2, "t2", "two", t0), e.trail(t, fb, "tb", "one", t0)
	e.artifact(t, t1, "a1", fp("1"), "c1", "acme/web", t0+1)
	e.artifact(t, t1, "a2", fp("2"), "c1", "acme/mono", t0+2)
	e.artifact(t, t2, "a3", fp("3"), "c1", "acme/mono", t0+3)
	e.artifact(t, t2, "a4", fp("4"), "c1", "acme/api", t0+4)
	e.artifact(t, t1, "a5", fp("5"), "c1", "acme/web", t0+5)
	e.artifact(t, tb, "b1", fp("1"), "c1", "acme/web", t0+6)

	cases := []struct {
		name  string
		f     store.ArtifactFilter
		want  []string
		total int
	}{
		{"all", store.ArtifactFilter{}, []string{"a1", "a2", "a3", "a4", "a5"}, 5},
		{"flow", store.ArtifactFilter{FlowID: f1.ID}, []string{"a1", "a2", "a5"}, 3},
		{"repo", store.ArtifactFilter{RepoName: "acme/mono"}, []string{"a2", "a3"}, 2},
		{"flow and repo", store.ArtifactFilter{FlowID: f2.ID, RepoName: "acme/mono"}, []string{"a3"}, 1},
		{"unknown repo", store.ArtifactFilter{RepoName: "acme"}, nil, 0},
		{"other org's flow", store.ArtifactFilter{FlowID: fb.ID}, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, total, err := e.s.ListArtifacts(e.ctx, "org-a", c.f)
			must(t, "ListArtifacts", err)
			checkIDSet(t, "ListArtifacts", got, artifactID, c.want...)
			if total != c.total {
				t.Errorf("total = %d, want %d", total, c.total)
			}
		})
	}
	t.Run("paging", func(t *testing.T) {
		whole, _, err := e.s.ListArtifacts(e.ctx, "org-a", store.ArtifactFilter{})
		must(t, "ListArtifacts", err)
		var paged []store.Artifact
		for page, wantLen := range []int{2, 2, 1, 0} {
			got, total, err := e.s.ListArtifacts(e.ctx, "org-a", store.ArtifactFilter{Page: store.Page{Page: page + 1, PerPage: 2}})
			must(t, "ListArtifacts page", err)
			if len(got) != wantLen || total != 5 {
				t.Errorf("page %d: %d artifacts, total %d; want %d, 5", page+1, len(got), total, wantLen)
			}
			paged = append(paged, got...)
		}
		checkIDs(t, "pages", paged, artifactID, ids(whole, artifactID)...)
		got, total, err := e.s.ListArtifacts(e.ctx, "org-a", store.ArtifactFilter{FlowID: f1.ID, Page: store.Page{Page: 2, PerPage: 2}})
		if err != nil || len(got) != 1 || total != 3 {
			t.Errorf("flow page 2 = %d artifacts, total %d, %v; want 1, 3", len(got), total, err)
		}
	})
}

func testAttestations(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "beta")
	f := e.flow(t, "org-a", "f-1", "web")
	fb := e.flow(t, "org-b", "f-b", "web")
	tr, other, tb := e.trail(t, f, "tr-1", "one", t0), e.trail(t, f, "tr-2", "two", t0), e.trail(t, fb, "tb", "one", t0)

	full := store.Attestation{ID: "at-1", OrgID: "org-a", FlowID: f.ID, TrailID: tr.ID, Name: "unit-tests", Type: "junit",
		IsCompliant: true, ArtifactFingerprint: fp("abc"), TargetArtifact: "app",
		EvidenceSHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", EvidenceName: "results.zip",
		Data: json.RawMessage(`{"failures": 0, "suites": ["a", "b"]}`), ReportedBy: "ci", CreatedAt: t0 + 0.5}
	override := store.Attestation{ID: "at-3", OrgID: "org-a", FlowID: f.ID, TrailID: tr.ID, Name: "unit-tests", Type: "override",
		IsCompliant: false, OverridesID: "at-1", OverrideReason: "flaky", ReportedBy: "alice", CreatedAt: t0 + 3,
		Data: json.RawMessage(`{}`)}
	e.update(t, func(tx store.Tx) error { return tx.InsertAttestation(e.ctx, full) })
	e.attestation(t, other, "at-2", "lint", t0+2)
	e.update(t, func(tx store.Tx) error { return tx.InsertAttestation(e.ctx, override) })
	e.attestation(t, tr, "at-4", "sbom", t0+4)
	e.attestation(t, tb, "bt-1", "unit-tests", t0+5)

	got, err := e.s.TrailAttestations(e.ctx, tr.ID)
	must(t, "TrailAttestations", err)
	checkIDs(t, "TrailAttestations", got, attestationID, "at-1", "at-3", "at-4")
	if len(got) == 3 {
		checkAttestation(t, "TrailAttestations[0]", got[0], full)
		checkAttestation(t, "TrailAttestations[1]", got[1], override)
	}
	if got, err := e.s.TrailAttestations(e.ctx, "nope"); err != nil || len(got) != 0 {
		t.Errorf("TrailAttestations(unknown) = %v, %v; want none", got, err)
	}
	facts, err := e.s.TrailAttestationFacts(e.ctx, tr.ID)
	must(t, "TrailAttestationFacts", err)
	if len(facts) != len(got) {
		t.Errorf("TrailAttestationFacts: %d, want %d (as TrailAttestations)", len(facts), len(got))
	}
	for i := range min(len(facts), len(got)) {
		if want := got[i].Fact(); facts[i] != want {
			t.Errorf("TrailAttestationFacts[%d] = %+v, want %+v", i, facts[i], want)
		}
	}
	if got, err := e.s.TrailAttestationFacts(e.ctx, "nope"); err != nil || len(got) != 0 {
		t.Errorf("TrailAttestationFacts(unknown) = %v, %v; want none", got, err)
	}

	a, err := e.s.AttestationByID(e.ctx, "org-a", "at-1")
	must(t, "AttestationByID", err)
	checkAttestation(t, "AttestationByID", a, full)
	_, err = e.s.AttestationByID(e.ctx, "org-b", "at-1")
	wantErr(t, "AttestationByID from another org", err, store.ErrNotFound)
	_, err = e.s.AttestationByID(e.ctx, "org-a", "bt-1")
	wantErr(t, "AttestationByID of another org's", err, store.ErrNotFound)
	_, err = e.s.AttestationByID(e.ctx, "org-a", "nope")
	wantErr(t, "AttestationByID unknown", err, store.ErrNotFound)

	whole, total, err := e.s.ListAttestations(e.ctx, "org-a", store.Page{})
	must(t, "ListAttestations", err)
	checkIDSet(t, "ListAttestations", whole, attestationID, "at-1", "at-2", "at-3", "at-4")
	if total != 4 {
		t.Errorf("ListAttestations total = %d, want 4", total)
	}
	var paged []store.Attestation
	for page, wantLen := range []int{3, 1, 0} {
		got, total, err := e.s.ListAttestations(e.ctx, "org-a", store.Page{Page: page + 1, PerPage: 3})
		must(t, "ListAttestations page", err)
		if len(got) != wantLen || total != 4 {
			t.Errorf("page %d: %d attestations, total %d; want %d, 4", page+1, len(got), total, wantLen)
		}
		paged = append(paged, got...)
	}
	checkIDs(t, "pages", paged, attestationID, ids(whole, attestationID)...)
	if err := e.s.Update(e.ctx, func(tx store.Tx) error { return tx.InsertAttestation(e.ctx, full) }); err == nil {
		t.Error("InsertAttestation with a duplicate ID succeeded")
	}
}

// testBulkEvidence checks the bulk writes a batch of attestation messages uses against their one-at-a-time forms.
func testBulkEvidence(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f, g := e.flow(t, "org-a", "f-1", "web"), e.flow(t, "org-a", "f-2", "api")
	e.trail(t, f, "tr-1", "one", t0)
	e.trail(t, f, "tr-2", "two", t0)
	e.trail(t, g, "tr-3", "one", t0)

	ids, err := e.s.TrailIDs(e.ctx, []store.TrailKey{{FlowID: f.ID, Name: "one"}, {FlowID: f.ID, Name: "two"},
		{FlowID: g.ID, Name: "one"}, {FlowID: f.ID, Name: "one"}, {FlowID: f.ID, Name: "nope"}, {FlowID: "f-9", Name: "one"}})
	must(t, "TrailIDs", err)
	want := map[store.TrailKey]string{{FlowID: f.ID, Name: "one"}: "tr-1", {FlowID: f.ID, Name: "two"}: "tr-2", {FlowID: g.ID, Name: "one"}: "tr-3"}
	if len(ids) != len(want) {
		t.Errorf("TrailIDs = %v, want %v", ids, want)
	}
	for k, id := range want {
		if ids[k] != id {
			t.Errorf("TrailIDs[%v] = %q, want %q", k, ids[k], id)
		}
	}

	atts := make([]store.Attestation, 70) // more than one prepared statement's rows
	for i := range atts {
		atts[i] = store.Attestation{ID: fmt.Sprint("bulk-", i), OrgID: "org-a", FlowID: f.ID, TrailID: []string{"tr-1", "tr-2"}[i%2],
			Name: fmt.Sprint("check-", i), Type: "generic", IsCompliant: i%3 != 0, ArtifactFingerprint: fp("ab"),
			Data: json.RawMessage(`{"i":` + fmt.Sprint(i) + `}`), ReportedBy: "ci", CreatedAt: t0 + float64(i)}
	}
	atts[1].OverridesID, atts[1].OverrideReason, atts[1].EvidenceSHA256, atts[1].EvidenceName = "bulk-0", "flaky", "e3b0", "r.zip"
	events := []store.TrailEvent{{TrailID: "tr-1", Doc: json.RawMessage(`{"n":1}`), At: t0 + 7},
		{TrailID: "tr-2", Doc: json.RawMessage(`{"n":2}`)}, {TrailID: "tr-1", Doc: json.RawMessage(`{"n":3}`), At: t0 + 9}}
	e.update(t, func(tx store.Tx) error {
		must(t, "InsertAttestations", tx.InsertAttestations(e.ctx, atts))
		must(t, "TouchTrails", tx.TouchTrails(e.ctx, map[string]float64{"tr-1": t0 + 30, "tr-3": t0 + 31}))
		must(t, "MarkDirtyAll", tx.MarkDirtyAll(e.ctx, []string{"tr-1", "tr-3"}))
		return tx.AppendTrailEvents(e.ctx, events, t0+8)
	})
	got, err := e.s.TrailAttestations(e.ctx, "tr-1")
	must(t, "TrailAttestations", err)
	var wantIDs []string
	for i := 0; i < len(atts); i += 2 {
		wantIDs = append(wantIDs, atts[i].ID)
	}
	checkIDs(t, "TrailAttestations after InsertAttestations", got, attestationID, wantIDs...)
	second, err := e.s.TrailAttestations(e.ctx, "tr-2")
	must(t, "TrailAttestations", err)
	if len(second) > 0 {
		checkAttestation(t, "InsertAttestations[1]", second[0], atts[1])
	}
	for id, at := range map[string]float64{"tr-1": t0 + 30, "tr-2": t0, "tr-3": t0 + 31} {
		if tr, err := e.s.TrailByID(e.ctx, id); err != nil || tr.LastModifiedAt != at {
			t.Errorf("%s after TouchTrails: last modified %v, %v; want %v", id, tr.LastModifiedAt, err, at)
		}
	}
	checkDirty(t, e, "tr-1", "tr-3")
	evs, err := e.s.TrailEvents(e.ctx, "tr-1")
	must(t, "TrailEvents", err)
	if evs = appended(evs); len(evs) != 2 || !sameJSON(evs[0].Doc, events[0].Doc) || evs[0].At != t0+7 || evs[1].At != t0+9 {
		t.Errorf("TrailEvents(tr-1) without the attestations' = %d events, want n 1 at t0+7, n 3 at t0+9", len(evs))
	}
	if evs, err := e.s.TrailEvents(e.ctx, "tr-2"); err != nil || len(appended(evs)) != 1 || appended(evs)[0].At != t0+8 {
		t.Errorf("TrailEvents(tr-2) without the attestations' = %d events, %v; want one at the time given (t0+8)", len(appended(evs)), err)
	}
	// A batch marks a trail dirty again: its generation moves on, as MarkDirty's does.
	g1, err := e.s.DirtyGeneration(e.ctx, "tr-1")
	must(t, "DirtyGeneration", err)
	e.update(t, func(tx store.Tx) error { return tx.MarkDirtyAll(e.ctx, []string{"tr-1"}) })
	if g2, err := e.s.DirtyGeneration(e.ctx, "tr-1"); err != nil || g2 == g1 {
		t.Errorf("DirtyGeneration after a second MarkDirtyAll = %d, %v; was %d", g2, err, g1)
	}
	if err := e.s.Update(e.ctx, func(tx store.Tx) error { return tx.InsertAttestations(e.ctx, atts[:1]) }); err == nil {
		t.Error("InsertAttestations with a duplicate ID succeeded")
	}
}

// appended are the events among evs that were appended (AppendTrailEvents), without those the
// store builds from attestations.
func appended(evs []store.TrailEvent) []store.TrailEvent {
	var out []store.TrailEvent
	for _, ev := range evs {
		var head struct {
			AttestationID *string `json:"attestation_id"`
		}
		if json.Unmarshal(ev.Doc, &head) == nil && head.AttestationID == nil {
			out = append(out, ev)
		}
	}
	return out
}
