package app

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestServiceAccountsAndKeys walks a service account's life: create, keys that work, a
// changed privilege, rotation, revocation, deletion, and the audit log of it all.
func TestServiceAccountsAndKeys(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		org := testOrg
		setupFlow(t, k)
		sa := "/service-accounts/" + org
		v := k.send(http.MethodPost, sa, map[string]any{"name": "ci", "description": "pipelines", "privilege": "member"}).
			want(t, http.StatusCreated).JSON(t)
		if v["name"] != "ci" || v["privilege"] != "member" || v["description"] != "pipelines" || v["created_by"] != "admin" {
			t.Fatalf("created account: %v", v)
		}
		wantError(t, k.send(http.MethodPost, sa, map[string]any{"name": "ci", "privilege": "reader"}), http.StatusBadRequest, "already exists", "name")
		wantError(t, k.send(http.MethodPost, sa, map[string]any{"name": "x", "privilege": "owner"}), http.StatusBadRequest, "Input payload validation failed", "privilege")
		wantError(t, k.send(http.MethodPost, sa, map[string]any{"name": "-x", "privilege": "reader"}), http.StatusBadRequest, "Input payload validation failed", "name")
		names := map[string]bool{}
		for _, a := range k.get(sa).want(t, http.StatusOK).Array(t) {
			names[a.(map[string]any)["name"].(string)] = true
		}
		if !names["admin"] || !names["ci"] || len(names) != 2 {
			t.Fatalf("accounts: %v", names)
		}
		k.get(sa+"/ci").want(t, http.StatusOK)
		wantError(t, k.get(sa+"/nope"), http.StatusNotFound, "Service account 'nope' does not exist in organization 'acme'", "")

		keys := sa + "/ci/api-keys"
		expires := float64(time.Now().Add(24 * time.Hour).Unix())
		created := k.send(http.MethodPost, keys, map[string]any{"description": "main", "expires_at": expires}).want(t, http.StatusCreated).JSON(t)
		secret, id := created["key"].(string), created["id"].(string)
		if secret == "" || id == "" || created["expires_at"] != expires || created["service_account"] != "ci" || created["is_expired"] != false {
			t.Fatalf("created key: %v", created)
		}
		wantError(t, k.send(http.MethodPost, keys, map[string]any{"expires_at": 1000}), http.StatusBadRequest, "Input payload validation failed", "expires_at")
		if list := k.get(keys).want(t, http.StatusOK); bytes.Contains(list.Body, []byte(secret)) || len(list.Array(t)) != 1 {
			t.Fatalf("keys list: %s", list.Body)
		}
		k.get(keys+"/"+id).want(t, http.StatusOK)

		ci := newKosli(t, e.base+"/api/v2", secret)
		ci.multipart(http.MethodPut, "/trails/"+org+"/app", "data_json", map[string]any{"name": "by-ci"}).want(t, http.StatusCreated)
		if tr := ci.get("/trails/"+org+"/app/by-ci").want(t, http.StatusOK).JSON(t); tr["created_by"] != "ci" {
			t.Fatalf("created_by: %v", tr["created_by"])
		}
		wantError(t, ci.get(sa), http.StatusForbidden, "needs the admin privilege", "")

		// A changed privilege applies to the account's keys at once.
		k.send(http.MethodPatch, sa+"/ci", map[string]any{"privilege": "reader"}).want(t, http.StatusOK)
		wantError(t, ci.multipart(http.MethodPut, "/trails/"+org+"/app", "data_json", map[string]any{"name": "x"}),
			http.StatusForbidden, "needs the write privilege", "")
		ci.get("/trails/"+org+"/app/by-ci").want(t, http.StatusOK)

		// Rotation: with a grace period the old key keeps working, without one it stops.
		rotated := k.send(http.MethodPost, keys+"/"+id+"/rotate", map[string]any{"grace_period_hours": 1}).want(t, http.StatusCreated).JSON(t)
		next := newKosli(t, e.base+"/api/v2", rotated["key"].(string))
		replaced := rotated["replaced"].(map[string]any)
		if replaced["id"] != id || replaced["expires_at"].(float64) > float64(time.Now().Add(time.Hour).Unix()+5) {
			t.Fatalf("rotation: %v", rotated)
		}
		next.get("/trails/"+org+"/app/by-ci").want(t, http.StatusOK)
		ci.get("/trails/"+org+"/app/by-ci").want(t, http.StatusOK)
		k.send(http.MethodPost, keys+"/"+id+"/rotate", nil).want(t, http.StatusCreated)
		wantError(t, ci.get("/trails/"+org+"/app/by-ci"), http.StatusUnauthorized, "expired or revoked", "")

		// Revocation archives a key: it stops working and is no longer found.
		nextID := rotated["id"].(string)
		if r := k.send(http.MethodDelete, keys+"/"+nextID, nil).want(t, http.StatusOK); string(bytes.TrimSpace(r.Body)) != `"revoked"` {
			t.Fatalf("revoke: %s", r.Body)
		}
		wantError(t, next.get("/trails/"+org+"/app/by-ci"), http.StatusUnauthorized, "expired or revoked", "")
		wantError(t, k.send(http.MethodDelete, keys+"/"+nextID, nil), http.StatusNotFound, "does not exist", "")
		wantError(t, k.get(keys+"/"+nextID), http.StatusNotFound, "does not exist", "")
		wantError(t, k.send(http.MethodPost, keys+"/"+nextID+"/rotate", nil), http.StatusNotFound, "does not exist", "")

		// Deleting the account revokes every key it has left.
		last := k.send(http.MethodPost, keys, nil).want(t, http.StatusCreated).JSON(t)
		if r := k.send(http.MethodDelete, sa+"/ci", nil).want(t, http.StatusOK); string(bytes.TrimSpace(r.Body)) != `"OK"` {
			t.Fatalf("delete: %s", r.Body)
		}
		wantError(t, newKosli(t, e.base+"/api/v2", last["key"].(string)).get("/flows/"+org), http.StatusUnauthorized, "expired or revoked", "")
		wantError(t, k.get(sa+"/ci"), http.StatusNotFound, "does not exist", "")

		// The audit log has every identity change, by whom, newest first.
		audit := k.get("/audit/"+org+"?per_page=100").want(t, http.StatusOK).JSON(t)
		var ops []string
		for _, r := range audit["data"].([]any) {
			rec := r.(map[string]any)
			if rec["actor"] == "admin" && rec["operation"] != "createFlowWithTemplate" && rec["operation"] != "beginTrail" {
				ops = append(ops, rec["operation"].(string))
			}
		}
		want := []string{"deleteServiceAccount", "createAPIKey", "revokeAPIKey", "rotateAPIKey", "rotateAPIKey",
			"updateServiceAccount", "createAPIKey", "createServiceAccount"}
		if len(ops) != len(want) {
			t.Fatalf("audit operations %v, want %v", ops, want)
		}
		for i := range want {
			if ops[i] != want[i] {
				t.Fatalf("audit operations %v, want %v", ops, want)
			}
		}
	})
}

