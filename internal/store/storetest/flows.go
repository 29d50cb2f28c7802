package storetest

import (
	"reflect"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

func testUpsertFlow(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	f := store.Flow{ID: "f-1", OrgID: "org-a", Name: "web", Description: "first", Visibility: "private",
		TemplateID: "tpl-1", CreatedAt: t0, LastModifiedAt: t0}
	e.update(t, func(tx store.Tx) error {
		must(t, "PutTemplate", tx.PutTemplate(e.ctx, "tpl-1", "version: 1\n"))
		created, err := tx.UpsertFlow(e.ctx, f)
		must(t, "UpsertFlow", err)
		if !created {
			t.Error("UpsertFlow of a new flow: created = false")
		}
		// A transaction reads its own writes.
		if got, err := tx.FlowByName(e.ctx, "org-a", "web"); err != nil || got.ID != "f-1" {
			t.Errorf("tx.FlowByName = %+v, %v", got, err)
		}
		return nil
	})

	want := f
	want.Template, want.Tags = "version: 1\n", map[string]string{}
	got, err := e.s.FlowByName(e.ctx, "org-a", "web")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("FlowByName = %+v, %v; want %+v", got, err, want)
	}
	if got.Tags == nil {
		t.Error("FlowByName: Tags is nil, want an empty map")
	}

	// Upserting the same name updates in place: the ID and creation time stay.
	e.update(t, func(tx store.Tx) error {
		must(t, "PutTemplate", tx.PutTemplate(e.ctx, "tpl-2", "version: 2\n"))
		created, err := tx.UpsertFlow(e.ctx, store.Flow{ID: "f-new", OrgID: "org-a", Name: "web", Description: "second",
			Visibility: "public", TemplateID: "tpl-2", CreatedAt: t0 + 5, LastModifiedAt: t0 + 5})
		if created {
			t.Error("UpsertFlow of an existing flow: created = true")
		}
		return err
	})
	want.Description, want.Visibility, want.TemplateID, want.Template = "second", "public", "tpl-2", "version: 2\n"
	want.LastModifiedAt = t0 + 5
	got, err = e.s.FlowByID(e.ctx, "org-a", "f-1")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("FlowByID after update = %+v, %v; want %+v", got, err, want)
	}
	_, err = e.s.FlowByID(e.ctx, "org-a", "f-new")
	wantErr(t, "FlowByID of the ignored ID", err, store.ErrNotFound)
	_, err = e.s.FlowByName(e.ctx, "org-a", "nope")
	wantErr(t, "FlowByName unknown", err, store.ErrNotFound)
	_, err = e.s.FlowByName(e.ctx, "org-a", "WEB")
	wantErr(t, "FlowByName is case-sensitive", err, store.ErrNotFound)

	// Tags round-trip and are never nil, whether given or not.
	tags := map[string]string{"team": "core", "tier": "1"}
	e.update(t, func(tx store.Tx) error {
		_, err := tx.UpsertFlow(e.ctx, store.Flow{ID: "f-2", OrgID: "org-a", Name: "tagged", TemplateID: "tpl-1", Tags: tags,
			CreatedAt: t0, LastModifiedAt: t0})
		return err
	})
	got, err = e.s.FlowByID(e.ctx, "org-a", "f-2")
	if err != nil || !reflect.DeepEqual(got.Tags, tags) {
		t.Errorf("FlowByID(tagged).Tags = %v, %v; want %v", got.Tags, err, tags)
	}
	flows, _, err := e.s.ListFlows(e.ctx, "org-a", store.FlowFilter{})
	must(t, "ListFlows", err)
	for _, f := range flows {
		if f.Tags == nil {
			t.Errorf("ListFlows: flow %s has nil Tags", f.Name)
		}
	}
}

func testListFlows(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	for i, name := range []string{"alpha-web", "Alpha_API", "beta_web", "gamma", "delta", "alphaold"} {
		e.flow(t, "org-a", "f-"+string(rune('0'+i)), name)
	}
	e.update(t, func(tx store.Tx) error { return tx.ArchiveFlow(e.ctx, "org-a", "f-5", t0+1) }) // alphaold

	all := []string{"alpha-web", "Alpha_API", "beta_web", "gamma", "delta"}
	cases := []struct {
		name          string
		contains      string
		caseSensitive bool
		want          []string
	}{
		{"all live flows", "", false, all},
		{"insensitive", "ALPHA", false, []string{"alpha-web", "Alpha_API"}},
		{"sensitive lower", "alpha", true, []string{"alpha-web"}},
		{"sensitive upper", "Alpha", true, []string{"Alpha_API"}},
		{"substring in the middle", "web", false, []string{"alpha-web", "beta_web"}},
		{"underscore is literal", "_web", false, []string{"beta_web"}},
		{"underscore is literal, sensitive", "a_", true, []string{"Alpha_API", "beta_web"}},
		{"percent is literal", "%", false, nil},
		{"glob star is literal", "*", true, nil},
		{"glob class is literal", "[a]", true, nil},
		{"whole name", "gamma", true, []string{"gamma"}},
		{"no match", "zzz", false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			flows, total, err := e.s.ListFlows(e.ctx, "org-a", store.FlowFilter{NameContains: c.contains, CaseSensitive: c.caseSensitive})
			must(t, "ListFlows", err)
			checkIDSet(t, "ListFlows", flows, flowName, c.want...)
			if total != len(c.want) {
				t.Errorf("total = %d, want %d", total, len(c.want))
			}
		})
	}

	t.Run("paging", func(t *testing.T) {
		whole, _, err := e.s.ListFlows(e.ctx, "org-a", store.FlowFilter{})
		must(t, "ListFlows", err)
		var paged []store.Flow
		for page, wantLen := range []int{2, 2, 1, 0} {
			flows, total, err := e.s.ListFlows(e.ctx, "org-a", store.FlowFilter{Page: store.Page{Page: page + 1, PerPage: 2}})
			must(t, "ListFlows page", err)
			if len(flows) != wantLen || total != len(all) {
				t.Errorf("page %d: %d flows, total %d; want %d, %d", page+1, len(flows), total, wantLen, len(all))
			}
			paged = append(paged, flows...)
		}
		// Pages concatenate to the unpaged list: the order is stable.
		checkIDs(t, "pages", paged, flowID, ids(whole, flowID)...)

		flows, total, err := e.s.ListFlows(e.ctx, "org-a", store.FlowFilter{NameContains: "a", Page: store.Page{Page: 2, PerPage: 3}})
		must(t, "ListFlows filtered page", err)
		if len(flows) != 2 || total != 5 {
			t.Errorf("filtered page 2: %d flows, total %d; want 2, 5", len(flows), total)
		}
	})
}

