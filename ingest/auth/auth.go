// Package auth holds who a caller is and what it may do: API keys (how secrets are made and
// stored), the resolution of a key to a principal acting in one organization (with a short-lived
// cache), anonymous readers of public organizations, the privileges operations declare and the
// role table that grants them. It answers with errors of its own; ingest's authorization hook
// turns them into HTTP answers.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

// Privilege is what an operation needs. Every operation declares one, and one hook compares it
// with the caller's role (Allows); handlers never check permissions themselves.
type Privilege string

const (
	PrivRead     Privilege = "read"     // every read
	PrivSnapshot Privilege = "snapshot" // reporting an environment snapshot
	PrivWrite    Privilege = "write"    // every other evidence write
	PrivAdmin    Privilege = "admin"    // service accounts, API keys, the audit log
)

// Allows is the role table: the privileges each role holds. Users hold the role of their
// membership, service accounts their privilege.
func Allows(role store.Role, need Privilege) bool {
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

// PublicOperation lists the operations an unauthenticated caller may use in a public
// organization: the reads of its flows, trails, artifacts, environments and snapshots. Every
// other operation (attestations, approvals, custom types, search, service accounts, keys, the
// audit log, any write) needs a key of the organization even there.
func PublicOperation(id string) bool {
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
	KeyID string
	// UserID is the user of a personal key; empty for a service account's key.
	UserID    string
	Name      string // display name: created_by, reported_by
	Org       store.Org
	Role      store.Role
	Anonymous bool
	// expiresAt is when the key stops working (0 = never): a cached principal must not outlive it.
	expiresAt float64
}

// HashKey is how API keys are stored: the SHA-256 of the secret. Secrets are long random
// strings, so a fast hash loses nothing against guessing and keeps lookups indexable.
func HashKey(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// NewSecret makes an API key secret: 32 random bytes, URL-safe, with a recognisable prefix.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return "vt_" + base64.RawURLEncoding.EncodeToString(b)
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

// Why a caller is refused. Authenticate returns one of these, or a *LookupError.
var (
	ErrNoKey      = errors.New("no API key")                        // none sent, and no anonymous access
	ErrInvalidKey = errors.New("invalid API key")                   // unknown
	ErrExpiredKey = errors.New("API key is expired or revoked")     // known, no longer valid
	ErrDenied     = errors.New("access denied to the organization") // valid, but not in this organization (or no such one)
)

// LookupError is a store failure while resolving a caller; What names the lookup.
type LookupError struct {
	What string
	Err  error
}

func (e *LookupError) Error() string { return fmt.Sprintf("%s: %v", e.What, e.Err) }
func (e *LookupError) Unwrap() error { return e.Err }

// Identities is what resolving a key reads of the store.
type Identities interface {
	OrgByName(ctx context.Context, name string) (store.Org, error)
	OrgByID(ctx context.Context, id string) (store.Org, error)
	UserOrgs(ctx context.Context, userID string) ([]store.Org, error)
	KeyByHash(ctx context.Context, hash []byte) (store.APIKey, error)
	UserByID(ctx context.Context, id string) (store.User, error)
	MemberRole(ctx context.Context, userID, orgID string) (store.Role, error)
}

// Authenticator resolves callers, from a short-lived cache when it can: every request needs its
// principal, and without the cache it costs two or three queries.
type Authenticator struct {
	store Identities
	clock func() time.Time
	// principals caches resolved keys and anonymous principals briefly (see principalTTL).
	principals sync.Map // string -> cachedPrincipal
}

// NewAuthenticator resolves callers from st; clock is the time of key expiry.
func NewAuthenticator(st Identities, clock func() time.Time) *Authenticator {
	return &Authenticator{store: st, clock: clock}
}

// Authenticate resolves the caller from the Authorization header's value. Without a key, or
// with a valid key of another organization, a public operation of a public organization is
// served anonymously; an invalid, expired or revoked key is refused even there.
func (a *Authenticator) Authenticate(ctx context.Context, header, orgName string, public bool) (*Principal, error) {
	var h []byte
	if secret := bearer(header); secret != "" {
		h = HashKey(secret)
	}
	return a.AuthenticateHash(ctx, h, orgName, public)
}

// AuthenticateHash is Authenticate for a key known by its hash (HashKey), nil for none: a web
// session keeps only the hash of the key it signed in with.
func (a *Authenticator) AuthenticateHash(ctx context.Context, keyHash []byte, orgName string, public bool) (*Principal, error) {
	if len(keyHash) == 0 {
		if public {
			if p, err := a.anonymous(ctx, orgName); p != nil || err != nil {
				return p, err
			}
		}
		return nil, ErrNoKey
	}
	p, err := a.principal(ctx, keyHash, orgName)
	if public && errors.Is(err, ErrDenied) {
		if anon, aerr := a.anonymous(ctx, orgName); anon != nil || aerr != nil {
			return anon, aerr
		}
	}
	return p, err
}

// anonymous is the anonymous principal of a public organization, nil when the organization is
// not public or does not exist (the caller cannot tell which).
func (a *Authenticator) anonymous(ctx context.Context, orgName string) (*Principal, error) {
	key := "\x01" + orgName // never a key's entry (hash, NUL, name): organization names hold no NUL
	if p, ok := a.cachedPrincipal(key); ok {
		return p, nil
	}
	org, err := a.store.OrgByName(ctx, orgName)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !org.Public) {
		return nil, nil
	}
	if err != nil {
		return nil, &LookupError{"look up organization", err}
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

// principal resolves a key, by its hash, in an organization.
func (a *Authenticator) principal(ctx context.Context, h []byte, orgName string) (*Principal, error) {
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

func (a *Authenticator) cachedPrincipal(key string) (*Principal, bool) {
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
func (a *Authenticator) cachePrincipal(key string, p *Principal) {
	expires := a.clock().Add(principalTTL)
	if p.expiresAt > 0 {
		if at := time.UnixMicro(int64(p.expiresAt * 1e6)); at.Before(expires) {
			expires = at
		}
	}
	a.principals.Store(key, cachedPrincipal{p: p, expires: expires})
}

// Forget drops every cached principal: after this process changed an identity, its own next
// request must see the change (other processes see it within principalTTL).
func (a *Authenticator) Forget() { a.principals.Clear() }

// liveKey is the key whose secret hashes to h, if it works now.
func (a *Authenticator) liveKey(ctx context.Context, h []byte) (store.APIKey, error) {
	k, err := a.store.KeyByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) || (err == nil && subtle.ConstantTimeCompare(k.Hash, h) != 1) {
		return k, ErrInvalidKey
	}
	if err != nil {
		return k, &LookupError{"look up api key", err}
	}
	if k.Revoked || (k.ExpiresAt > 0 && unixSeconds(a.clock()) >= k.ExpiresAt) {
		return k, ErrExpiredKey
	}
	return k, nil
}

// InDefaultOrg is the caller of an operation that names no organization (GET
// /user/default-org), acting in its default one: a service account's key works in its own
// organization only; a user's personal key in the organization the user chose (while still a
// member), else in the first of the user's organizations by name. A user of no organization is
// ErrDenied.
func (a *Authenticator) InDefaultOrg(ctx context.Context, header string) (*Principal, error) {
	secret := bearer(header)
	if secret == "" {
		return nil, ErrNoKey
	}
	k, err := a.liveKey(ctx, HashKey(secret))
	if err != nil {
		return nil, err
	}
	var org store.Org
	switch {
	case k.OrgID != "":
		org, err = a.store.OrgByID(ctx, k.OrgID)
	case k.UserID != "":
		org, err = a.userDefaultOrg(ctx, k.UserID)
	default:
		return nil, ErrDenied
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrDenied
	}
	if err != nil {
		return nil, &LookupError{"look up default organization", err}
	}
	return a.principal(ctx, HashKey(secret), org.Name)
}

func (a *Authenticator) userDefaultOrg(ctx context.Context, userID string) (store.Org, error) {
	u, err := a.store.UserByID(ctx, userID)
	if err != nil {
		return store.Org{}, err
	}
	orgs, err := a.store.UserOrgs(ctx, userID)
	if err != nil {
		return store.Org{}, err
	}
	for _, o := range orgs {
		if o.ID == u.DefaultOrgID {
			return o, nil
		}
	}
	if len(orgs) == 0 {
		return store.Org{}, store.ErrNotFound
	}
	return orgs[0], nil
}

func (a *Authenticator) resolvePrincipal(ctx context.Context, h []byte, orgName string) (*Principal, error) {
	k, err := a.liveKey(ctx, h)
	if err != nil {
		return nil, err
	}
	org, err := a.store.OrgByName(ctx, orgName)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrDenied // the same answer whether or not the organization exists
	}
	if err != nil {
		return nil, &LookupError{"look up organization", err}
	}
	p := &Principal{KeyID: k.ID, UserID: k.UserID, Name: k.Name, Org: org, Role: k.Role, expiresAt: k.ExpiresAt}
	switch {
	case k.OrgID != "":
		if k.OrgID != org.ID {
			return nil, ErrDenied
		}
	case k.UserID != "":
		role, err := a.store.MemberRole(ctx, k.UserID, org.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, ErrDenied
		}
		if err != nil {
			return nil, &LookupError{"look up membership", err}
		}
		p.Role = role
		if u, err := a.store.UserByID(ctx, k.UserID); err == nil {
			p.Name = u.DisplayName
		}
	default:
		return nil, ErrDenied
	}
	return p, nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }
