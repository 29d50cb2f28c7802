package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

func testCustomTypes(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	v1 := store.CustomTypeVersion{Version: 1, Schema: `{"type":"object"}`, Rules: []string{"input.ok == true"},
		Summary:   []store.SummaryExpr{{Name: "pair", Expression: `[.a, .b] | map(select(.x == "1")) | length`}, {Name: "ok", Expression: ".ok"}},
		CreatedBy: "alice", CreatedAt: t0}
	v2 := store.CustomTypeVersion{Version: 2, Schema: `{"type":"object","required":["ok"]}`,
		Rules: []string{"input.ok == true", "input.count > 0"}, CreatedBy: "bob", CreatedAt: t0 + 1}
	e.update(t, func(tx store.Tx) error { return tx.PutCustomTypeVersion(e.ctx, "org-a", "sbom", "first", v1) })
	e.update(t, func(tx store.Tx) error { return tx.PutCustomTypeVersion(e.ctx, "org-a", "sbom", "second", v2) })
	e.update(t, func(tx store.Tx) error {
		return tx.PutCustomTypeVersion(e.ctx, "org-a", "coverage", "", store.CustomTypeVersion{Version: 1, Schema: "{}",
			Rules: []string{}, CreatedBy: "alice", CreatedAt: t0})
	})

	want := store.CustomType{OrgID: "org-a", Name: "sbom", Description: "second", Versions: []store.CustomTypeVersion{v1, v2}}
	got, err := e.s.CustomType(e.ctx, "org-a", "sbom")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("CustomType = %+v, %v; want %+v", got, err, want)
	}
	_, err = e.s.CustomType(e.ctx, "org-a", "nope")
	wantErr(t, "CustomType unknown", err, store.ErrNotFound)
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.PutCustomTypeVersion(e.ctx, "org-a", "sbom", "again", v2) })
	if err == nil {
		t.Error("PutCustomTypeVersion of an existing version succeeded")
	}
	list, err := e.s.ListCustomTypes(e.ctx, "org-a")
	must(t, "ListCustomTypes", err)
	checkIDSet(t, "ListCustomTypes", list, customTypeName, "coverage", "sbom")
	for _, ct := range list {
		if ct.Name == "sbom" && !reflect.DeepEqual(ct, want) {
			t.Errorf("ListCustomTypes entry = %+v, want %+v", ct, want)
		}
	}

	e.update(t, func(tx store.Tx) error { return tx.ArchiveCustomType(e.ctx, "org-a", "sbom") })
	got, err = e.s.CustomType(e.ctx, "org-a", "sbom")
	if err != nil || !got.Archived || len(got.Versions) != 2 {
		t.Errorf("archived CustomType = %+v, %v; want Archived with 2 versions", got, err)
	}
	list, err = e.s.ListCustomTypes(e.ctx, "org-a")
	must(t, "ListCustomTypes", err)
	checkIDSet(t, "ListCustomTypes after archive", list, customTypeName, "coverage")
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.ArchiveCustomType(e.ctx, "org-a", "nope") })
	wantErr(t, "ArchiveCustomType unknown", err, store.ErrNotFound)

	// A new version brings it back.
	v3 := store.CustomTypeVersion{Version: 3, Schema: "{}", Rules: []string{"true"}, CreatedBy: "carol", CreatedAt: t0 + 2}
	e.update(t, func(tx store.Tx) error { return tx.PutCustomTypeVersion(e.ctx, "org-a", "sbom", "third", v3) })
	got, err = e.s.CustomType(e.ctx, "org-a", "sbom")
	if err != nil || got.Archived || got.Description != "third" || !reflect.DeepEqual(got.Versions, []store.CustomTypeVersion{v1, v2, v3}) {
		t.Errorf("CustomType after new version = %+v, %v; want live with v1..v3", got, err)
	}
	list, err = e.s.ListCustomTypes(e.ctx, "org-a")
	must(t, "ListCustomTypes", err)
	checkIDSet(t, "ListCustomTypes after un-archive", list, customTypeName, "coverage", "sbom")
}

