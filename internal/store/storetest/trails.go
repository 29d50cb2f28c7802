package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

// checkTrail compares every field, raw JSON by meaning.
func checkTrail(t *testing.T, what string, got, want store.Trail) {
	t.Helper()
	checkJSON(t, what+".GitCommitInfo", got.GitCommitInfo, want.GitCommitInfo)
	checkJSON(t, what+".RepoInfo", got.RepoInfo, want.RepoInfo)
	checkJSON(t, what+".ExternalURLs", got.ExternalURLs, want.ExternalURLs)
	checkJSON(t, what+".UserData", got.UserData, want.UserData)
	checkJSON(t, what+".Compliance", got.Compliance, want.Compliance)
	checkStrPtr(t, what+".Description", got.Description, want.Description)
	checkStrPtr(t, what+".OriginURL", got.OriginURL, want.OriginURL)
	got.GitCommitInfo, got.RepoInfo, got.ExternalURLs, got.UserData, got.Compliance = nil, nil, nil, nil, nil
	want.GitCommitInfo, want.RepoInfo, want.ExternalURLs, want.UserData, want.Compliance = nil, nil, nil, nil, nil
	got.Description, got.OriginURL, want.Description, want.OriginURL = nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

func checkStrPtr(t *testing.T, what string, got, want *string) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %v, want %v (nil and set differ)", what, deref(got), deref(want))
	case *got != *want:
		t.Errorf("%s = %q, want %q", what, *got, *want)
	}
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func ptr(s string) *string { return &s }

