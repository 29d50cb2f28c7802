package store

import "context"

// Control is a compliance control of an organization: decision attestations answer one, and a
// policy rule can require a passing decision for one. Versions are oldest first; the last is
// current.
type Control struct {
	OrgID      string
	Identifier string
	Archived   bool
	Tags       map[string]string
	Versions   []ControlVersion
}

// Current is the latest version (the zero value when there is none).
func (c Control) Current() ControlVersion {
	if len(c.Versions) == 0 {
		return ControlVersion{}
	}
	return c.Versions[len(c.Versions)-1]
}

// ControlVersion is one immutable definition of a control.
type ControlVersion struct {
	Version     int
	Name        string
	Description string
	// Links are labelled URLs (runbooks, documents); nil when the version has none.
	Links     map[string]string
	CreatedBy string
	CreatedAt float64
}

// ControlFilter narrows ListControls.
type ControlFilter struct {
	Page
	Archived bool // list the archived controls instead of the active ones
}

// ControlReader reads controls.
type ControlReader interface {
	Control(ctx context.Context, orgID, identifier string) (Control, error)
	// ListControls pages controls by identifier and answers the total count with them.
	ListControls(ctx context.Context, orgID string, f ControlFilter) ([]Control, int, error)
}

// ControlWriter changes controls.
type ControlWriter interface {
	// PutControlVersion adds a version, creating the control with the first.
	PutControlVersion(ctx context.Context, orgID, identifier string, v ControlVersion) error
	SetControlArchived(ctx context.Context, orgID, identifier string, archived bool) error
	SetControlTags(ctx context.Context, orgID, identifier string, tags map[string]string) error
}