func testApplied(t *testing.T, e *env) {
	e.update(t, func(tx store.Tx) error {
		if ok, err := tx.Applied(e.ctx, "m-1"); err != nil || ok {
			t.Errorf("Applied before MarkApplied = %v, %v", ok, err)
		}
		must(t, "MarkApplied", tx.MarkApplied(e.ctx, "m-1", "tr-1", t0))
		if ok, err := tx.Applied(e.ctx, "m-1"); err != nil || !ok {
			t.Errorf("Applied in the same transaction = %v, %v", ok, err)
		}
		return nil
	})
	e.update(t, func(tx store.Tx) error {
		if ok, err := tx.Applied(e.ctx, "m-1"); err != nil || !ok {
			t.Errorf("Applied after commit = %v, %v", ok, err)
		}
		if ok, err := tx.Applied(e.ctx, "m-2"); err != nil || ok {
			t.Errorf("Applied(m-2) = %v, %v", ok, err)
		}
		return nil
	})
	err := e.s.Update(e.ctx, func(tx store.Tx) error { return tx.MarkApplied(e.ctx, "m-1", "tr-1", t0+1) })
	wantErr(t, "MarkApplied twice", err, store.ErrConflict)

	// The batch forms: 70 marks (more than one prepared size) and a lookup among them.
	var marks []store.AppliedMark
	var ids []string
	for i := range 70 {
		id := fmt.Sprint("b-", i)
		marks = append(marks, store.AppliedMark{ID: id, TrailID: "tr-1", At: t0})
		ids = append(ids, id)
	}
	e.update(t, func(tx store.Tx) error { return tx.MarkAppliedAll(e.ctx, marks) })
	e.update(t, func(tx store.Tx) error {
		got, err := tx.AppliedAmong(e.ctx, append(ids, "m-1", "m-2", "nope"))
		must(t, "AppliedAmong", err)
		if len(got) != 71 || !got["b-0"] || !got["b-69"] || !got["m-1"] || got["m-2"] || got["nope"] {
			t.Errorf("AppliedAmong = %d entries %v", len(got), got)
		}
		if none, err := tx.AppliedAmong(e.ctx, nil); err != nil || len(none) != 0 {
			t.Errorf("AppliedAmong(nil) = %v, %v", none, err)
		}
		return nil
	})
	if ok, err := e.s.Visible(e.ctx, ids[:3]); err != nil || !ok {
		t.Errorf("Visible after MarkAppliedAll = %v, %v", ok, err)
	}
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.MarkAppliedAll(e.ctx, marks[:2]) })
	wantErr(t, "MarkAppliedAll twice", err, store.ErrConflict)
}

func testDirty(t *testing.T, e *env) {
	var g1, g2 int64
	e.update(t, func(tx store.Tx) error {
		if g, err := tx.DirtyGeneration(e.ctx, "tr-1"); err != nil || g != 0 {
			t.Errorf("DirtyGeneration of a clean trail = %d, %v; want 0", g, err)
		}
		must(t, "MarkDirty", tx.MarkDirty(e.ctx, "tr-1"))
		var err error
		g1, err = tx.DirtyGeneration(e.ctx, "tr-1")
		must(t, "DirtyGeneration", err)
		return tx.MarkDirty(e.ctx, "tr-2")
	})
	if g1 == 0 {
		t.Fatal("DirtyGeneration after MarkDirty = 0")
	}
	checkDirty(t, e, "tr-1", "tr-2")

	e.update(t, func(tx store.Tx) error {
		must(t, "MarkDirty", tx.MarkDirty(e.ctx, "tr-1"))
		var err error
		g2, err = tx.DirtyGeneration(e.ctx, "tr-1")
		return err
	})
	if g2 == g1 {
		t.Fatalf("DirtyGeneration did not change on MarkDirty: %d", g2)
	}
	// Clearing the generation evaluated before the second MarkDirty leaves the trail dirty.
	// Dirt older than a generation: tr-1 was dirtied again at g2, after tr-2's mark.
	before := func(gen int64, want ...string) {
		t.Helper()
		got, err := e.s.DirtyTrailsBefore(e.ctx, gen)
		must(t, "DirtyTrailsBefore", err)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("DirtyTrailsBefore(%d) = %q, want %q", gen, got, want)
		}
	}
	before(g1)
	before(g2, "tr-2")
	before(g2+1, "tr-1", "tr-2")
	e.update(t, func(tx store.Tx) error { return tx.ClearDirty(e.ctx, "tr-1", g1) })
	checkDirty(t, e, "tr-1", "tr-2")
	e.update(t, func(tx store.Tx) error {
		if g, err := tx.DirtyGeneration(e.ctx, "tr-1"); err != nil || g != g2 {
			t.Errorf("DirtyGeneration after stale clear = %d, %v; want %d", g, err, g2)
		}
		return tx.ClearDirty(e.ctx, "tr-1", g2)
	})
	checkDirty(t, e, "tr-2")
	e.update(t, func(tx store.Tx) error {
		if g, err := tx.DirtyGeneration(e.ctx, "tr-1"); err != nil || g != 0 {
			t.Errorf("DirtyGeneration after clear = %d, %v; want 0", g, err)
		}
		// Clearing a clean trail is not an error.
		return tx.ClearDirty(e.ctx, "tr-1", g2)
	})
	e.update(t, func(tx store.Tx) error {
		g, err := tx.DirtyGeneration(e.ctx, "tr-2")
		must(t, "DirtyGeneration", err)
		return tx.ClearDirty(e.ctx, "tr-2", g)
	})
	checkDirty(t, e)
}