func testRenameFlow(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.flow(t, "org-a", "f-1", "web")
	e.flow(t, "org-a", "f-2", "api")

	e.update(t, func(tx store.Tx) error { return tx.RenameFlow(e.ctx, "org-a", "f-1", "site", t0+3) })
	got, err := e.s.FlowByName(e.ctx, "org-a", "site")
	if err != nil || got.ID != "f-1" || got.LastModifiedAt != t0+3 || got.CreatedAt != t0 {
		t.Errorf("FlowByName(site) = %+v, %v; want f-1 modified at t0+3", got, err)
	}
	_, err = e.s.FlowByName(e.ctx, "org-a", "web")
	wantErr(t, "FlowByName(old name)", err, store.ErrNotFound)

	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.RenameFlow(e.ctx, "org-a", "f-1", "api", t0+4) })
	wantErr(t, "RenameFlow to a taken name", err, store.ErrConflict)
	if got, err := e.s.FlowByID(e.ctx, "org-a", "f-1"); err != nil || got.Name != "site" {
		t.Errorf("after conflict FlowByID(f-1) = %+v, %v; want name site", got, err)
	}
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.RenameFlow(e.ctx, "org-a", "nope", "x", t0+4) })
	wantErr(t, "RenameFlow unknown", err, store.ErrNotFound)

	// The old name is free again.
	e.flow(t, "org-a", "f-3", "web")
	if got, err := e.s.FlowByName(e.ctx, "org-a", "web"); err != nil || got.ID != "f-3" {
		t.Errorf("FlowByName(web) = %+v, %v; want f-3", got, err)
	}
}

func testArchiveFlow(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.flow(t, "org-a", "f-1", "web")
	e.flow(t, "org-a", "f-2", "api")

	e.update(t, func(tx store.Tx) error { return tx.ArchiveFlow(e.ctx, "org-a", "f-1", t0+2) })
	_, err := e.s.FlowByName(e.ctx, "org-a", "web")
	wantErr(t, "FlowByName(archived)", err, store.ErrNotFound)
	if got, err := e.s.FlowByID(e.ctx, "org-a", "f-1"); err != nil || !got.Archived {
		t.Errorf("FlowByID(archived) = %+v, %v; want Archived", got, err)
	}
	flows, total, err := e.s.ListFlows(e.ctx, "org-a", store.FlowFilter{})
	must(t, "ListFlows", err)
	checkIDs(t, "ListFlows after archive", flows, flowID, "f-2")
	if total != 1 {
		t.Errorf("ListFlows total = %d, want 1", total)
	}
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.ArchiveFlow(e.ctx, "org-a", "f-1", t0+3) })
	wantErr(t, "ArchiveFlow twice", err, store.ErrNotFound)

	// The name can be reused by a new flow, which does not disturb the archived one.
	e.flow(t, "org-a", "f-3", "web")
	if got, err := e.s.FlowByName(e.ctx, "org-a", "web"); err != nil || got.ID != "f-3" || got.Archived {
		t.Errorf("FlowByName(web) = %+v, %v; want live f-3", got, err)
	}
	if got, err := e.s.FlowByID(e.ctx, "org-a", "f-1"); err != nil || !got.Archived {
		t.Errorf("FlowByID(f-1) = %+v, %v; want still archived", got, err)
	}
	// Archiving the new flow too must not collide with the first archived one.
	e.update(t, func(tx store.Tx) error { return tx.ArchiveFlow(e.ctx, "org-a", "f-3", t0+4) })
	flows, _, err = e.s.ListFlows(e.ctx, "org-a", store.FlowFilter{NameContains: "web"})
	if err != nil || len(flows) != 0 {
		t.Errorf("ListFlows(web) = %v, %v; want none", flows, err)
	}
}

func testTemplates(t *testing.T, e *env) {
	e.update(t, func(tx store.Tx) error {
		must(t, "PutTemplate", tx.PutTemplate(e.ctx, "tpl-1", "version: 1\ntrail: {}\n"))
		return tx.PutTemplate(e.ctx, "tpl-1", "version: 1\ntrail: {}\n") // again, same transaction
	})
	e.update(t, func(tx store.Tx) error { return tx.PutTemplate(e.ctx, "tpl-1", "version: 1\ntrail: {}\n") })
	if got, err := e.s.Template(e.ctx, "tpl-1"); err != nil || got != "version: 1\ntrail: {}\n" {
		t.Errorf("Template = %q, %v", got, err)
	}
	_, err := e.s.Template(e.ctx, "nope")
	wantErr(t, "Template unknown", err, store.ErrNotFound)
}

func ids[T any](xs []T, id func(T) string) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, id(x))
	}
	return out
}
