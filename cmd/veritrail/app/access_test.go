package app

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

// keyFor makes a key of role in org and returns a client that uses it.
func keyFor(t *testing.T, e env, org, name string, role store.Role) *kosli {
	t.Helper()
	return newKosli(t, e.base+"/api/v2", keySecret(t, e, org, name, role))
}

// keySecret makes a key of a service account named name in org, with role, and returns its secret.
func keySecret(t *testing.T, e env, org, name string, role store.Role) string {
	t.Helper()
	ctx := context.Background()
	o, err := EnsureOrg(ctx, e.store, org)
	if err != nil {
		t.Fatal(err)
	}
	secret := "vt_" + org + "_" + name + "_" + strings.Repeat("0", 24)
	if err := CreateOrgKey(ctx, e.store, o, name, role, secret); err != nil {
		t.Fatal(err)
	}
	return secret
}

// TestPublicOrganization: anyone may read a public organization's flows and trails, and
// nothing else; a key of another organization reads it like anyone; a bad key is refused.
func TestPublicOrganization(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		setupFlow(t, e.k)
		e.k.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK) // applied before others read it
		if err := e.store.SetOrgPublic(context.Background(), mustOrg(t, e.store, testOrg).ID, true); err != nil {
			t.Fatal(err)
		}
		anon := newKosli(t, e.base+"/api/v2", "")
		stranger := keyFor(t, e, "other", "ci", store.RoleAdmin)
		for _, k := range []*kosli{anon, stranger} {
			if f := k.get("/flows/"+testOrg+"/app").want(t, http.StatusOK).JSON(t); f["name"] != "app" {
				t.Fatalf("public flow: %v", f)
			}
			k.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK)
		}
		wantError(t, anon.get("/attestations/"+testOrg), http.StatusUnauthorized, "Authentication required", "")
		wantError(t, anon.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "x"}),
			http.StatusUnauthorized, "Authentication required", "")
		r := stranger.get("/attestations/" + testOrg)
		wantError(t, r, http.StatusForbidden, "Access denied", "")
		wantError(t, stranger.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "x"}),
			http.StatusForbidden, "Access denied", "")
		wantError(t, newKosli(t, e.base+"/api/v2", "wrong").get("/flows/"+testOrg+"/app"), http.StatusUnauthorized, "Invalid API key", "")
		// A private organization stays private, whether or not it exists.
		for _, path := range []string{"/flows/other", "/flows/nosuchorg"} {
			if r := anon.get(path); r.Status != http.StatusUnauthorized || bytes.Contains(r.Body, []byte("ci")) {
				t.Fatalf("anonymous %s: %d %s", path, r.Status, r.Body)
			}
		}
	})
}

// TestSnapshotter: a snapshotter key reports snapshots and does nothing else.
func TestSnapshotter(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		e.k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "server"}).want(t, http.StatusCreated)
		e.k.get("/environments/"+testOrg+"/prod").want(t, http.StatusOK) // applied before another key uses it
		snap := keyFor(t, e, testOrg, "reporter", store.RoleSnapshotter)
		report := map[string]any{"artifacts": []any{map[string]any{"digests": map[string]any{"web": fpBackend}, "creationTimestamp": 1700000000}}}
		snap.send(http.MethodPut, "/environments/"+testOrg+"/prod/report/server", report).want(t, http.StatusCreated)
		wantError(t, snap.get("/environments/"+testOrg+"/prod"), http.StatusForbidden, "needs the read privilege", "")
		wantError(t, snap.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "qa", "type": "server"}),
			http.StatusForbidden, "needs the write privilege", "")
		// Another key's write: read after write covers every key of the organization.
		if s := e.k.get("/snapshots/"+testOrg+"/prod/-1").want(t, http.StatusOK).JSON(t); s["index"] != float64(1) {
			t.Fatalf("snapshot: %v", s)
		}
	})
}

// testClock is a clock the test moves: key expiry and rate limits follow it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