// TestAuditAfter201: a write answered 201 is in the audit log at the writer's next read,
// with the key, the operation and the path it targeted.
func TestAuditAfter201(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		setupFlow(t, e.k)
		for i := range 3 {
			e.k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "run-" + string(rune('a'+i))}).
				want(t, http.StatusCreated)
			a := e.k.get("/audit/"+testOrg+"?per_page=1").want(t, http.StatusOK).JSON(t)
			rec := a["data"].([]any)[0].(map[string]any)
			if rec["operation"] != "beginTrail" || rec["target"] != "/trails/acme/app" || rec["actor"] != "admin" ||
				rec["outcome"] != "applied" || rec["key_id"] == "" {
				t.Fatalf("latest audit record: %v", rec)
			}
			if p := a["pagination"].(map[string]any); p["total"] != float64(3+i) {
				t.Fatalf("audit total %v, want %d (flow, first trail, these)", p["total"], 3+i)
			}
		}
	})
}

// TestKeysStoredHashed: no secret is in the embedded store's files, only its hash.
func TestKeysStoredHashed(t *testing.T) {
	cfg := baseConfig()
	cfg.DataDir = t.TempDir()
	r, err := StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k := newKosli(t, "http://"+r.Addr+"/api/v2", testToken)
	k.send(http.MethodPost, "/service-accounts/"+testOrg, map[string]any{"name": "ci", "privilege": "member"}).want(t, http.StatusCreated)
	secret := k.send(http.MethodPost, "/service-accounts/"+testOrg+"/ci/api-keys", nil).want(t, http.StatusCreated).JSON(t)["key"].(string)
	newKosli(t, "http://"+r.Addr+"/api/v2", secret).get("/flows/"+testOrg).want(t, http.StatusOK)
	files, _ := filepath.Glob(filepath.Join(cfg.DataDir, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a directory
		}
		for _, s := range []string{secret, testToken} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds a secret", filepath.Base(f))
			}
		}
	}
}
