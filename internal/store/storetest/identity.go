package storetest

import (
	"bytes"
	"crypto/sha256"
	"reflect"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

func testOrgs(t *testing.T, e *env) {
	acme := store.Org{ID: "org-a", Name: "acme", Public: true, CreatedAt: t0 + 0.5}
	beta := store.Org{ID: "org-b", Name: "beta", Public: false, CreatedAt: t0}
	for _, o := range []store.Org{acme, beta} {
		must(t, "CreateOrg", e.s.CreateOrg(e.ctx, o))
	}
	for _, want := range []store.Org{acme, beta} {
		got, err := e.s.OrgByName(e.ctx, want.Name)
		if err != nil || got != want {
			t.Errorf("OrgByName(%q) = %+v, %v; want %+v", want.Name, got, err, want)
		}
		got, err = e.s.OrgByID(e.ctx, want.ID)
		if err != nil || got != want {
			t.Errorf("OrgByID(%q) = %+v, %v; want %+v", want.ID, got, err, want)
		}
	}

	_, err := e.s.OrgByName(e.ctx, "nope")
	wantErr(t, "OrgByName unknown", err, store.ErrNotFound)
	_, err = e.s.OrgByID(e.ctx, "nope")
	wantErr(t, "OrgByID unknown", err, store.ErrNotFound)
	_, err = e.s.OrgByName(e.ctx, "ACME")
	wantErr(t, "OrgByName is case-sensitive", err, store.ErrNotFound)

	err = e.s.CreateOrg(e.ctx, store.Org{ID: "org-c", Name: "acme", CreatedAt: t0})
	wantErr(t, "CreateOrg duplicate name", err, store.ErrConflict)
	if got, _ := e.s.OrgByName(e.ctx, "acme"); got != acme {
		t.Errorf("after conflict OrgByName(acme) = %+v, want %+v", got, acme)
	}
}

func testUsersAndMemberships(t *testing.T, e *env) {
	zeta, acme := e.org(t, "org-z", "zeta"), e.org(t, "org-a", "acme")
	e.org(t, "org-m", "mid")
	alice := store.User{ID: "u-1", Name: "alice", DisplayName: "Alice Example", CreatedAt: t0}
	must(t, "CreateUser", e.s.CreateUser(e.ctx, alice))
	if got, err := e.s.UserByID(e.ctx, alice.ID); err != nil || got != alice {
		t.Errorf("UserByID = %+v, %v; want %+v", got, err, alice)
	}
	_, err := e.s.UserByID(e.ctx, "nope")
	wantErr(t, "UserByID unknown", err, store.ErrNotFound)
	err = e.s.CreateUser(e.ctx, store.User{ID: "u-2", Name: "alice", CreatedAt: t0})
	wantErr(t, "CreateUser duplicate name", err, store.ErrConflict)

	must(t, "AddMember", e.s.AddMember(e.ctx, alice.ID, zeta.ID, store.RoleMember))
	must(t, "AddMember", e.s.AddMember(e.ctx, alice.ID, acme.ID, store.RoleReader))
	if r, err := e.s.MemberRole(e.ctx, alice.ID, acme.ID); err != nil || r != store.RoleReader {
		t.Errorf("MemberRole = %q, %v; want reader", r, err)
	}
	// Adding again changes the role rather than failing or duplicating.
	must(t, "AddMember again", e.s.AddMember(e.ctx, alice.ID, acme.ID, store.RoleAdmin))
	if r, err := e.s.MemberRole(e.ctx, alice.ID, acme.ID); err != nil || r != store.RoleAdmin {
		t.Errorf("MemberRole after second AddMember = %q, %v; want admin", r, err)
	}
	if r, err := e.s.MemberRole(e.ctx, alice.ID, zeta.ID); err != nil || r != store.RoleMember {
		t.Errorf("MemberRole(zeta) = %q, %v; want member", r, err)
	}
	_, err = e.s.MemberRole(e.ctx, alice.ID, "org-m")
	wantErr(t, "MemberRole of a non-member", err, store.ErrNotFound)

	// The default organization is empty until chosen, then kept.
	e.identity(t, func(tx store.IdentityTx) error { return tx.SetDefaultOrg(e.ctx, alice.ID, zeta.ID) })
	if got, err := e.s.UserByName(e.ctx, "alice"); err != nil || got.DefaultOrgID != zeta.ID {
		t.Errorf("after SetDefaultOrg UserByName = %+v, %v; want default %s", got, err, zeta.ID)
	}
	err = e.s.UpdateIdentities(e.ctx, func(tx store.IdentityTx) error { return tx.SetDefaultOrg(e.ctx, "nope", zeta.ID) })
	wantErr(t, "SetDefaultOrg of an unknown user", err, store.ErrNotFound)

	orgs, err := e.s.UserOrgs(e.ctx, alice.ID)
	must(t, "UserOrgs", err)
	checkIDSet(t, "UserOrgs", orgs, orgID, "org-a", "org-z")
	for _, o := range orgs {
		if want := map[string]store.Org{acme.ID: acme, zeta.ID: zeta}[o.ID]; o != want {
			t.Errorf("UserOrgs entry = %+v, want %+v", o, want)
		}
	}
	orgs, err = e.s.UserOrgs(e.ctx, "nobody")
	if err != nil || len(orgs) != 0 {
		t.Errorf("UserOrgs(unknown) = %v, %v; want none", orgs, err)
	}
}

func testKeys(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	h1 := sha256.Sum256([]byte("secret-1"))
	// NUL and high bytes must survive: the hash is binary, not text.
	h2 := bytes.Repeat([]byte{0x00, 0xff, 0x80, 0x7f}, 8)
	orgKey := store.APIKey{ID: "k-1", Hash: h1[:], OrgID: "org-a", Name: "ci", Role: store.RoleMember,
		CreatedAt: t0, ExpiresAt: t0 + 86400}
	userKey := store.APIKey{ID: "k-2", Hash: h2, UserID: "u-1", Name: "laptop", CreatedAt: t0 + 1, Revoked: true}
	for _, k := range []store.APIKey{orgKey, userKey} {
		must(t, "CreateKey", e.s.CreateKey(e.ctx, k))
	}
	for _, want := range []store.APIKey{orgKey, userKey} {
		got, err := e.s.KeyByHash(e.ctx, want.Hash)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("KeyByHash(%x) = %+v, %v; want %+v", want.Hash, got, err, want)
		}
	}

	flipped := bytes.Clone(h1[:])
	flipped[31] ^= 1
	for name, h := range map[string][]byte{"unknown": flipped, "prefix": h1[:16], "empty": nil} {
		_, err := e.s.KeyByHash(e.ctx, h)
		wantErr(t, "KeyByHash "+name, err, store.ErrNotFound)
	}
	if err := e.s.CreateKey(e.ctx, store.APIKey{ID: "k-3", Hash: h1[:], Name: "dup", CreatedAt: t0}); err == nil {
		t.Error("CreateKey with a duplicate hash succeeded")
	}
}