func checkDirty(t *testing.T, e *env, want ...string) {
	t.Helper()
	got, err := e.s.DirtyTrails(e.ctx)
	must(t, "DirtyTrails", err)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("DirtyTrails = %q, want %q", got, want)
	}
}

func testVisible(t *testing.T, e *env) {
	visible := func(want bool, ids ...string) {
		t.Helper()
		if got, err := e.s.Visible(e.ctx, ids); err != nil || got != want {
			t.Errorf("Visible(%q) = %v, %v; want %v", ids, got, err, want)
		}
	}
	visible(true)
	if got, err := e.s.Visible(e.ctx, []string{}); err != nil || !got {
		t.Errorf("Visible(empty) = %v, %v; want true", got, err)
	}
	visible(false, "m-1")

	var gen int64
	e.update(t, func(tx store.Tx) error {
		must(t, "MarkApplied", tx.MarkApplied(e.ctx, "m-1", "tr-1", t0))
		must(t, "MarkApplied", tx.MarkApplied(e.ctx, "m-2", "tr-2", t0))
		must(t, "MarkApplied", tx.MarkApplied(e.ctx, "m-flow", "", t0)) // touched no trail
		must(t, "MarkDirty", tx.MarkDirty(e.ctx, "tr-1"))
		must(t, "MarkDirty", tx.MarkDirty(e.ctx, "tr-2"))
		var err error
		gen, err = tx.DirtyGeneration(e.ctx, "tr-1")
		return err
	})
	visible(false, "m-1") // applied, but its trail is not evaluated yet
	visible(true, "m-flow")
	visible(false, "m-flow", "m-1")

	e.update(t, func(tx store.Tx) error { return tx.ClearDirty(e.ctx, "tr-1", gen) })
	visible(true, "m-1")
	visible(true, "m-1", "m-flow")
	visible(true, "m-1", "m-1") // a repeated ID is still one applied message
	visible(false, "m-1", "m-2")
	visible(false, "m-1", "m-unknown")

	// Many messages, which a store may ask about in parts: one not visible anywhere hides them.
	var many []string
	e.update(t, func(tx store.Tx) error {
		for i := range 150 {
			id := fmt.Sprintf("m-many-%03d", i)
			many = append(many, id)
			must(t, "MarkApplied", tx.MarkApplied(e.ctx, id, "", t0))
		}
		return nil
	})
	visible(true, many...)
	visible(false, append([]string{"m-2"}, many...)...)                     // sorts first
	visible(false, append(slices.Clone(many), "m-unknown", "m-zz-late")...) // sorts last

	// New dirt on the trail hides the earlier message again until it is evaluated.
	e.update(t, func(tx store.Tx) error { return tx.MarkDirty(e.ctx, "tr-1") })
	visible(false, "m-1")
	e.update(t, func(tx store.Tx) error {
		g, err := tx.DirtyGeneration(e.ctx, "tr-1")
		must(t, "DirtyGeneration", err)
		must(t, "ClearDirty", tx.ClearDirty(e.ctx, "tr-1", g))
		g, err = tx.DirtyGeneration(e.ctx, "tr-2")
		must(t, "DirtyGeneration", err)
		return tx.ClearDirty(e.ctx, "tr-2", g)
	})
	visible(true, "m-1", "m-2", "m-flow")
}

