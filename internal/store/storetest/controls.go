package storetest

import (
	"reflect"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

func testControls(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "other")
	v := func(n int, name, desc string) store.ControlVersion {
		v := store.ControlVersion{Version: n, Name: name, Description: desc, CreatedBy: "alice", CreatedAt: t0 + float64(n)}
		if n == 2 {
			v.Links = map[string]string{"runbook": "https://example.com/runbook", "doc": "https://example.com/doc"}
		}
		return v
	}
	put := func(org, id string, cv store.ControlVersion) {
		t.Helper()
		e.update(t, func(tx store.Tx) error { return tx.PutControlVersion(e.ctx, org, id, cv) })
	}
	put("org-a", "ctl-2", v(1, "Second", ""))
	put("org-a", "ctl-1", v(1, "First", "one"))
	put("org-a", "ctl-1", v(2, "First, renamed", ""))
	put("org-a", "ctl-3", v(1, "Third", ""))
	put("org-b", "ctl-1", v(1, "Theirs", ""))

	got, err := e.s.Control(e.ctx, "org-a", "ctl-1")
	must(t, "Control", err)
	want := store.Control{OrgID: "org-a", Identifier: "ctl-1", Tags: map[string]string{},
		Versions: []store.ControlVersion{v(1, "First", "one"), v(2, "First, renamed", "")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Control = %+v, want %+v", got, want)
	}
	if cur := got.Current(); cur.Version != 2 || cur.Name != "First, renamed" {
		t.Errorf("Current = %+v, want version 2", cur)
	}
	// A second version 1 of an existing identifier is a conflict, not a silent overwrite.
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.PutControlVersion(e.ctx, "org-a", "ctl-2", v(1, "again", "")) })
	if err == nil {
		t.Error("PutControlVersion: a second version 1 was accepted")
	}
	_, err = e.s.Control(e.ctx, "org-a", "nope")
	wantErr(t, "Control unknown", err, store.ErrNotFound)

	e.update(t, func(tx store.Tx) error { return tx.SetControlArchived(e.ctx, "org-a", "ctl-3", true) })
	e.update(t, func(tx store.Tx) error {
		return tx.SetControlTags(e.ctx, "org-a", "ctl-2", map[string]string{"owner": "sec"})
	})
	list, total, err := e.s.ListControls(e.ctx, "org-a", store.ControlFilter{})
	must(t, "ListControls", err)
	if total != 2 || len(list) != 2 || list[0].Identifier != "ctl-1" || list[1].Identifier != "ctl-2" {
		t.Fatalf("ListControls = %+v (total %d), want ctl-1, ctl-2", list, total)
	}
	if len(list[0].Versions) != 2 || list[1].Tags["owner"] != "sec" || len(list[1].Versions) != 1 {
		t.Errorf("ListControls versions and tags: %+v", list)
	}
	page, total, err := e.s.ListControls(e.ctx, "org-a", store.ControlFilter{Page: store.Page{Page: 2, PerPage: 1}})
	must(t, "ListControls page 2", err)
	if total != 2 || len(page) != 1 || page[0].Identifier != "ctl-2" || len(page[0].Versions) != 1 {
		t.Errorf("ListControls page 2 = %+v (total %d), want ctl-2", page, total)
	}
	archived, total, err := e.s.ListControls(e.ctx, "org-a", store.ControlFilter{Archived: true})
	must(t, "ListControls archived", err)
	if total != 1 || len(archived) != 1 || archived[0].Identifier != "ctl-3" || !archived[0].Archived {
		t.Errorf("ListControls archived = %+v (total %d), want ctl-3", archived, total)
	}
	e.update(t, func(tx store.Tx) error { return tx.SetControlArchived(e.ctx, "org-a", "ctl-3", false) })
	if c, err := e.s.Control(e.ctx, "org-a", "ctl-3"); err != nil || c.Archived {
		t.Errorf("after unarchive: %+v, %v", c, err)
	}
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.SetControlArchived(e.ctx, "org-a", "nope", true) })
	wantErr(t, "SetControlArchived unknown", err, store.ErrNotFound)

	// Tenancy: the other organization's control of the same identifier is its own.
	if c, err := e.s.Control(e.ctx, "org-b", "ctl-1"); err != nil || c.Current().Name != "Theirs" || len(c.Versions) != 1 {
		t.Errorf("org-b ctl-1 = %+v, %v", c, err)
	}
}
