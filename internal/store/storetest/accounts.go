package storetest

import (
	"crypto/sha256"
	"errors"
	"reflect"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

// identity runs fn in an identity transaction that must commit.
func (e *env) identity(t *testing.T, fn func(tx store.IdentityTx) error) {
	t.Helper()
	if err := e.s.UpdateIdentities(e.ctx, fn); err != nil {
		t.Fatalf("UpdateIdentities: %v", err)
	}
}

func (e *env) serviceAccount(t *testing.T, id, orgID, name string, priv store.Role) store.ServiceAccount {
	t.Helper()
	sa := store.ServiceAccount{ID: id, OrgID: orgID, Name: name, Description: "account " + name, Privilege: priv,
		CreatedBy: "admin", CreatedAt: t0, LastModifiedAt: t0}
	e.identity(t, func(tx store.IdentityTx) error { return tx.CreateServiceAccount(e.ctx, sa) })
	return sa
}

func keyHash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

func serviceAccountID(sa store.ServiceAccount) string { return sa.ID }
func keyID(k store.APIKey) string                     { return k.ID }

func testServiceAccounts(t *testing.T, e *env) {
	a, b := e.org(t, "org-a", "acme"), e.org(t, "org-b", "beta")
	ci := e.serviceAccount(t, "sa-1", a.ID, "ci", store.RoleMember)
	e.serviceAccount(t, "sa-2", b.ID, "ci", store.RoleReader) // names are unique per organization only
	deploy := e.serviceAccount(t, "sa-3", a.ID, "deploy", store.RoleAdmin)

	err := e.s.UpdateIdentities(e.ctx, func(tx store.IdentityTx) error {
		return tx.CreateServiceAccount(e.ctx, store.ServiceAccount{ID: "sa-4", OrgID: a.ID, Name: "ci", Privilege: store.RoleReader})
	})
	wantErr(t, "CreateServiceAccount duplicate name", err, store.ErrConflict)

	if got, err := e.s.ServiceAccountByName(e.ctx, a.ID, "ci"); err != nil || got != ci {
		t.Errorf("ServiceAccountByName = %+v, %v; want %+v", got, err, ci)
	}
	if got, err := e.s.ServiceAccountByName(e.ctx, b.ID, "ci"); err != nil || got.ID != "sa-2" {
		t.Errorf("ServiceAccountByName(beta) = %+v, %v; want sa-2", got, err)
	}
	_, err = e.s.ServiceAccountByName(e.ctx, b.ID, "deploy")
	wantErr(t, "ServiceAccountByName of another organization", err, store.ErrNotFound)
	list, err := e.s.ListServiceAccounts(e.ctx, a.ID)
	must(t, "ListServiceAccounts", err)
	if !reflect.DeepEqual(list, []store.ServiceAccount{ci, deploy}) {
		t.Errorf("ListServiceAccounts = %+v, want ci and deploy", list)
	}

	renamed := deploy
	renamed.Name, renamed.Description, renamed.Privilege, renamed.LastModifiedAt = "release", "", store.RoleSnapshotter, t0+5
	e.identity(t, func(tx store.IdentityTx) error { return tx.UpdateServiceAccount(e.ctx, renamed) })
	if got, err := e.s.ServiceAccountByName(e.ctx, a.ID, "release"); err != nil || got != renamed {
		t.Errorf("after update ServiceAccountByName = %+v, %v; want %+v", got, err, renamed)
	}
	_, err = e.s.ServiceAccountByName(e.ctx, a.ID, "deploy")
	wantErr(t, "ServiceAccountByName of the old name", err, store.ErrNotFound)

	clash := renamed
	clash.Name = "ci"
	wantErr(t, "UpdateServiceAccount to a taken name", e.s.UpdateIdentities(e.ctx, func(tx store.IdentityTx) error {
		return tx.UpdateServiceAccount(e.ctx, clash)
	}), store.ErrConflict)
	foreign := renamed
	foreign.ID = "sa-2" // beta's account, addressed through acme
	wantErr(t, "UpdateServiceAccount of another organization", e.s.UpdateIdentities(e.ctx, func(tx store.IdentityTx) error {
		return tx.UpdateServiceAccount(e.ctx, foreign)
	}), store.ErrNotFound)

	e.identity(t, func(tx store.IdentityTx) error { return tx.DeleteServiceAccount(e.ctx, a.ID, renamed.ID) })
	_, err = e.s.ServiceAccountByName(e.ctx, a.ID, "release")
	wantErr(t, "ServiceAccountByName after delete", err, store.ErrNotFound)
	for what, id := range map[string]string{"again": renamed.ID, "of another organization": "sa-2"} {
		wantErr(t, "DeleteServiceAccount "+what, e.s.UpdateIdentities(e.ctx, func(tx store.IdentityTx) error {
			return tx.DeleteServiceAccount(e.ctx, a.ID, id)
		}), store.ErrNotFound)
	}
	list, err = e.s.ListServiceAccounts(e.ctx, a.ID)
	must(t, "ListServiceAccounts", err)
	checkIDs(t, "ListServiceAccounts after delete", list, serviceAccountID, "sa-1")

	// A failed transaction leaves nothing behind.
	boom := errors.New("boom")
	err = e.s.UpdateIdentities(e.ctx, func(tx store.IdentityTx) error {
		if err := tx.CreateServiceAccount(e.ctx, store.ServiceAccount{ID: "sa-9", OrgID: a.ID, Name: "temp",
			Privilege: store.RoleReader}); err != nil {
			return err
		}
		return boom
	})
	wantErr(t, "UpdateIdentities returning an error", err, boom)
	_, err = e.s.ServiceAccountByName(e.ctx, a.ID, "temp")
	wantErr(t, "ServiceAccountByName after rollback", err, store.ErrNotFound)
}

func testServiceAccountKeys(t *testing.T, e *env) {
	a := e.org(t, "org-a", "acme")
	sa := e.serviceAccount(t, "sa-1", a.ID, "ci", store.RoleMember)
	// The key row records the account as it was; reads show the account as it is.
	k1 := store.APIKey{ID: "k-1", Hash: keyHash("one"), OrgID: a.ID, ServiceAccountID: sa.ID, Name: sa.Name,
		Description: "main", Role: sa.Privilege, CreatedAt: t0}
	k2 := store.APIKey{ID: "k-2", Hash: keyHash("two"), OrgID: a.ID, ServiceAccountID: sa.ID, Name: sa.Name,
		Role: sa.Privilege, CreatedAt: t0 + 1, ExpiresAt: t0 + 100}
	e.identity(t, func(tx store.IdentityTx) error {
		if err := tx.CreateKey(e.ctx, k2); err != nil {
			return err
		}
		return tx.CreateKey(e.ctx, k1)
	})
	if got, err := e.s.KeyByHash(e.ctx, k1.Hash); err != nil || !reflect.DeepEqual(got, k1) {
		t.Errorf("KeyByHash = %+v, %v; want %+v", got, err, k1)
	}
	if got, err := e.s.KeyByID(e.ctx, k2.ID); err != nil || !reflect.DeepEqual(got, k2) {
		t.Errorf("KeyByID = %+v, %v; want %+v", got, err, k2)
	}
	_, err := e.s.KeyByID(e.ctx, "nope")
	wantErr(t, "KeyByID unknown", err, store.ErrNotFound)

	changed := sa
	changed.Name, changed.Privilege = "pipeline", store.RoleReader
	e.identity(t, func(tx store.IdentityTx) error { return tx.UpdateServiceAccount(e.ctx, changed) })
	got, err := e.s.KeyByHash(e.ctx, k1.Hash)
	if err != nil || got.Name != "pipeline" || got.Role != store.RoleReader || got.OrgID != a.ID {
		t.Errorf("KeyByHash after the account changed = %+v, %v; want name pipeline, role reader", got, err)
	}
	keys, err := e.s.ServiceAccountKeys(e.ctx, sa.ID)
	must(t, "ServiceAccountKeys", err)
	checkIDs(t, "ServiceAccountKeys", keys, keyID, "k-1", "k-2")

	expiry := func(id string) float64 {
		t.Helper()
		k, err := e.s.KeyByID(e.ctx, id)
		must(t, "KeyByID", err)
		return k.ExpiresAt
	}
	e.identity(t, func(tx store.IdentityTx) error { return tx.ExpireKeyBy(e.ctx, k2.ID, t0+50) })
	if got := expiry(k2.ID); got != t0+50 {
		t.Errorf("ExpireKeyBy sooner: expires_at = %v, want %v", got, t0+50)
	}
	e.identity(t, func(tx store.IdentityTx) error { return tx.ExpireKeyBy(e.ctx, k2.ID, t0+80) })
	if got := expiry(k2.ID); got != t0+50 {
		t.Errorf("ExpireKeyBy later: expires_at = %v, want %v kept", got, t0+50)
	}
	e.identity(t, func(tx store.IdentityTx) error { return tx.ExpireKeyBy(e.ctx, k1.ID, t0+10) })
	if got := expiry(k1.ID); got != t0+10 {
		t.Errorf("ExpireKeyBy of a key that never expired: expires_at = %v, want %v", got, t0+10)
	}

	e.identity(t, func(tx store.IdentityTx) error { return tx.RevokeKey(e.ctx, k1.ID) })
	if got, err := e.s.KeyByHash(e.ctx, k1.Hash); err != nil || !got.Revoked {
		t.Errorf("KeyByHash after revoke = %+v, %v; want revoked", got, err)
	}
	keys, err = e.s.ServiceAccountKeys(e.ctx, sa.ID)
	must(t, "ServiceAccountKeys", err)
	checkIDs(t, "ServiceAccountKeys after revoke", keys, keyID, "k-2")
	for what, f := range map[string]func(store.IdentityTx) error{
		"RevokeKey again":         func(tx store.IdentityTx) error { return tx.RevokeKey(e.ctx, k1.ID) },
		"RevokeKey unknown":       func(tx store.IdentityTx) error { return tx.RevokeKey(e.ctx, "nope") },
		"ExpireKeyBy revoked key": func(tx store.IdentityTx) error { return tx.ExpireKeyBy(e.ctx, k1.ID, t0) },
		"ExpireKeyBy unknown":     func(tx store.IdentityTx) error { return tx.ExpireKeyBy(e.ctx, "nope", t0) },
	} {
		wantErr(t, what, e.s.UpdateIdentities(e.ctx, f), store.ErrNotFound)
	}

	// Deleting the account revokes the keys it still had.
	e.identity(t, func(tx store.IdentityTx) error { return tx.DeleteServiceAccount(e.ctx, a.ID, sa.ID) })
	if got, err := e.s.KeyByHash(e.ctx, k2.Hash); err != nil || !got.Revoked || got.OrgID != a.ID {
		t.Errorf("KeyByHash after the account was deleted = %+v, %v; want revoked, in acme", got, err)
	}
	keys, err = e.s.ServiceAccountKeys(e.ctx, sa.ID)
	if err != nil || len(keys) != 0 {
		t.Errorf("ServiceAccountKeys after delete = %v, %v; want none", keys, err)
	}
}

func auditID(r store.AuditRecord) string { return r.ID }

func testAudit(t *testing.T, e *env) {
	a, b := e.org(t, "org-a", "acme"), e.org(t, "org-b", "beta")
	rec := func(id, orgID, key string, at float64) store.AuditRecord {
		return store.AuditRecord{ID: id, OrgID: orgID, KeyID: key, Actor: "actor " + key, Operation: "beginTrail",
			Target: "/trails/" + orgID + "/app", Outcome: store.AuditApplied, At: at}
	}
	r1, r2, r3 := rec("m-1", a.ID, "k-1", t0), rec("m-2", a.ID, "k-2", t0+2), rec("m-3", b.ID, "k-3", t0+1)
	r4 := rec("m-4", a.ID, "k-1", t0+1)
	r4.Operation, r4.Outcome = "createServiceAccount", store.AuditRejected
	// The evaluator writes audit records in its transactions, a batch's at once; the API in
	// identity transactions.
	e.update(t, func(tx store.Tx) error { return tx.InsertAudits(e.ctx, []store.AuditRecord{r1, r2, r3}) })
	e.update(t, func(tx store.Tx) error { return tx.InsertAudits(e.ctx, nil) })
	e.identity(t, func(tx store.IdentityTx) error { return tx.InsertAudit(e.ctx, r4) })
	// A redelivered message records nothing new.
	again := r1
	again.Actor = "someone else"
	e.update(t, func(tx store.Tx) error { return tx.InsertAudit(e.ctx, again) })
	e.update(t, func(tx store.Tx) error { return tx.InsertAudits(e.ctx, []store.AuditRecord{again, r2}) })
	boom := errors.New("boom")
	err := e.s.Update(e.ctx, func(tx store.Tx) error {
		if err := tx.InsertAudit(e.ctx, rec("m-5", a.ID, "k-1", t0+3)); err != nil {
			return err
		}
		return boom
	})
	wantErr(t, "Update returning an error", err, boom)

	got, total, err := e.s.ListAudit(e.ctx, a.ID, store.AuditFilter{})
	must(t, "ListAudit", err)
	if !reflect.DeepEqual(got, []store.AuditRecord{r2, r4, r1}) || total != 3 {
		t.Errorf("ListAudit = %+v (total %d), want m-2, m-4, m-1 as written (total 3)", got, total)
	}
	got, total, err = e.s.ListAudit(e.ctx, a.ID, store.AuditFilter{KeyID: "k-1"})
	must(t, "ListAudit by key", err)
	checkIDs(t, "ListAudit by key", got, auditID, "m-4", "m-1")
	if total != 2 {
		t.Errorf("ListAudit by key total = %d, want 2", total)
	}
	got, total, err = e.s.ListAudit(e.ctx, a.ID, store.AuditFilter{Page: store.Page{Page: 2, PerPage: 2}})
	must(t, "ListAudit page 2", err)
	checkIDs(t, "ListAudit page 2", got, auditID, "m-1")
	if total != 3 {
		t.Errorf("ListAudit page 2 total = %d, want 3", total)
	}
	got, _, err = e.s.ListAudit(e.ctx, b.ID, store.AuditFilter{})
	must(t, "ListAudit beta", err)
	checkIDs(t, "ListAudit beta", got, auditID, "m-3")
}

func testIdentityAdmin(t *testing.T, e *env) {
	o := e.org(t, "org-a", "acme")
	for _, public := range []bool{true, false} {
		must(t, "SetOrgPublic", e.s.SetOrgPublic(e.ctx, o.ID, public))
		if got, err := e.s.OrgByID(e.ctx, o.ID); err != nil || got.Public != public {
			t.Errorf("after SetOrgPublic(%v) OrgByID = %+v, %v", public, got, err)
		}
	}
	wantErr(t, "SetOrgPublic unknown", e.s.SetOrgPublic(e.ctx, "nope", true), store.ErrNotFound)

	must(t, "CreateUser", e.s.CreateUser(e.ctx, store.User{ID: "u-1", Name: "jane", DisplayName: "jane", CreatedAt: t0}))
	must(t, "SetUserDisplayName", e.s.SetUserDisplayName(e.ctx, "u-1", "Jane Doe"))
	if u, err := e.s.UserByName(e.ctx, "jane"); err != nil || u.DisplayName != "Jane Doe" {
		t.Errorf("after SetUserDisplayName UserByName = %+v, %v", u, err)
	}
	wantErr(t, "SetUserDisplayName unknown", e.s.SetUserDisplayName(e.ctx, "nope", "x"), store.ErrNotFound)

	must(t, "AddMember", e.s.AddMember(e.ctx, "u-1", o.ID, store.RoleSnapshotter))
	if r, err := e.s.MemberRole(e.ctx, "u-1", o.ID); err != nil || r != store.RoleSnapshotter {
		t.Errorf("MemberRole = %q, %v; want snapshotter", r, err)
	}
}

func testWipe(t *testing.T, e *env) {
	o := e.org(t, "org-a", "acme")
	f := e.flow(t, o.ID, "f-1", "web")
	tr := e.trail(t, f, "tr-1", "main", t0)
	e.attestation(t, tr, "at-1", "unit", t0)
	e.trail(t, f, "tr-0", "old", t0)
	if _, n, err := e.s.ListTrails(e.ctx, o.ID, store.TrailFilter{}); err != nil || n != 2 {
		t.Fatalf("ListTrails before wipe: total %d, %v; want 2", n, err)
	}
	must(t, "CreateUser", e.s.CreateUser(e.ctx, store.User{ID: "u-1", Name: "jane", CreatedAt: t0}))
	must(t, "AddMember", e.s.AddMember(e.ctx, "u-1", o.ID, store.RoleAdmin))
	sa := e.serviceAccount(t, "sa-1", o.ID, "ci", store.RoleMember)
	e.identity(t, func(tx store.IdentityTx) error {
		if err := tx.CreateKey(e.ctx, store.APIKey{ID: "k-1", Hash: keyHash("s"), OrgID: o.ID, ServiceAccountID: sa.ID,
			CreatedAt: t0}); err != nil {
			return err
		}
		return tx.InsertAudit(e.ctx, store.AuditRecord{ID: "m-1", OrgID: o.ID, At: t0})
	})
	e.update(t, func(tx store.Tx) error {
		if err := tx.MarkDirty(e.ctx, tr.ID); err != nil {
			return err
		}
		if err := tx.PutPolicyVersion(e.ctx, o.ID, "prod", "", policyVersion(1, "prod")); err != nil {
			return err
		}
		return tx.MarkApplied(e.ctx, "m-1", tr.ID, t0)
	})

	must(t, "Wipe", e.s.Wipe(e.ctx))

	_, err := e.s.OrgByName(e.ctx, "acme")
	wantErr(t, "OrgByName after wipe", err, store.ErrNotFound)
	_, err = e.s.UserByName(e.ctx, "jane")
	wantErr(t, "UserByName after wipe", err, store.ErrNotFound)
	_, err = e.s.KeyByHash(e.ctx, keyHash("s"))
	wantErr(t, "KeyByHash after wipe", err, store.ErrNotFound)
	_, err = e.s.ServiceAccountByName(e.ctx, o.ID, "ci")
	wantErr(t, "ServiceAccountByName after wipe", err, store.ErrNotFound)
	_, err = e.s.FlowByID(e.ctx, o.ID, f.ID)
	wantErr(t, "FlowByID after wipe", err, store.ErrNotFound)
	_, err = e.s.TrailByID(e.ctx, tr.ID)
	wantErr(t, "TrailByID after wipe", err, store.ErrNotFound)
	if atts, err := e.s.TrailAttestations(e.ctx, tr.ID); err != nil || len(atts) != 0 {
		t.Errorf("TrailAttestations after wipe = %v, %v", atts, err)
	}
	if recs, total, err := e.s.ListAudit(e.ctx, o.ID, store.AuditFilter{}); err != nil || len(recs) != 0 || total != 0 {
		t.Errorf("ListAudit after wipe = %v, %d, %v", recs, total, err)
	}
	if ids, err := e.s.DirtyTrails(e.ctx); err != nil || len(ids) != 0 {
		t.Errorf("DirtyTrails after wipe = %v, %v", ids, err)
	}
	if ok, err := e.s.Visible(e.ctx, []string{"m-1"}); err != nil || ok {
		t.Errorf("Visible(m-1) after wipe = %v, %v; want false", ok, err)
	}
	if ps, err := e.s.ListPolicies(e.ctx, o.ID); err != nil || len(ps) != 0 {
		t.Errorf("ListPolicies after wipe = %v, %v", ps, err)
	}
	// The emptied store is usable again; a list's total counts the new trail alone.
	e.org(t, "org-a", "acme")
	e.flow(t, o.ID, "f-1", "web")
	e.trail(t, f, "tr-2", "next", t0+1)
	if _, n, err := e.s.ListTrails(e.ctx, o.ID, store.TrailFilter{}); err != nil || n != 1 {
		t.Errorf("ListTrails after wipe: total %d, %v; want 1", n, err)
	}
}