// testVisibleNotStarved: as the evaluator writes them (dirt, then the applied mark), a message
// is visible once an evaluation at its generation is saved, even if its trail was dirtied again
// meanwhile and never becomes clean.
func testVisibleNotStarved(t *testing.T, e *env) {
	visible := func(want bool, ids ...string) {
		t.Helper()
		if got, err := e.s.Visible(e.ctx, ids); err != nil || got != want {
			t.Errorf("Visible(%q) = %v, %v; want %v", ids, got, err, want)
		}
	}
	apply := func(id, trail string) (gen int64) {
		e.update(t, func(tx store.Tx) error {
			must(t, "MarkDirty", tx.MarkDirtyAll(e.ctx, []string{trail}))
			must(t, "MarkApplied", tx.MarkAppliedAll(e.ctx, []store.AppliedMark{{ID: id, TrailID: trail, At: t0}}))
			var err error
			gen, err = tx.DirtyGeneration(e.ctx, trail)
			return err
		})
		return gen
	}
	clear := func(gens map[string]int64) {
		e.update(t, func(tx store.Tx) error { return tx.ClearDirtyAll(e.ctx, gens) })
	}
	g1 := apply("m-1", "tr-1")
	other := apply("m-other", "tr-2")
	g2 := apply("m-2", "tr-1") // the evaluation that read g1 is under way
	visible(false, "m-1")
	clear(map[string]int64{"tr-1": g1, "tr-2": other}) // one trail cleared, one dirtied again
	checkDirty(t, e, "tr-1")
	visible(true, "m-1", "m-other")
	visible(false, "m-2")
	g3 := apply("m-3", "tr-1")
	clear(map[string]int64{"tr-1": g1}) // a late, older evaluation changes nothing
	visible(true, "m-1")
	visible(false, "m-2")
	clear(map[string]int64{"tr-1": g2})
	visible(true, "m-1", "m-2")
	visible(false, "m-3")
	checkDirty(t, e, "tr-1")
	clear(map[string]int64{"tr-1": g3})
	checkDirty(t, e)
	visible(true, "m-1", "m-2", "m-3", "m-other")
	// Dirt after the trail was clean hides nothing applied before.
	apply("m-4", "tr-1")
	visible(true, "m-1", "m-2", "m-3")
	visible(false, "m-4")
}

// testPendingEvaluations: the dirty trails of an organization with their generations, and
// whether trails were evaluated at given generations.
func testPendingEvaluations(t *testing.T, e *env) {
	e.update(t, func(tx store.Tx) error {
		writeEverything(e.ctx, t, tx, "org-1", "a") // trail tr-a, dirty
		writeEverything(e.ctx, t, tx, "org-1", "b")
		writeEverything(e.ctx, t, tx, "org-2", "c")
		return nil
	})
	pending := func(org string) map[string]int64 {
		t.Helper()
		list, err := e.s.PendingEvaluations(e.ctx, org)
		must(t, "PendingEvaluations", err)
		out := map[string]int64{}
		for _, d := range list {
			if org != "" && d.OrgID != org {
				t.Errorf("PendingEvaluations(%q) lists %+v", org, d)
			}
			out[d.TrailID] = d.Generation
		}
		return out
	}
	evaluated := func(want bool, gens map[string]int64) {
		t.Helper()
		if got, err := e.s.Evaluated(e.ctx, gens); err != nil || got != want {
			t.Errorf("Evaluated(%v) = %v, %v; want %v", gens, got, err, want)
		}
	}
	one := pending("org-1")
	if len(one) != 2 || one["tr-a"] == 0 || one["tr-b"] == 0 {
		t.Fatalf("PendingEvaluations(org-1) = %v", one)
	}
	if all := pending(""); len(all) != 3 || all["tr-c"] == 0 {
		t.Fatalf("PendingEvaluations() = %v", all)
	}
	evaluated(true, nil)
	evaluated(false, one)
	evaluated(true, map[string]int64{"tr-unknown": 5}) // no dirt: clean

	// tr-a is evaluated at its generation but dirtied again meanwhile; tr-b is cleared.
	e.update(t, func(tx store.Tx) error { return tx.MarkDirtyAll(e.ctx, []string{"tr-a"}) })
	e.update(t, func(tx store.Tx) error { return tx.ClearDirtyAll(e.ctx, one) })
	evaluated(true, one)
	evaluated(true, map[string]int64{"tr-b": one["tr-b"]})
	again := pending("org-1")
	if len(again) != 1 || again["tr-a"] <= one["tr-a"] {
		t.Fatalf("PendingEvaluations(org-1) after a clear = %v", again)
	}
	evaluated(false, again)
	evaluated(false, map[string]int64{"tr-a": again["tr-a"], "tr-b": one["tr-b"]})

	// Many trails, which a store may ask about in parts: one behind anywhere is behind.
	many := map[string]int64{}
	for i := range 150 {
		many[fmt.Sprintf("tr-none-%03d", i)] = 1 // no dirt: clean
	}
	evaluated(true, many)
	many["tr-a"] = again["tr-a"] // sorts first
	evaluated(false, many)
	delete(many, "tr-a")
	e.update(t, func(tx store.Tx) error {
		writeEverything(e.ctx, t, tx, "org-1", "zz") // trail tr-zz, dirty: sorts last
		return nil
	})
	many["tr-zz"] = pending("org-1")["tr-zz"]
	evaluated(false, many)
}

var errBoom = errors.New("boom")

