package store

import "context"

// Roles lists every role, most powerful first.
func Roles() []Role { return []Role{RoleAdmin, RoleMember, RoleSnapshotter, RoleReader} }

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool {
	switch r {
	case RoleAdmin, RoleMember, RoleSnapshotter, RoleReader:
		return true
	}
	return false
}

// ServiceAccount is a non-person identity of one organization (a CI pipeline, a snapshot
// reporter). Its keys act with its Privilege, which can be changed.
type ServiceAccount struct {
	ID             string
	OrgID          string
	Name           string
	Description    string
	Privilege      Role
	CreatedBy      string
	CreatedAt      float64
	LastModifiedAt float64
}

// AuditRecord says who did what: one accepted write.
type AuditRecord struct {
	ID        string // the bus message ID for evidence writes, so redelivery records it once
	OrgID     string
	KeyID     string
	Actor     string // display name of the caller
	Operation string // the API operation ID
	Target    string // the request path below /api/v2
	Outcome   string // AuditApplied or AuditRejected
	At        float64
}

// Outcomes of an audited write.
const (
	AuditApplied = "applied"
	// AuditRejected is a write that was accepted (answered 2xx) but could never apply, for
	// example because its flow was archived before the evaluator reached it.
	AuditRejected = "rejected"
)

// AuditFilter narrows ListAudit.
type AuditFilter struct {
	KeyID string // "" = every key
	Page
}

// IdentityReader reads service accounts, keys and the audit log.
type IdentityReader interface {
	ServiceAccountByName(ctx context.Context, orgID, name string) (ServiceAccount, error)
	// ListServiceAccounts lists an organization's accounts by name.
	ListServiceAccounts(ctx context.Context, orgID string) ([]ServiceAccount, error)
	// ServiceAccountKeys lists an account's keys that are not revoked, oldest first.
	ServiceAccountKeys(ctx context.Context, serviceAccountID string) ([]APIKey, error)
	KeyByID(ctx context.Context, id string) (APIKey, error)
	// ListAudit lists an organization's audit records, newest first.
	ListAudit(ctx context.Context, orgID string, f AuditFilter) ([]AuditRecord, int, error)
}

// AuditWriter appends to the audit log. Inserting an ID that exists keeps the first record.
type AuditWriter interface {
	InsertAudit(ctx context.Context, r AuditRecord) error
	// InsertAudits is InsertAudit for many records, in one round trip per 3,000.
	InsertAudits(ctx context.Context, rs []AuditRecord) error
}

// IdentityTx is one transaction over service accounts and keys, and over replay requests. The
// API writes these directly, not through the bus: a key must work on the very next request, a
// replay request is no evidence, and each change is stored with its audit record in the same
// transaction.
type IdentityTx interface {
	Reader
	AuditWriter
	ReplayRequester
	CreateServiceAccount(ctx context.Context, sa ServiceAccount) error
	// UpdateServiceAccount replaces the name, description and privilege of the account sa.ID.
	UpdateServiceAccount(ctx context.Context, sa ServiceAccount) error
	// DeleteServiceAccount removes the account and revokes its keys.
	DeleteServiceAccount(ctx context.Context, orgID, id string) error
	CreateKey(ctx context.Context, k APIKey) error
	// RevokeKey archives a key; a key that is unknown or revoked already is ErrNotFound.
	RevokeKey(ctx context.Context, id string) error
	// SetDefaultOrg records the organization a user works in by default; an unknown user is
	// ErrNotFound.
	SetDefaultOrg(ctx context.Context, userID, orgID string) error
	// ExpireKeyBy makes a key expire at `at` unless it expires sooner already.
	ExpireKeyBy(ctx context.Context, id string, at float64) error
}

// IdentityStore runs identity transactions.
type IdentityStore interface {
	UpdateIdentities(ctx context.Context, fn func(IdentityTx) error) error
}