func testUpsertTrail(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := e.flow(t, "org-a", "f-1", "web")
	f2 := e.flow(t, "org-a", "f-2", "api")
	tr := store.Trail{ID: "tr-1", OrgID: "org-a", FlowID: f.ID, Name: "abc123", Description: ptr("first run"),
		TemplateID: f.TemplateID, GitCommitInfo: json.RawMessage(`{"sha1": "abc123", "author": "A <a@example.com>"}`),
		RepoInfo: json.RawMessage(`{"name":"acme/web","url":"https://git.example/acme/web"}`), OriginURL: ptr("https://ci/1"),
		ExternalURLs: json.RawMessage(`{"ci":{"url":"https://ci/1?a=1&b=2"}}`), UserData: json.RawMessage(`[1, 2.5, {"k": null}, "x"]`),
		CreatedBy: "alice", CreatedAt: t0, LastModifiedAt: t0, State: "INCOMPLETE"}
	e.update(t, func(tx store.Tx) error {
		created, err := tx.UpsertTrail(e.ctx, tr)
		if err == nil && !created {
			t.Error("UpsertTrail of a new trail: created = false")
		}
		return err
	})
	got, err := e.s.TrailByName(e.ctx, f.ID, "abc123")
	must(t, "TrailByName", err)
	checkTrail(t, "TrailByName", got, tr)
	got, err = e.s.TrailByID(e.ctx, "tr-1")
	must(t, "TrailByID", err)
	checkTrail(t, "TrailByID", got, tr)

	// An update replaces the descriptive fields and template; identity, author and creation stay.
	upd := store.Trail{ID: "tr-ignored", OrgID: "org-a", FlowID: f.ID, Name: "abc123", Description: ptr(""),
		TemplateID: "tpl-other", UserData: json.RawMessage(`{"b":true}`), CreatedBy: "bob", CreatedAt: t0 + 9, LastModifiedAt: t0 + 9}
	e.update(t, func(tx store.Tx) error {
		created, err := tx.UpsertTrail(e.ctx, upd)
		if created {
			t.Error("UpsertTrail of an existing trail: created = true")
		}
		return err
	})
	want := upd
	want.ID, want.CreatedBy, want.CreatedAt, want.State = "tr-1", "alice", t0, "INCOMPLETE"
	got, err = e.s.TrailByID(e.ctx, "tr-1")
	must(t, "TrailByID after update", err)
	checkTrail(t, "TrailByID after update", got, want)
	_, err = e.s.TrailByID(e.ctx, "tr-ignored")
	wantErr(t, "TrailByID of the ignored ID", err, store.ErrNotFound)
	if id, err := e.s.TrailID(e.ctx, f.ID, "abc123"); err != nil || id != "tr-1" {
		t.Errorf("TrailID = %q, %v; want tr-1", id, err)
	}
	_, err = e.s.TrailID(e.ctx, f.ID, "nope")
	wantErr(t, "TrailID unknown", err, store.ErrNotFound)
	if gen, tid, err := e.s.TrailToEvaluate(e.ctx, "tr-1"); err != nil || tid != "tpl-other" || gen != 0 {
		t.Errorf("TrailToEvaluate (clean) = %d, %q, %v; want 0, tpl-other", gen, tid, err)
	}
	e.update(t, func(tx store.Tx) error { return tx.MarkDirty(e.ctx, "tr-1") })
	dirtyGen, err := e.s.DirtyGeneration(e.ctx, "tr-1")
	must(t, "DirtyGeneration", err)
	if gen, tid, err := e.s.TrailToEvaluate(e.ctx, "tr-1"); err != nil || tid != "tpl-other" || gen != dirtyGen || gen == 0 {
		t.Errorf("TrailToEvaluate (dirty) = %d, %q, %v; want %d, tpl-other", gen, tid, err, dirtyGen)
	}
	e.update(t, func(tx store.Tx) error { return tx.ClearDirty(e.ctx, "tr-1", dirtyGen) })
	_, _, err = e.s.TrailToEvaluate(e.ctx, "nope")
	wantErr(t, "TrailToEvaluate unknown", err, store.ErrNotFound)

	e.update(t, func(tx store.Tx) error { return tx.TouchTrail(e.ctx, "tr-1", t0+20) })
	if got, err := e.s.TrailByID(e.ctx, "tr-1"); err != nil || got.LastModifiedAt != t0+20 || got.CreatedAt != t0 {
		t.Errorf("after TouchTrail = %+v, %v; want LastModifiedAt t0+20", got, err)
	}

	// Trail names are unique per flow, not per organization.
	other := e.trail(t, f2, "tr-2", "abc123", t0+1)
	if got, err := e.s.TrailByName(e.ctx, f2.ID, "abc123"); err != nil || got.ID != other.ID {
		t.Errorf("TrailByName(f-2) = %+v, %v; want tr-2", got, err)
	}
	if got, err := e.s.TrailByName(e.ctx, f.ID, "abc123"); err != nil || got.ID != "tr-1" {
		t.Errorf("TrailByName(f-1) = %+v, %v; want tr-1", got, err)
	}
	_, err = e.s.TrailByName(e.ctx, f.ID, "nope")
	wantErr(t, "TrailByName unknown", err, store.ErrNotFound)
	_, err = e.s.TrailByID(e.ctx, "nope")
	wantErr(t, "TrailByID unknown", err, store.ErrNotFound)

	// TrailRef resolves both names at once.
	for _, c := range []struct {
		org, flow, trail string
		want             store.TrailRef
		err              error
	}{
		{"org-a", "api", "abc123", store.TrailRef{FlowID: f2.ID, FlowName: "api", TrailID: "tr-2", TrailName: "abc123"}, nil},
		{"org-a", "web", "abc123", store.TrailRef{FlowID: f.ID, FlowName: "web", TrailID: "tr-1", TrailName: "abc123"}, nil},
		{"org-a", "web", "nope", store.TrailRef{FlowID: f.ID, FlowName: "web", TrailName: "nope"}, nil},
		{"org-a", "nope", "abc123", store.TrailRef{}, store.ErrNotFound},
		{"org-b", "web", "abc123", store.TrailRef{}, store.ErrNotFound},
	} {
		got, err := e.s.TrailRef(e.ctx, c.org, c.flow, c.trail)
		if c.err != nil {
			wantErr(t, "TrailRef("+c.org+", "+c.flow+")", err, c.err)
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("TrailRef(%s, %s, %s) = %+v, %v; want %+v", c.org, c.flow, c.trail, got, err, c.want)
		}
	}
	e.update(t, func(tx store.Tx) error { return tx.ArchiveFlow(e.ctx, "org-a", f2.ID, t0+30) })
	_, err = e.s.TrailRef(e.ctx, "org-a", "api", "abc123")
	wantErr(t, "TrailRef of an archived flow", err, store.ErrNotFound)
}

// testTrailNullableFields checks that absent, empty and set values stay distinct.
func testTrailNullableFields(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := e.flow(t, "org-a", "f-1", "web")
	cases := []struct {
		name        string
		description *string
		origin      *string
		raw         json.RawMessage
	}{
		{"absent", nil, nil, nil},
		{"empty", ptr(""), ptr(""), json.RawMessage(`{}`)},
		{"set", ptr("a \"quoted\" <b>&</b>"), ptr("https://ci/x?y=1&z=2"), json.RawMessage(`{"nested":{"list":[1,"two",null]}}`)},
		{"json null", nil, nil, json.RawMessage(`null`)},
		{"json scalar", nil, nil, json.RawMessage(`"text"`)},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := store.Trail{ID: "tr-" + c.name, OrgID: "org-a", FlowID: f.ID, Name: "trail-" + c.name,
				Description: c.description, OriginURL: c.origin, TemplateID: f.TemplateID, GitCommitInfo: c.raw,
				RepoInfo: c.raw, ExternalURLs: c.raw, UserData: c.raw, CreatedBy: "alice",
				CreatedAt: t0 + float64(i), LastModifiedAt: t0 + float64(i), State: "INCOMPLETE"}
			e.update(t, func(tx store.Tx) error {
				_, err := tx.UpsertTrail(e.ctx, tr)
				return err
			})
			got, err := e.s.TrailByID(e.ctx, tr.ID)
			must(t, "TrailByID", err)
			checkTrail(t, "TrailByID", got, tr)
			list, _, err := e.s.ListTrails(e.ctx, "org-a", store.TrailFilter{})
			must(t, "ListTrails", err)
			for _, l := range list {
				if l.ID == tr.ID {
					checkTrail(t, "ListTrails", l, tr)
				}
			}
		})
	}
}

func testListTrails(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "beta")
	f1, f2 := e.flow(t, "org-a", "f-1", "web"), e.flow(t, "org-a", "f-2", "api")
	fb := e.flow(t, "org-b", "f-b", "web")
	// Created out of order so that "newest first" cannot be insertion order.
	t3 := e.trail(t, f1, "t3", "c3", t0+3)
	t1 := e.trail(t, f1, "t1", "c1", t0+1)
	e.trail(t, f1, "t2", "c2", t0+2)
	t4 := e.trail(t, f2, "t4", "c4", t0+4)
	tb := e.trail(t, fb, "tb", "c1", t0+5)
	const fp = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	e.artifact(t, t1, "a1", fp, "c1", "acme/web", t0+1)
	e.artifact(t, t4, "a4", fp, "c4", "acme/api", t0+4)
	e.artifact(t, t3, "a3", "ff"+fp[2:], "c3", "acme/web", t0+3)
	e.artifact(t, tb, "ab", fp, "c1", "beta/web", t0+5)

	cases := []struct {
		name  string
		f     store.TrailFilter
		want  []string
		total int
	}{
		{"every flow", store.TrailFilter{}, []string{"t4", "t3", "t2", "t1"}, 4},
		{"one flow", store.TrailFilter{FlowIDs: []string{f1.ID}}, []string{"t3", "t2", "t1"}, 3},
		{"two flows", store.TrailFilter{FlowIDs: []string{f1.ID, f2.ID}}, []string{"t4", "t3", "t2", "t1"}, 4},
		{"no flows", store.TrailFilter{FlowIDs: []string{}}, nil, 0},
		{"unknown flow", store.TrailFilter{FlowIDs: []string{"nope"}}, nil, 0},
		{"another org's flow", store.TrailFilter{FlowIDs: []string{fb.ID}}, nil, 0},
		{"fingerprint", store.TrailFilter{Fingerprint: fp}, []string{"t4", "t1"}, 2},
		{"fingerprint and flow", store.TrailFilter{Fingerprint: fp, FlowIDs: []string{f1.ID}}, []string{"t1"}, 1},
		{"unknown fingerprint", store.TrailFilter{Fingerprint: "ee" + fp[2:]}, nil, 0},
		{"page 1", store.TrailFilter{Page: store.Page{Page: 1, PerPage: 3}}, []string{"t4", "t3", "t2"}, 4},
		{"page 2", store.TrailFilter{Page: store.Page{Page: 2, PerPage: 3}}, []string{"t1"}, 4},
		{"page past the end", store.TrailFilter{Page: store.Page{Page: 3, PerPage: 3}}, nil, 4},
		{"page 0 is page 1", store.TrailFilter{Page: store.Page{PerPage: 1}}, []string{"t4"}, 4},
		{"paged flow", store.TrailFilter{FlowIDs: []string{f1.ID}, Page: store.Page{Page: 2, PerPage: 2}}, []string{"t1"}, 3},
		{"paged two flows", store.TrailFilter{FlowIDs: []string{f1.ID, f2.ID}, Page: store.Page{Page: 2, PerPage: 2}}, []string{"t2", "t1"}, 4},
		{"a page past the end of a flow", store.TrailFilter{FlowIDs: []string{f1.ID}, Page: store.Page{Page: 3, PerPage: 2}}, nil, 3},
		{"no total", store.TrailFilter{Page: store.Page{Page: 1, PerPage: 3}, NoTotal: true}, []string{"t4", "t3", "t2"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, total, err := e.s.ListTrails(e.ctx, "org-a", c.f)
			must(t, "ListTrails", err)
			checkIDs(t, "ListTrails", got, trailID, c.want...)
			if total != c.total {
				t.Errorf("total = %d, want %d", total, c.total)
			}
		})
	}
	got, total, err := e.s.ListTrails(e.ctx, "org-b", store.TrailFilter{Fingerprint: fp})
	must(t, "ListTrails(org-b)", err)
	checkIDs(t, "ListTrails(org-b)", got, trailID, "tb")
	if total != 1 {
		t.Errorf("ListTrails(org-b) total = %d, want 1", total)
	}
	// Totals follow trails begun after a list counted (stores may keep counts between lists).
	e.trail(t, f1, "t5", "c5", t0+6)
	e.trail(t, f2, "t6", "c6", t0+7)
	for _, c := range []struct {
		name  string
		f     store.TrailFilter
		total int
	}{
		{"every flow", store.TrailFilter{}, 6},
		{"one flow", store.TrailFilter{FlowIDs: []string{f1.ID}}, 4},
		{"the other flow", store.TrailFilter{FlowIDs: []string{f2.ID}}, 2},
	} {
		if _, total, err := e.s.ListTrails(e.ctx, "org-a", c.f); err != nil || total != c.total {
			t.Errorf("%s after new trails: total %d, %v; want %d", c.name, total, err, c.total)
		}
	}
}

func testTrailEvents(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := e.flow(t, "org-a", "f-1", "web")
	tr := e.trail(t, f, "tr-1", "one", t0)
	e.trail(t, f, "tr-2", "two", t0)
	docs := []json.RawMessage{
		json.RawMessage(`{"type":"trail_reported","timestamp":1}`),
		json.RawMessage(`{"type":"artifact_creation_reported","timestamp":2}`),
		// An attestation event as builds before derived events stored it: skipped, since the
		// attestation's row gives it (none here).
		json.RawMessage(`{"type":"trail_attestation_reported","timestamp":2}`),
		json.RawMessage(`{"type":"trail_updated","timestamp":3}`),
	}
	for i, d := range docs {
		e.update(t, func(tx store.Tx) error {
			must(t, "AppendTrailEvent", tx.AppendTrailEvent(e.ctx, store.TrailEvent{TrailID: "tr-1", Doc: d}, t0+float64(i)))
			// Interleave another trail's events; the timestamp repeats to show that events of one
			// time stay in the order they were appended.
			return tx.AppendTrailEvent(e.ctx, store.TrailEvent{TrailID: "tr-2", Doc: json.RawMessage(`{"other":true}`)}, t0)
		})
	}
	// Attestations are events too, in time order among the stored ones: after a stored event
	// of the same time, and in the order they were inserted among themselves.
	first := e.attestation(t, tr, "att-1", "unit", t0+1)
	second := newAttestation(tr, "att-2", "lint", t0+1)
	second.ArtifactFingerprint, second.ReportedBy = "fp-1", "bot"
	override := newAttestation(tr, "att-3", "unit", t0+2.5)
	override.OverridesID, override.OverrideReason, override.IsCompliant = "att-1", "flaky", false
	e.update(t, func(tx store.Tx) error { return tx.InsertAttestations(e.ctx, []store.Attestation{second, override}) })
	want := []json.RawMessage{docs[0], docs[1],
		eventOf(`"attestation_id":"att-1","attestation_name":"unit","attestation_type":"generic","is_compliant":true,
			"timestamp":%v,"type":"trail_attestation_reported","user":"ci"`, first.CreatedAt),
		eventOf(`"artifact_fingerprint":"fp-1","attestation_id":"att-2","attestation_name":"lint","attestation_type":"generic",
			"is_compliant":true,"timestamp":%v,"type":"artifact_attestation_reported","user":"bot"`, second.CreatedAt),
		eventOf(`"attestation_id":"att-3","attestation_name":"unit","attestation_type":"generic","is_compliant":false,
			"overridden_attestation_id":"att-1","reason":"flaky","timestamp":%v,"type":"attestation_overridden","user":"ci"`,
			override.CreatedAt),
		docs[3],
	}
	evs, err := e.s.TrailEvents(e.ctx, "tr-1")
	must(t, "TrailEvents", err)
	if len(evs) != len(want) {
		t.Fatalf("TrailEvents = %d events, want %d: %v", len(evs), len(want), evs)
	}
	ats := []float64{t0, t0 + 1, t0 + 1, t0 + 1, t0 + 2.5, t0 + 3}
	for i, ev := range evs {
		if ev.TrailID != "tr-1" || !sameJSON(ev.Doc, want[i]) || ev.At != ats[i] {
			t.Errorf("event %d = %s %s at %v, want tr-1 %s at %v", i, ev.TrailID, ev.Doc, ev.At, want[i], ats[i])
		}
	}
	if evs, err := e.s.TrailEvents(e.ctx, "tr-2"); err != nil || len(evs) != 4 {
		t.Errorf("TrailEvents(tr-2) = %d, %v; want 4", len(evs), err)
	}
	if evs, err := e.s.TrailEvents(e.ctx, "nope"); err != nil || len(evs) != 0 {
		t.Errorf("TrailEvents(unknown) = %v, %v; want none", evs, err)
	}
}

// eventOf is the JSON object of the fields given (a format with one %v, the timestamp).
func eventOf(fields string, at float64) json.RawMessage {
	return json.RawMessage("{" + fmt.Sprintf(fields, at) + "}")
}