// writeEverything writes one of each kind of record, all named after tag.
func writeEverything(ctx context.Context, t *testing.T, tx store.Tx, orgID, tag string) {
	t.Helper()
	f := store.Flow{ID: "f-" + tag, OrgID: orgID, Name: "flow-" + tag, TemplateID: "tpl-" + tag, CreatedAt: t0, LastModifiedAt: t0}
	tr := store.Trail{ID: "tr-" + tag, OrgID: orgID, FlowID: f.ID, Name: "trail-" + tag, TemplateID: f.TemplateID,
		CreatedBy: "alice", CreatedAt: t0, LastModifiedAt: t0}
	must(t, "PutTemplate", tx.PutTemplate(ctx, f.TemplateID, "version: 1\n"))
	_, err := tx.UpsertFlow(ctx, f)
	must(t, "UpsertFlow", err)
	_, err = tx.UpsertTrail(ctx, tr)
	must(t, "UpsertTrail", err)
	must(t, "InsertArtifact", tx.InsertArtifact(ctx, store.Artifact{ID: "a-" + tag, OrgID: orgID, FlowID: f.ID, TrailID: tr.ID,
		Fingerprint: fp("ab"), GitCommit: "c-" + tag, Report: json.RawMessage(`{}`), CreatedAt: t0}))
	must(t, "InsertAttestation", tx.InsertAttestation(ctx, newAttestation(tr, "at-"+tag, "unit", t0)))
	must(t, "AppendTrailEvent", tx.AppendTrailEvent(ctx, store.TrailEvent{TrailID: tr.ID, Doc: json.RawMessage(`{"n":1}`)}, t0))
	must(t, "MarkApplied", tx.MarkApplied(ctx, "m-"+tag, tr.ID, t0))
	must(t, "MarkDirty", tx.MarkDirty(ctx, tr.ID))
	must(t, "PutCustomTypeVersion", tx.PutCustomTypeVersion(ctx, orgID, "type-"+tag, "",
		store.CustomTypeVersion{Version: 1, Schema: "{}", CreatedAt: t0}))
	// Read-your-writes inside the transaction.
	if got, err := tx.TrailByName(ctx, f.ID, tr.Name); err != nil || got.ID != tr.ID {
		t.Errorf("tx.TrailByName = %+v, %v", got, err)
	}
}

// checkNothingWritten fails if any record written by writeEverything(tag) is visible.
func checkNothingWritten(t *testing.T, e *env, orgID, tag string) {
	t.Helper()
	_, err := e.s.Template(e.ctx, "tpl-"+tag)
	wantErr(t, "Template", err, store.ErrNotFound)
	_, err = e.s.FlowByName(e.ctx, orgID, "flow-"+tag)
	wantErr(t, "FlowByName", err, store.ErrNotFound)
	_, err = e.s.TrailByID(e.ctx, "tr-"+tag)
	wantErr(t, "TrailByID", err, store.ErrNotFound)
	if arts, err := e.s.TrailArtifacts(e.ctx, "tr-"+tag); err != nil || len(arts) != 0 {
		t.Errorf("TrailArtifacts = %v, %v; want none", arts, err)
	}
	_, err = e.s.AttestationByID(e.ctx, orgID, "at-"+tag)
	wantErr(t, "AttestationByID", err, store.ErrNotFound)
	if evs, err := e.s.TrailEvents(e.ctx, "tr-"+tag); err != nil || len(evs) != 0 {
		t.Errorf("TrailEvents = %v, %v; want none", evs, err)
	}
	_, err = e.s.CustomType(e.ctx, orgID, "type-"+tag)
	wantErr(t, "CustomType", err, store.ErrNotFound)
	if dirty, err := e.s.DirtyTrails(e.ctx); err != nil || slices.Contains(dirty, "tr-"+tag) {
		t.Errorf("DirtyTrails = %v, %v; want no tr-%s", dirty, err, tag)
	}
	e.update(t, func(tx store.Tx) error {
		if ok, err := tx.Applied(e.ctx, "m-"+tag); err != nil || ok {
			t.Errorf("Applied(m-%s) = %v, %v; want false", tag, ok, err)
		}
		return nil
	})
}

