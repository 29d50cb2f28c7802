package ingest

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/evaluate/store"
)

// Privilege is what an operation needs. Every operation declares one (see op), and one hook,
// authorize, compares it with the caller's role; handlers never check permissions themselves.
type Privilege string

const (
	PrivRead  Privilege = "read"
	PrivWrite Privilege = "write"
	PrivAdmin Privilege = "admin"
)

const privilegeKey = "privilege"

// allows is the role table. New roles (service accounts, snapshotter) extend it here.
func allows(role store.Role, need Privilege) bool {
	switch need {
	case PrivRead:
		return role == store.RoleReader || role == store.RoleMember || role == store.RoleAdmin
	case PrivWrite:
		return role == store.RoleMember || role == store.RoleAdmin
	case PrivAdmin:
		return role == store.RoleAdmin
	}
	return false
}

// Principal is the authenticated caller acting in one organization.
type Principal struct {
	KeyID string
	Name  string // display name: created_by, reported_by
	Org   store.Org
	Role  store.Role
}

type principalKey struct{}

func principalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// HashKey is how API keys are stored: the SHA-256 of the secret. Secrets are long random
// strings, so a fast hash loses nothing against guessing and keeps lookups indexable.
func HashKey(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// bearer extracts the API key from "Bearer KEY" or legacy "Basic base64(KEY:anything)".
func bearer(h string) string {
	if k, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(k)
	}
	if b, ok := strings.CutPrefix(h, "Basic "); ok {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b))
		if err != nil {
			return ""
		}
		user, _, _ := strings.Cut(string(raw), ":")
		return user
	}
	return ""
}

// authorize is the one authorization hook: it authenticates the key, resolves the
// organization in the path, checks the operation's declared privilege, and then waits for
// the caller's own pending writes before a read (read your writes).
func (a *API) authorize(ctx huma.Context, next func(huma.Context)) {
	need, _ := ctx.Operation().Metadata[privilegeKey].(Privilege)
	if need == "" {
		next(ctx)
		return
	}
	secret := bearer(ctx.Header("Authorization"))
	if secret == "" {
		a.writeErr(ctx, apiError(http.StatusUnauthorized, "Authentication required: send an API key as 'Authorization: Bearer <key>'"))
		return
	}
	p, err := a.principal(ctx.Context(), secret, ctx.Param("org"))
	if err != nil {
		a.writeErr(ctx, err)
		return
	}
	if !allows(p.Role, need) {
		a.writeErr(ctx, apiError(http.StatusForbidden, "Access denied: this operation needs the %s privilege in organization '%s'", need, p.Org.Name))
		return
	}
	if need == PrivRead {
		a.tracker.Wait(ctx.Context(), p.KeyID)
	}
	next(huma.WithValue(ctx, principalKey{}, p))
}

// principalTTL is how long a resolved key is trusted without asking the store again: the
// bound on how late a revocation or a membership change takes effect.
const principalTTL = 2 * time.Second

type cachedPrincipal struct {
	p       *Principal
	expires time.Time
}

// principal resolves a key in an organization, from a short-lived cache when it can: every
// request needs it, and without the cache it costs two or three queries.
func (a *API) principal(ctx context.Context, secret, orgName string) (*Principal, error) {
	h := HashKey(secret)
	key := string(h) + "\x00" + orgName
	if v, ok := a.principals.Load(key); ok {
		if c := v.(cachedPrincipal); time.Now().Before(c.expires) {
			return c.p, nil
		}
		a.principals.Delete(key)
	}
	p, err := a.resolvePrincipal(ctx, h, orgName)
	if err == nil {
		a.principals.Store(key, cachedPrincipal{p: p, expires: time.Now().Add(principalTTL)})
	}
	return p, err
}

func (a *API) resolvePrincipal(ctx context.Context, h []byte, orgName string) (*Principal, error) {
	k, err := a.store.KeyByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) || (err == nil && subtle.ConstantTimeCompare(k.Hash, h) != 1) {
		return nil, apiError(http.StatusUnauthorized, "Invalid API key")
	}
	if err != nil {
		return nil, a.internal(ctx, "look up api key", err)
	}
	if k.Revoked || (k.ExpiresAt > 0 && float64(time.Now().Unix()) >= k.ExpiresAt) {
		return nil, apiError(http.StatusUnauthorized, "API key is expired or revoked")
	}
	denied := apiError(http.StatusForbidden, "Access denied to /api/v2/user/%s", orgName)
	org, err := a.store.OrgByName(ctx, orgName)
	if errors.Is(err, store.ErrNotFound) {
		return nil, denied // the same answer whether or not the organization exists
	}
	if err != nil {
		return nil, a.internal(ctx, "look up organization", err)
	}
	p := &Principal{KeyID: k.ID, Name: k.Name, Org: org, Role: k.Role}
	switch {
	case k.OrgID != "":
		if k.OrgID != org.ID {
			return nil, denied
		}
	case k.UserID != "":
		role, err := a.store.MemberRole(ctx, k.UserID, org.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, denied
		}
		if err != nil {
			return nil, a.internal(ctx, "look up membership", err)
		}
		p.Role = role
		if u, err := a.store.UserByID(ctx, k.UserID); err == nil {
			p.Name = u.DisplayName
		}
	default:
		return nil, denied
	}
	return p, nil
}