func testSaveCompliance(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := e.flow(t, "org-a", "f-1", "web")
	tr := e.trail(t, f, "tr-1", "one", t0)
	e.artifact(t, tr, "a1", "aa", "c1", "acme/web", t0+1)
	e.artifact(t, tr, "a2", "bb", "c1", "acme/web", t0+2)

	got, err := e.s.TrailByID(e.ctx, tr.ID)
	if err != nil || got.State != "INCOMPLETE" || len(got.Compliance) != 0 || got.EvaluatedAt != 0 {
		t.Errorf("new trail = %+v, %v; want INCOMPLETE, never evaluated", got, err)
	}

	doc := json.RawMessage(`{"status":"NON-COMPLIANT","attestations":[{"name":"unit","ok":false}]}`)
	e.update(t, func(tx store.Tx) error {
		return tx.SaveCompliance(e.ctx, tr.ID, "NON-COMPLIANT", doc, t0+10, map[string]string{"a1": "COMPLIANT"})
	})
	got, err = e.s.TrailByID(e.ctx, tr.ID)
	must(t, "TrailByID", err)
	if got.State != "NON-COMPLIANT" || got.EvaluatedAt != t0+10 || !sameJSON(got.Compliance, doc) {
		t.Errorf("after SaveCompliance: state %q, evaluated %v, doc %s", got.State, got.EvaluatedAt, got.Compliance)
	}
	if got.LastModifiedAt != t0 || got.Name != "one" {
		t.Errorf("SaveCompliance changed other fields: %+v", got)
	}
	states := func() map[string]string {
		arts, err := e.s.TrailArtifacts(e.ctx, tr.ID)
		must(t, "TrailArtifacts", err)
		m := map[string]string{}
		for _, a := range arts {
			m[a.ID] = a.State
		}
		return m
	}
	if s := states(); s["a1"] != "COMPLIANT" || s["a2"] != "INCOMPLETE" {
		t.Errorf("artifact states = %v, want a1 COMPLIANT, a2 INCOMPLETE", s)
	}

	doc2 := json.RawMessage(`{"status":"COMPLIANT"}`)
	e.update(t, func(tx store.Tx) error {
		return tx.SaveCompliance(e.ctx, tr.ID, "COMPLIANT", doc2, t0+11, map[string]string{"a1": "COMPLIANT", "a2": "COMPLIANT"})
	})
	got, err = e.s.TrailByID(e.ctx, tr.ID)
	if err != nil || got.State != "COMPLIANT" || got.EvaluatedAt != t0+11 || !sameJSON(got.Compliance, doc2) {
		t.Errorf("after second SaveCompliance = %+v, %v", got, err)
	}
	if s := states(); s["a1"] != "COMPLIANT" || s["a2"] != "COMPLIANT" {
		t.Errorf("artifact states = %v, want both COMPLIANT", s)
	}
	// Listings show the evaluated state too.
	list, _, err := e.s.ListTrails(e.ctx, "org-a", store.TrailFilter{})
	if err != nil || len(list) != 1 || list[0].State != "COMPLIANT" || !sameJSON(list[0].Compliance, doc2) {
		t.Errorf("ListTrails = %+v, %v; want the saved compliance", list, err)
	}
}