func testRollback(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := e.flow(t, "org-a", "f-1", "web")
	tr := e.trail(t, f, "tr-1", "one", t0)

	t.Run("callback error", func(t *testing.T) {
		err := e.s.Update(e.ctx, func(tx store.Tx) error {
			writeEverything(e.ctx, t, tx, "org-a", "x")
			// Changes to existing rows are undone as well.
			must(t, "RenameFlow", tx.RenameFlow(e.ctx, "org-a", f.ID, "renamed", t0+1))
			must(t, "SaveCompliance", tx.SaveCompliance(e.ctx, tr.ID, "COMPLIANT", json.RawMessage(`{}`), t0+1, nil))
			return fmt.Errorf("wrapped: %w", errBoom)
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("Update = %v, want the callback's error", err)
		}
		checkNothingWritten(t, e, "org-a", "x")
		if got, err := e.s.FlowByID(e.ctx, "org-a", f.ID); err != nil || got.Name != "web" {
			t.Errorf("FlowByID = %+v, %v; want the old name", got, err)
		}
		if got, err := e.s.TrailByID(e.ctx, tr.ID); err != nil || got.State != "INCOMPLETE" || got.EvaluatedAt != 0 {
			t.Errorf("TrailByID = %+v, %v; want never evaluated", got, err)
		}
	})

	t.Run("store error", func(t *testing.T) {
		e.update(t, func(tx store.Tx) error { return tx.MarkApplied(e.ctx, "m-dup", "", t0) })
		err := e.s.Update(e.ctx, func(tx store.Tx) error {
			writeEverything(e.ctx, t, tx, "org-a", "y")
			return tx.MarkApplied(e.ctx, "m-dup", "", t0) // a redelivery racing another
		})
		wantErr(t, "Update", err, store.ErrConflict)
		checkNothingWritten(t, e, "org-a", "y")
	})

	t.Run("commit after rollback", func(t *testing.T) {
		e.update(t, func(tx store.Tx) error {
			writeEverything(e.ctx, t, tx, "org-a", "x") // the same names are free
			return nil
		})
		if got, err := e.s.TrailByID(e.ctx, "tr-x"); err != nil || got.Name != "trail-x" {
			t.Errorf("TrailByID(tr-x) = %+v, %v", got, err)
		}
	})
}

// testRollbackOnPanic checks that a panicking callback neither commits nor wedges the store.
func testRollbackOnPanic(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	func() {
		defer func() {
			if r := recover(); r != errBoom {
				t.Errorf("recovered %v, want the callback's panic", r)
			}
		}()
		_ = e.s.Update(e.ctx, func(tx store.Tx) error {
			writeEverything(e.ctx, t, tx, "org-a", "p")
			panic(errBoom)
		})
	}()
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	err := e.s.Update(ctx, func(tx store.Tx) error {
		return tx.MarkApplied(ctx, "m-after", "", t0)
	})
	if err != nil {
		t.Fatalf("Update after a panic: %v", err)
	}
	checkNothingWritten(t, e, "org-a", "p")
}

func testTenancy(t *testing.T, e *env) {
	// Two organizations with identically named records.
	for _, org := range []string{"a", "b"} {
		o := e.org(t, "org-"+org, "org "+org)
		f := e.flow(t, o.ID, "f-"+org, "web")
		tr := e.trail(t, f, "tr-"+org, "main", t0)
		e.artifact(t, tr, "art-"+org, fp("abcdef"), "c1", "acme/web", t0)
		e.attestation(t, tr, "at-"+org, "unit", t0)
		e.update(t, func(tx store.Tx) error {
			must(t, "PutCustomTypeVersion", tx.PutCustomTypeVersion(e.ctx, o.ID, "sbom", "of "+org,
				store.CustomTypeVersion{Version: 1, Schema: "{}", CreatedAt: t0}))
			return tx.PutCustomTypeVersion(e.ctx, o.ID, "only-"+org, "", store.CustomTypeVersion{Version: 1, Schema: "{}", CreatedAt: t0})
		})
	}
	must(t, "CreateUser", e.s.CreateUser(e.ctx, store.User{ID: "u-1", Name: "alice", CreatedAt: t0}))
	must(t, "AddMember", e.s.AddMember(e.ctx, "u-1", "org-a", store.RoleAdmin))

	const a, b = "org-a", "org-b"
	_, err := e.s.MemberRole(e.ctx, "u-1", b)
	wantErr(t, "MemberRole", err, store.ErrNotFound)
	if orgs, err := e.s.UserOrgs(e.ctx, "u-1"); err != nil || len(orgs) != 1 || orgs[0].ID != a {
		t.Errorf("UserOrgs = %v, %v; want org-a only", orgs, err)
	}

	if f, err := e.s.FlowByName(e.ctx, a, "web"); err != nil || f.ID != "f-a" {
		t.Errorf("FlowByName(a) = %+v, %v", f, err)
	}
	if f, err := e.s.FlowByName(e.ctx, b, "web"); err != nil || f.ID != "f-b" {
		t.Errorf("FlowByName(b) = %+v, %v", f, err)
	}
	_, err = e.s.FlowByID(e.ctx, a, "f-b")
	wantErr(t, "FlowByID", err, store.ErrNotFound)
	flows, total, err := e.s.ListFlows(e.ctx, a, store.FlowFilter{NameContains: "web"})
	must(t, "ListFlows", err)
	checkIDs(t, "ListFlows", flows, flowID, "f-a")
	if total != 1 {
		t.Errorf("ListFlows total = %d", total)
	}

	trails, _, err := e.s.ListTrails(e.ctx, a, store.TrailFilter{})
	must(t, "ListTrails", err)
	checkIDs(t, "ListTrails", trails, trailID, "tr-a")
	trails, _, err = e.s.ListTrails(e.ctx, a, store.TrailFilter{FlowIDs: []string{"f-a", "f-b"}, Fingerprint: fp("abcdef")})
	must(t, "ListTrails", err)
	checkIDs(t, "ListTrails by flows and fingerprint", trails, trailID, "tr-a")

	arts, err := e.s.ArtifactsByPrefix(e.ctx, a, "", "abcde", 10)
	must(t, "ArtifactsByPrefix", err)
	checkIDs(t, "ArtifactsByPrefix", arts, artifactID, "art-a")
	arts, err = e.s.ArtifactsByCommit(e.ctx, a, "", "c1")
	must(t, "ArtifactsByCommit", err)
	checkIDs(t, "ArtifactsByCommit", arts, artifactID, "art-a")
	arts, total, err = e.s.ListArtifacts(e.ctx, a, store.ArtifactFilter{RepoName: "acme/web"})
	must(t, "ListArtifacts", err)
	checkIDs(t, "ListArtifacts", arts, artifactID, "art-a")
	if total != 1 {
		t.Errorf("ListArtifacts total = %d", total)
	}

	_, err = e.s.AttestationByID(e.ctx, a, "at-b")
	wantErr(t, "AttestationByID", err, store.ErrNotFound)
	atts, total, err := e.s.ListAttestations(e.ctx, a, store.Page{})
	must(t, "ListAttestations", err)
	checkIDs(t, "ListAttestations", atts, attestationID, "at-a")
	if total != 1 {
		t.Errorf("ListAttestations total = %d", total)
	}

	if ct, err := e.s.CustomType(e.ctx, a, "sbom"); err != nil || ct.Description != "of a" || ct.OrgID != a {
		t.Errorf("CustomType(a, sbom) = %+v, %v", ct, err)
	}
	_, err = e.s.CustomType(e.ctx, a, "only-b")
	wantErr(t, "CustomType", err, store.ErrNotFound)
	cts, err := e.s.ListCustomTypes(e.ctx, a)
	must(t, "ListCustomTypes", err)
	checkIDSet(t, "ListCustomTypes", cts, customTypeName, "only-a", "sbom")

	// Writes addressed with the wrong organization change nothing.
	for name, fn := range map[string]func(tx store.Tx) error{
		"RenameFlow":        func(tx store.Tx) error { return tx.RenameFlow(e.ctx, a, "f-b", "x", t0) },
		"ArchiveFlow":       func(tx store.Tx) error { return tx.ArchiveFlow(e.ctx, a, "f-b", t0) },
		"ArchiveCustomType": func(tx store.Tx) error { return tx.ArchiveCustomType(e.ctx, a, "only-b") },
	} {
		wantErr(t, name, e.s.Update(e.ctx, fn), store.ErrNotFound)
	}
	if f, err := e.s.FlowByID(e.ctx, b, "f-b"); err != nil || f.Name != "web" || f.Archived {
		t.Errorf("FlowByID(b) = %+v, %v; want untouched", f, err)
	}
	if ct, err := e.s.CustomType(e.ctx, b, "only-b"); err != nil || ct.Archived {
		t.Errorf("CustomType(b, only-b) = %+v, %v; want live", ct, err)
	}
	// Archiving a's custom type leaves b's of the same name alone.
	e.update(t, func(tx store.Tx) error { return tx.ArchiveCustomType(e.ctx, a, "sbom") })
	if ct, err := e.s.CustomType(e.ctx, b, "sbom"); err != nil || ct.Archived {
		t.Errorf("CustomType(b, sbom) = %+v, %v; want live", ct, err)
	}
}

// testConcurrentUpdates runs evaluator-like transactions from several goroutines at once, with
// a reader alongside, and checks that nothing is lost.
func testConcurrentUpdates(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := e.flow(t, "org-a", "f-1", "web")
	tr := e.trail(t, f, "tr-1", "one", t0)
	const workers, txPerWorker, perTx = 6, 4, 3

	start := make(chan struct{})
	done := make(chan struct{})
	var wg, readers sync.WaitGroup
	readers.Go(func() {
		<-start
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, _, err := e.s.ListAttestations(e.ctx, "org-a", store.Page{PerPage: 5}); err != nil {
				t.Errorf("ListAttestations during writes: %v", err)
				return
			}
			if _, err := e.s.Visible(e.ctx, []string{"m-0-0"}); err != nil {
				t.Errorf("Visible during writes: %v", err)
				return
			}
		}
	})
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range txPerWorker {
				msg := fmt.Sprintf("m-%d-%d", w, i)
				err := e.s.Update(e.ctx, func(tx store.Tx) error {
					if ok, err := tx.Applied(e.ctx, msg); err != nil || ok {
						return fmt.Errorf("Applied(%s) = %v, %v", msg, ok, err)
					}
					for k := range perTx {
						a := newAttestation(tr, fmt.Sprintf("at-%d-%d-%d", w, i, k), "unit", t0+float64(i))
						if err := tx.InsertAttestation(e.ctx, a); err != nil {
							return err
						}
					}
					if err := tx.TouchTrail(e.ctx, tr.ID, t0+float64(i)); err != nil {
						return err
					}
					if err := tx.MarkDirty(e.ctx, tr.ID); err != nil {
						return err
					}
					return tx.MarkApplied(e.ctx, msg, tr.ID, t0)
				})
				if err != nil {
					t.Errorf("worker %d tx %d: %v", w, i, err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(done)
	readers.Wait()

	const n = workers * txPerWorker * perTx
	atts, total, err := e.s.ListAttestations(e.ctx, "org-a", store.Page{})
	must(t, "ListAttestations", err)
	if total != n || len(atts) != n {
		t.Errorf("ListAttestations = %d rows, total %d; want %d", len(atts), total, n)
	}
	atts, err = e.s.TrailAttestations(e.ctx, tr.ID)
	must(t, "TrailAttestations", err)
	seen := map[string]bool{}
	for _, a := range atts {
		seen[a.ID] = true
	}
	if len(seen) != n {
		t.Errorf("TrailAttestations: %d distinct, want %d", len(seen), n)
	}
	// The trail was left dirty, every message is recorded, and MarkDirty still advances.
	e.update(t, func(tx store.Tx) error {
		g1, err := tx.DirtyGeneration(e.ctx, tr.ID)
		must(t, "DirtyGeneration", err)
		must(t, "MarkDirty", tx.MarkDirty(e.ctx, tr.ID))
		g2, err := tx.DirtyGeneration(e.ctx, tr.ID)
		must(t, "DirtyGeneration", err)
		if g1 == 0 || g2 == g1 {
			t.Errorf("DirtyGeneration = %d then %d", g1, g2)
		}
		for w := range workers {
			for i := range txPerWorker {
				if ok, err := tx.Applied(e.ctx, fmt.Sprintf("m-%d-%d", w, i)); err != nil || !ok {
					t.Errorf("Applied(m-%d-%d) = %v, %v", w, i, ok, err)
				}
			}
		}
		return tx.ClearDirty(e.ctx, tr.ID, g2)
	})
	checkDirty(t, e)
}

// testLockTrails: LockTrails answers the existing trails among those asked, each with its dirt
// generation (0 when clean), and a transaction that gives way still commits what it wrote when
// nothing stood in its way.
func testLockTrails(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := e.flow(t, "org-a", "flow-1", "app")
	a := e.trail(t, f, "trail-b", "b", t0)
	b := e.trail(t, f, "trail-a", "a", t0)
	var gen int64
	e.update(t, func(tx store.Tx) error {
		must(t, "MarkDirty", tx.MarkDirty(e.ctx, a.ID))
		var err error
		gen, err = tx.DirtyGeneration(e.ctx, a.ID)
		return err
	})
	e.update(t, func(tx store.Tx) error {
		must(t, "GiveWay", tx.GiveWay(e.ctx))
		got, err := tx.LockTrails(e.ctx, []string{a.ID, "no-such-trail", b.ID, a.ID})
		must(t, "LockTrails", err)
		if ids, want := slices.Sorted(maps.Keys(got)), []string{"trail-a", "trail-b"}; !reflect.DeepEqual(ids, want) {
			t.Errorf("LockTrails = %v, want %v", ids, want)
		}
		if got[a.ID] != gen || got[b.ID] != 0 {
			t.Errorf("LockTrails generations = %v, want %s: %d (dirty), %s: 0 (clean)", got, a.ID, gen, b.ID)
		}
		if got, err := tx.LockTrails(e.ctx, nil); err != nil || len(got) != 0 {
			t.Errorf("LockTrails(nil) = %v, %v", got, err)
		}
		return tx.SaveCompliance(e.ctx, a.ID, "COMPLIANT", []byte(`{}`), t0+1, nil)
	})
	got, err := e.s.TrailByName(e.ctx, f.ID, "b")
	must(t, "TrailByName", err)
	if got.State != "COMPLIANT" {
		t.Errorf("state after a transaction that gave way = %q, want COMPLIANT", got.State)
	}
}
