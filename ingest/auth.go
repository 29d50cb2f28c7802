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

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// Privilege is what an operation needs. Every operation declares one (see op), and one hook,
// authorize, compares it with the caller's role; handlers never check permissions themselves.
type Privilege string

const (
	PrivRead     Privilege = "read"     // every read
	PrivSnapshot Privilege = "snapshot" // reporting an environment snapshot
	PrivWrite    Privilege = "write"    // every other evidence write
	PrivAdmin    Privilege = "admin"    // service accounts, API keys, the audit log
)

const (
	privilegeKey = "privilege"
	publicKey    = "public"
	apiPrefix    = "/api/v2"
)

// allows is the role table: the privileges each role holds. Users hold the role of their
// membership, service accounts their privilege.
func allows(role store.Role, need Privilege) bool {
	switch role {
	case store.RoleAdmin:
		return need == PrivRead || need == PrivSnapshot || need == PrivWrite || need == PrivAdmin
	case store.RoleMember:
		return need == PrivRead || need == PrivSnapshot || need == PrivWrite
	case store.RoleSnapshotter:
		return need == PrivSnapshot
	case store.RoleReader:
		return need == PrivRead
	}
	return false
}

// publicOperation lists the operations an unauthenticated caller may use in a public
// organization: the reads of its flows, trails, artifacts, environments and snapshots. Every
// other operation (attestations, approvals, custom types, search, service accounts, keys, the
// audit log, any write) needs a key of the organization even there.
func publicOperation(id string) bool {
	switch id {
	case "getFlow", "listFlows",
		"getTrail", "listTrails",
		"getArtifact", "getArtifactsByCommit", "latestCommit", "listArtifacts",
		"getEnvironment", "listEnvironments", "listEnvironmentEvents",
		"getSnapshot", "listSnapshots", "diffSnapshots":
		return true
	}
	return false
}

// Principal is the caller acting in one organization: a key's holder, or an anonymous
// reader of a public organization.
type Principal struct {
	KeyID     string
	Name      string // display name: created_by, reported_by
	Org       store.Org
	Role      store.Role
	Anonymous bool
	// expiresAt is when the key stops working (0 = never): a cached principal must not outlive it.
	expiresAt float64
}

type principalKey struct{}

type requestKey struct{}

// requestFrom is the audit description of the write being handled, set by authorize.
func requestFrom(ctx context.Context) *contract.Request {
	r, _ := ctx.Value(requestKey{}).(*contract.Request)
	return r
}

func principalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// awaitedKey marks a read that waited for writes of its organization.
type awaitedKey struct{}

