package storetest

import (
	"reflect"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

func testRepos(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "other")
	repo := func(id, org, provider, ext, name string) store.Repo {
		return store.Repo{ID: id, OrgID: org, Provider: provider, ExternalID: ext, Name: name, URL: "https://x/" + name, CreatedAt: t0}
	}
	for _, r := range []store.Repo{
		repo("r1", "org-a", "github", "42", "acme/app"),
		repo("r1-again", "org-a", "github", "42", "acme/app"), // the same repo: the first stays
		repo("r2", "org-a", "gitlab", "7", "acme/app"),        // the same name elsewhere: distinct
		repo("r3", "org-a", "github", "42", "acme/renamed"),   // one id under a second name: both findable
		repo("r4", "org-b", "github", "42", "acme/app"),
	} {
		e.update(t, func(tx store.Tx) error { return tx.EnsureRepo(e.ctx, r) })
	}
	got, err := e.s.ListRepos(e.ctx, "org-a")
	must(t, "ListRepos", err)
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if !reflect.DeepEqual(ids, []string{"r1", "r2", "r3"}) {
		t.Errorf("ListRepos = %v, want r1 r2 r3", ids)
	}
	e.update(t, func(tx store.Tx) error { return tx.SetRepoTags(e.ctx, "org-a", "r2", map[string]string{"team": "a"}) })
	r, err := e.s.RepoByID(e.ctx, "org-a", "r2")
	must(t, "RepoByID", err)
	want := repo("r2", "org-a", "gitlab", "7", "acme/app")
	want.Tags = map[string]string{"team": "a"}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("RepoByID = %+v, want %+v", r, want)
	}
	_, err = e.s.RepoByID(e.ctx, "org-b", "r2")
	wantErr(t, "RepoByID of another organization", err, store.ErrNotFound)
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.SetRepoTags(e.ctx, "org-a", "nope", nil) })
	wantErr(t, "SetRepoTags unknown", err, store.ErrNotFound)
}