// testBulkEvaluation checks the reads and writes of a round of trail evaluations against their one-trail forms.
func testBulkEvaluation(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := e.flow(t, "org-a", "f-1", "web")
	tr1, tr2, tr3 := e.trail(t, f, "tr-1", "one", t0), e.trail(t, f, "tr-2", "two", t0), e.trail(t, f, "tr-3", "three", t0)
	e.artifact(t, tr1, "a1", "aa", "c1", "acme/web", t0+1)
	e.artifact(t, tr2, "a2", "bb", "c1", "acme/web", t0+2)
	e.artifact(t, tr1, "a3", "cc", "c1", "acme/web", t0+3)
	e.update(t, func(tx store.Tx) error { return tx.MarkDirtyAll(e.ctx, []string{"tr-1", "tr-2"}) })

	starts, err := e.s.TrailsToEvaluate(e.ctx, []string{"tr-1", "tr-2", "tr-3", "nope", "tr-1"})
	must(t, "TrailsToEvaluate", err)
	if len(starts) != 3 {
		t.Errorf("TrailsToEvaluate = %v, want tr-1, tr-2, tr-3", starts)
	}
	for _, tr := range []store.Trail{tr1, tr2, tr3} {
		gen, tmpl, err := e.s.TrailToEvaluate(e.ctx, tr.ID)
		must(t, "TrailToEvaluate", err)
		if got := starts[tr.ID]; got.Generation != gen || got.TemplateID != tmpl || tmpl != tr.TemplateID {
			t.Errorf("TrailsToEvaluate[%s] = %+v, TrailToEvaluate = %d %q", tr.ID, got, gen, tmpl)
		}
	}
	if starts["tr-3"].Generation != 0 || starts["tr-1"].Generation == 0 {
		t.Errorf("generations: %+v; want tr-1 dirty, tr-3 clean", starts)
	}

	arts, err := e.s.TrailArtifactsByIDs(e.ctx, []string{"tr-1", "tr-2", "tr-3", "nope"})
	must(t, "TrailArtifactsByIDs", err)
	for _, id := range []string{"tr-1", "tr-2", "tr-3"} {
		one, err := e.s.TrailArtifacts(e.ctx, id)
		must(t, "TrailArtifacts", err)
		if !reflect.DeepEqual(arts[id], one) {
			t.Errorf("TrailArtifactsByIDs[%s] = %+v, TrailArtifacts = %+v", id, arts[id], one)
		}
	}

	doc1, doc2 := json.RawMessage(`{"status":"COMPLIANT"}`), json.RawMessage(`{"status":"NON-COMPLIANT"}`)
	e.update(t, func(tx store.Tx) error {
		must(t, "SaveCompliances", tx.SaveCompliances(e.ctx, []store.ComplianceSave{
			// ModifiedAt raises last_modified_at (tr-1) and never lowers it (tr-2).
			{TrailID: "tr-1", State: "COMPLIANT", Doc: doc1, At: t0 + 10, ArtifactStates: map[string]string{"a1": "COMPLIANT", "a3": "COMPLIANT"},
				ModifiedAt: t0 + 5},
			{TrailID: "tr-2", State: "NON-COMPLIANT", Doc: doc2, At: t0 + 11, ArtifactStates: map[string]string{"a2": "NON-COMPLIANT"},
				ModifiedAt: t0 - 5},
		}))
		// tr-2 was marked dirty again after the generation evaluated: only tr-1 comes clean.
		return tx.ClearDirtyAll(e.ctx, map[string]int64{"tr-1": starts["tr-1"].Generation, "tr-2": starts["tr-2"].Generation - 1,
			"tr-3": 0})
	})
	for id, want := range map[string]struct {
		state    string
		doc      json.RawMessage
		at       float64
		modified float64
	}{"tr-1": {"COMPLIANT", doc1, t0 + 10, t0 + 5}, "tr-2": {"NON-COMPLIANT", doc2, t0 + 11, t0}, "tr-3": {"INCOMPLETE", nil, 0, t0}} {
		got, err := e.s.TrailByID(e.ctx, id)
		must(t, "TrailByID", err)
		if got.State != want.state || got.EvaluatedAt != want.at || (want.doc != nil && !sameJSON(got.Compliance, want.doc)) ||
			got.LastModifiedAt != want.modified {
			t.Errorf("%s after SaveCompliances: state %q, evaluated %v, doc %s, modified %v", id, got.State, got.EvaluatedAt,
				got.Compliance, got.LastModifiedAt)
		}
	}
	states := map[string]string{}
	for _, list := range arts {
		for _, a := range list {
			got, err := e.s.TrailArtifacts(e.ctx, a.TrailID)
			must(t, "TrailArtifacts", err)
			for _, x := range got {
				states[x.ID] = x.State
			}
		}
	}
	if want := map[string]string{"a1": "COMPLIANT", "a2": "NON-COMPLIANT", "a3": "COMPLIANT"}; !reflect.DeepEqual(states, want) {
		t.Errorf("artifact states = %v, want %v", states, want)
	}
	checkDirty(t, e, "tr-2")
}
