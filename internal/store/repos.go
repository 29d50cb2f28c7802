package store

import "context"

// Repo is a source repository, known from the repo_info that trails, attestations and
// artifacts carry. Repos are keyed on (provider, external id, name): one external id may
// arrive under several names, all of which stay findable, and a name may belong to several
// repos (different ids or providers).
type Repo struct {
	ID         string // the inner id the API shows and tags address
	OrgID      string
	Provider   string
	ExternalID string
	Name       string
	URL        string
	Tags       map[string]string
	CreatedAt  float64
}

// RepoReader reads an organization's repos.
type RepoReader interface {
	// ListRepos lists the organization's repos by name (then provider and external id).
	ListRepos(ctx context.Context, orgID string) ([]Repo, error)
	RepoByID(ctx context.Context, orgID, id string) (Repo, error)
}

// RepoWriter records repos.
type RepoWriter interface {
	// EnsureRepo records r unless a repo of its organization, provider, external id and name
	// exists (then it keeps that one, its id and tags).
	EnsureRepo(ctx context.Context, r Repo) error
	SetRepoTags(ctx context.Context, orgID, id string, tags map[string]string) error
}
