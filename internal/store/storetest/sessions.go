package storetest

import (
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

// testWebSessions: a session is found by its token's hash until it expires; sign-out deletes
// it; the clean-up removes the expired ones only.
func testWebSessions(t *testing.T, e *env) {
	live := store.WebSession{TokenHash: keyHash("token-1"), KeyHash: keyHash("vt_key"), CreatedAt: t0, ExpiresAt: t0 + 3600}
	old := store.WebSession{TokenHash: keyHash("token-2"), KeyHash: keyHash("vt_key"), CreatedAt: t0 - 7200, ExpiresAt: t0 - 3600}
	must(t, "CreateSession", e.s.CreateSession(e.ctx, live))
	must(t, "CreateSession (expired)", e.s.CreateSession(e.ctx, old))

	got, err := e.s.SessionByHash(e.ctx, live.TokenHash, t0)
	if err != nil || string(got.KeyHash) != string(live.KeyHash) || got.CreatedAt != live.CreatedAt || got.ExpiresAt != live.ExpiresAt {
		t.Errorf("SessionByHash = %+v, %v; want %+v", got, err, live)
	}
	_, err = e.s.SessionByHash(e.ctx, live.TokenHash, live.ExpiresAt)
	wantErr(t, "SessionByHash at its expiry", err, store.ErrNotFound)
	_, err = e.s.SessionByHash(e.ctx, old.TokenHash, t0)
	wantErr(t, "SessionByHash of an expired session", err, store.ErrNotFound)
	_, err = e.s.SessionByHash(e.ctx, keyHash("token-3"), t0)
	wantErr(t, "SessionByHash of an unknown token", err, store.ErrNotFound)

	n, err := e.s.DeleteExpiredSessions(e.ctx, t0)
	if err != nil || n != 1 {
		t.Errorf("DeleteExpiredSessions = %d, %v; want 1", n, err)
	}
	if _, err := e.s.SessionByHash(e.ctx, live.TokenHash, t0); err != nil {
		t.Errorf("the live session after the clean-up: %v", err)
	}
	must(t, "DeleteSession", e.s.DeleteSession(e.ctx, live.TokenHash))
	_, err = e.s.SessionByHash(e.ctx, live.TokenHash, t0)
	wantErr(t, "SessionByHash after sign-out", err, store.ErrNotFound)
	must(t, "DeleteSession of an ended session", e.s.DeleteSession(e.ctx, live.TokenHash))
}