// awaited reports whether the read being handled waited for writes of its organization.
func awaited(ctx context.Context) bool {
	b, _ := ctx.Value(awaitedKey{}).(bool)
	return b
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

// authorize is the one authorization hook: it authenticates the key (or admits an anonymous
// reader of a public organization), resolves the organization in the path, checks the
// operation's declared privilege, and then waits for the organization's writes in flight before
// a read (read after write). Nothing a handler does happens before these checks pass.
func (a *API) authorize(ctx huma.Context, next func(huma.Context)) {
	o := ctx.Operation()
	need, _ := o.Metadata[privilegeKey].(Privilege)
	if need == "" {
		next(ctx)
		return
	}
	public, _ := o.Metadata[publicKey].(bool)
	p, err := a.authenticate(ctx.Context(), ctx.Header("Authorization"), ctx.Param("org"), public)
	if err != nil {
		a.writeErr(ctx, err)
		return
	}
	if !a.withinLimits(ctx, p) {
		return
	}
	if !p.Anonymous && !allows(p.Role, need) {
		a.writeErr(ctx, apiError(http.StatusForbidden, "Access denied: this operation needs the %s privilege in organization '%s'", need, p.Org.Name))
		return
	}
	// Reads (GET, whatever privilege they need, anonymous ones too) wait for the organization's
	// writes acknowledged before them; writes are audited.
	if o.Method == http.MethodGet {
		if a.awaitWrites(ctx.Context(), p) {
			ctx = huma.WithValue(ctx, awaitedKey{}, true)
		}
	} else {
		done, refused := a.limits.startWrite(p.KeyID, p.Org.ID)
		if refused != admitted {
			a.writeErr(ctx, a.writeRefused(refused))
			return
		}
		defer done()
		ctx = huma.WithValue(ctx, requestKey{}, &contract.Request{Operation: o.OperationID,
			Target: strings.TrimPrefix(ctx.URL().Path, apiPrefix)})
	}
	next(huma.WithValue(ctx, principalKey{}, p))
}

// writeRefused is the answer to a write refused by a bound of the writes in flight: 503 when
// the server has no place left, 429 when the key or the organization holds its share (the
// client is asked to slow down, not told the server is down).
func (a *API) writeRefused(r refusal) *Error {
	var e *Error
	switch r {
	case refusedKey:
		e = apiError(http.StatusTooManyRequests, "Too many writes of the API key in progress (at most %d at once); retry after 1 s",
			a.cfg.Limits.KeyInFlightWrites)
	case refusedOrg:
		e = apiError(http.StatusTooManyRequests, "Too many writes of the organization in progress (at most %d at once); retry after 1 s",
			a.cfg.Limits.OrgInFlightWrites)
	default:
		e = apiError(http.StatusServiceUnavailable, "Too many writes in progress; retry shortly")
	}
	e.RetryAfter = 1
	return e
}

// withinLimits takes the request's tokens, or answers 429 with Retry-After and reports false.
func (a *API) withinLimits(ctx huma.Context, p *Principal) bool {
	keyID := p.KeyID
	if p.Anonymous {
		keyID = "anonymous/" + p.Org.ID
	}
	refused, wait := a.limits.allow(a.clock(), keyID, p.Org.ID)
	if wait <= 0 {
		return true
	}
	secs := retryAfter(wait)
	e := apiError(http.StatusTooManyRequests, "Rate limit of the %s exceeded; retry after %d s", refused, secs)
	e.RetryAfter = secs
	a.writeErr(ctx, e)
	return false
}

// authenticate resolves the caller. Without a key, or with a valid key of another
// organization, a public operation of a public organization is served anonymously; an
// invalid, expired or revoked key is refused even there.
func (a *API) authenticate(ctx context.Context, header, orgName string, public bool) (*Principal, error) {
	secret := bearer(header)
	if secret == "" {
		if public {
			if p, err := a.anonymous(ctx, orgName); p != nil || err != nil {
				return p, err
			}
		}
		return nil, apiError(http.StatusUnauthorized, "Authentication required: send an API key as 'Authorization: Bearer <key>'")
	}
	p, err := a.principal(ctx, secret, orgName)
	var e *Error
	if public && errors.As(err, &e) && e.Status == http.StatusForbidden {
		if anon, aerr := a.anonymous(ctx, orgName); anon != nil || aerr != nil {
			return anon, aerr
		}
	}
	return p, err
}

// anonymous is the anonymous principal of a public organization, nil when the organization is
// not public or does not exist (the caller cannot tell which).
func (a *API) anonymous(ctx context.Context, orgName string) (*Principal, error) {
	key := "\x01" + orgName // never a key's entry (hash, NUL, name): organization names hold no NUL
	if p, ok := a.cachedPrincipal(key); ok {
		return p, nil
	}
	org, err := a.store.OrgByName(ctx, orgName)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !org.Public) {
		return nil, nil
	}
	if err != nil {
		return nil, a.internal(ctx, "look up organization", err)
	}
	p := &Principal{Name: "anonymous", Org: org, Anonymous: true}
	a.cachePrincipal(key, p)
	return p, nil
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
	if p, ok := a.cachedPrincipal(key); ok {
		return p, nil
	}
	p, err := a.resolvePrincipal(ctx, h, orgName)
	if err == nil {
		a.cachePrincipal(key, p)
	}
	return p, err
}

func (a *API) cachedPrincipal(key string) (*Principal, bool) {
	v, ok := a.principals.Load(key)
	if !ok {
		return nil, false
	}
	if c := v.(cachedPrincipal); a.clock().Before(c.expires) {
		return c.p, true
	}
	a.principals.Delete(key)
	return nil, false
}

// cachePrincipal keeps p for principalTTL, or until its key expires if that is sooner.
func (a *API) cachePrincipal(key string, p *Principal) {
	expires := a.clock().Add(principalTTL)
	if p.expiresAt > 0 {
		if at := time.UnixMicro(int64(p.expiresAt * 1e6)); at.Before(expires) {
			expires = at
		}
	}
	a.principals.Store(key, cachedPrincipal{p: p, expires: expires})
}

// forgetPrincipals drops every cached principal: after this process changed an identity, its
// own next request must see the change (other processes see it within principalTTL).
func (a *API) forgetPrincipals() { a.principals.Clear() }

func (a *API) resolvePrincipal(ctx context.Context, h []byte, orgName string) (*Principal, error) {
	k, err := a.store.KeyByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) || (err == nil && subtle.ConstantTimeCompare(k.Hash, h) != 1) {
		return nil, apiError(http.StatusUnauthorized, "Invalid API key")
	}
	if err != nil {
		return nil, a.internal(ctx, "look up api key", err)
	}
	if k.Revoked || (k.ExpiresAt > 0 && unixSeconds(a.clock()) >= k.ExpiresAt) {
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
	p := &Principal{KeyID: k.ID, Name: k.Name, Org: org, Role: k.Role, expiresAt: k.ExpiresAt}
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

func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }
