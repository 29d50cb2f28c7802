package app

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore/sqlitetest"
)

const seedYAML = `
organizations:
  - name: acme
    public: true
    service_accounts:
      - name: ci
        description: pipelines
        privilege: member
        api_keys:
          - secret: vt_seeded_ci_key_0000000000
            description: main
users:
  - name: jane
    display_name: Jane Doe
    memberships:
      - {org: acme, role: reader}
    api_keys:
      - secret: vt_seeded_jane_key_00000000
`

func TestApplySeed(t *testing.T) {
	ctx := context.Background()
	st := sqlitetest.Open(t)
	seed, err := ParseSeed([]byte(seedYAML))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second run finds everything in place and changes nothing
		if err := ApplySeed(ctx, st, seed); err != nil {
			t.Fatal(err)
		}
	}
	acme := mustOrg(t, st, "acme")
	if !acme.Public {
		t.Error("acme is not public")
	}
	k, err := st.KeyByHash(ctx, auth.HashKey("vt_seeded_ci_key_0000000000"))
	if err != nil || k.Name != "ci" || k.Role != store.RoleMember || k.OrgID != acme.ID || k.Description != "main" {
		t.Fatalf("service account key: %+v, %v", k, err)
	}
	if keys, err := st.ServiceAccountKeys(ctx, k.ServiceAccountID); err != nil || len(keys) != 1 {
		t.Fatalf("keys of ci after two runs: %v, %v", keys, err)
	}
	jane, err := st.UserByName(ctx, "jane")
	if err != nil || jane.DisplayName != "Jane Doe" {
		t.Fatalf("jane: %+v, %v", jane, err)
	}
	for org, want := range map[string]store.Role{"acme": store.RoleReader, "jane": store.RoleAdmin} {
		if r, err := st.MemberRole(ctx, jane.ID, mustOrg(t, st, org).ID); err != nil || r != want {
			t.Errorf("jane's role in %s: %q, %v; want %s", org, r, err, want)
		}
	}
	if pk, err := st.KeyByHash(ctx, auth.HashKey("vt_seeded_jane_key_00000000")); err != nil || pk.UserID != jane.ID {
		t.Fatalf("jane's personal key: %+v, %v", pk, err)
	}

	// A changed file converges the store to it.
	changed := strings.NewReplacer("privilege: member", "privilege: reader", "Jane Doe", "J. Doe", "public: true", "public: false",
		"role: reader", "role: member").Replace(seedYAML)
	if seed, err = ParseSeed([]byte(changed)); err != nil {
		t.Fatal(err)
	}
	if err := ApplySeed(ctx, st, seed); err != nil {
		t.Fatal(err)
	}
	if k, _ := st.KeyByHash(ctx, auth.HashKey("vt_seeded_ci_key_0000000000")); k.Role != store.RoleReader {
		t.Errorf("ci's privilege after the change: %s", k.Role)
	}
	if u, _ := st.UserByName(ctx, "jane"); u.DisplayName != "J. Doe" {
		t.Errorf("display name after the change: %q", u.DisplayName)
	}
	if r, _ := st.MemberRole(ctx, jane.ID, acme.ID); r != store.RoleMember || mustOrg(t, st, "acme").Public {
		t.Errorf("after the change: jane is %s of acme, public = %v", r, mustOrg(t, st, "acme").Public)
	}

	// A secret already used by another key is refused.
	stolen := "users:\n  - name: bob\n    api_keys:\n      - secret: vt_seeded_ci_key_0000000000\n"
	if seed, err = ParseSeed([]byte(stolen)); err != nil {
		t.Fatal(err)
	}
	if err := ApplySeed(ctx, st, seed); err == nil || !strings.Contains(err.Error(), "already another key's") {
		t.Fatalf("reusing a secret: %v", err)
	}
}

func TestParseSeedRefusesBadFiles(t *testing.T) {
	for name, c := range map[string]struct{ yaml, want string }{
		"unknown field":   {"organizations:\n  - name: acme\n    publik: true\n", "field publik not found"},
		"short secret":    {"users:\n  - name: jane\n    api_keys:\n      - secret: short\n", "at least 16 characters"},
		"secret twice":    {"users:\n  - name: a\n    api_keys: [{secret: vt_0123456789abcdef}]\n  - name: b\n    api_keys: [{secret: vt_0123456789abcdef}]\n", "used twice"},
		"bad privilege":   {"organizations:\n  - name: acme\n    service_accounts: [{name: ci, privilege: owner}]\n", `privilege "owner"`},
		"bad role":        {"organizations: [{name: acme}]\nusers:\n  - name: jane\n    memberships: [{org: acme, role: boss}]\n", `role "boss"`},
		"unknown org":     {"users:\n  - name: jane\n    memberships: [{org: nowhere, role: reader}]\n", `"nowhere" is not in the file`},
		"bad name":        {"organizations: [{name: -acme}]\n", "the name must match"},
		"negative expiry": {"users:\n  - name: jane\n    api_keys: [{secret: vt_0123456789abcdef, expires_at: -1}]\n", "expires_at"},
	} {
		if _, err := ParseSeed([]byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", name, err, c.want)
		}
	}
}

// TestSeededIdentitiesAtWork: seeded keys work on both modes; a user's key acts with its
// role in each organization, its own included, and created_by shows its display name.
func TestSeededIdentitiesAtWork(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		seed, err := ParseSeed([]byte(strings.Replace(seedYAML, "role: reader", "role: member", 1)))
		if err != nil {
			t.Fatal(err)
		}
		if err := ApplySeed(context.Background(), e.store, seed); err != nil {
			t.Fatal(err)
		}
		setupFlow(t, e.k)
		e.k.get("/flows/"+testOrg+"/app").want(t, http.StatusOK) // applied before jane uses it
		jane := newKosli(t, e.base+"/api/v2", "vt_seeded_jane_key_00000000")
		jane.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "by-jane"}).want(t, http.StatusCreated)
		if tr := jane.get("/trails/"+testOrg+"/app/by-jane").want(t, http.StatusOK).JSON(t); tr["created_by"] != "Jane Doe" {
			t.Fatalf("created_by %v, want Jane Doe", tr["created_by"])
		}
		wantError(t, jane.get("/service-accounts/"+testOrg), http.StatusForbidden, "needs the admin privilege", "")
		jane.get("/service-accounts/jane").want(t, http.StatusOK) // she administers her personal organization
		ci := newKosli(t, e.base+"/api/v2", "vt_seeded_ci_key_0000000000")
		ci.get("/flows/"+testOrg+"/app").want(t, http.StatusOK)
		newKosli(t, e.base+"/api/v2", "").get("/flows/"+testOrg+"/app").want(t, http.StatusOK) // public
	})
}
