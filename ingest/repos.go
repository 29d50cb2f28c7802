package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/store"
)

// repoProviders are the providers `kosli` knows (--repo-provider, and circleci); list repos
// refuses others.
var repoProviders = []string{"github", "gitlab", "bitbucket", "bitbucket_cloud", "bitbucket_dc", "azure-devops",
	"azure_devops_services", "azure_devops_server", "git", "subversion", "circleci"}

// RepoView is a repository as `kosli get repo` and `list repos` read it.
type RepoView struct {
	ID       string            `json:"id" doc:"the inner id tags address"`
	Name     string            `json:"name"`
	URL      string            `json:"url"`
	Provider string            `json:"provider"`
	Tags     map[string]string `json:"tags"`
}

func repoView(r store.Repo) RepoView {
	tags := r.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	return RepoView{ID: r.ID, Name: r.Name, URL: r.URL, Provider: r.Provider, Tags: tags}
}

// repoNotFound is the hosted service's answer for a name (or id) no repo has.
func repoNotFound(name string) error {
	return apiError(http.StatusNotFound, "Repo '%s' not found", name)
}

// repoNamed resolves a repository name (and a provider, when given): one repo, or a 404, or a
// 400 naming the providers when the name is shared and no provider says which.
func (a *API) repoNamed(ctx context.Context, p *Principal, name, provider string) (store.Repo, error) {
	repos, err := a.store.ListRepos(ctx, p.Org.ID)
	if err != nil {
		return store.Repo{}, a.internal(ctx, "list repos", err)
	}
	var named []store.Repo
	for _, r := range repos {
		if r.Name == name && (provider == "" || r.Provider == provider) {
			named = append(named, r)
		}
	}
	switch {
	case len(named) == 0:
		return store.Repo{}, repoNotFound(name)
	case len(named) > 1 && provider == "":
		var providers []string
		for _, r := range named {
			if !slices.Contains(providers, r.Provider) {
				providers = append(providers, r.Provider)
			}
		}
		slices.Sort(providers)
		return store.Repo{}, apiError(http.StatusBadRequest, "Multiple repos named '%s' exist (%s). Specify the 'provider'",
			name, strings.Join(providers, ", "))
	}
	return named[0], nil // several with the provider given (different ids): any of them
}

// knownRepos answers 404 for the first name no repository of the organization has.
func (a *API) knownRepos(ctx context.Context, p *Principal, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	repos, err := a.store.ListRepos(ctx, p.Org.ID)
	if err != nil {
		return a.internal(ctx, "list repos", err)
	}
	for _, n := range names {
		if !slices.ContainsFunc(repos, func(r store.Repo) bool { return r.Name == n }) {
			return repoNotFound(n)
		}
	}
	return nil
}

// repoByID finds a repository by its inner id.
func (a *API) repoByID(ctx context.Context, p *Principal, id string) (store.Repo, error) {
	r, err := a.store.RepoByID(ctx, p.Org.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return r, repoNotFound(id)
	}
	if err != nil {
		return r, a.internal(ctx, "look up repo", err)
	}
	return r, nil
}

func (a *API) registerRepos() {
	const tag = "Repositories"
	type repoListInput struct {
		OrgPath
		Page          int      `query:"page" minimum:"0"`
		PerPage       int      `query:"per_page" minimum:"0" maximum:"50" doc:"default 15"`
		Name          string   `query:"name" doc:"the exact full name"`
		Search        string   `query:"search" doc:"a part of the name, any case"`
		Provider      string   `query:"provider" doc:"github, gitlab, bitbucket, bitbucket_cloud, bitbucket_dc, azure-devops, azure_devops_services, azure_devops_server, git, subversion or circleci"`
		RepoID        string   `query:"repo_id" doc:"the provider's (external) id"`
		SortDirection string   `query:"sort_direction" doc:"by name: asc (default) or desc"`
		Tags          []string `query:"tag,explode" doc:"key (the tag is set) or key:value; repeat for all of several"`
	}
	type repoListBody struct {
		Repos      []RepoView `json:"repos"`
		Page       int        `json:"page"`
		PerPage    int        `json:"per_page"`
		TotalPages int        `json:"total_pages"`
		TotalCount int        `json:"total_count"`
	}
	type listOutput struct{ Body repoListBody }
	huma.Register(a.huma, op(http.MethodGet, "/repos/{org}", "listRepos", PrivRead, "List repositories", tag),
		func(ctx context.Context, in *repoListInput) (*listOutput, error) {
			p := principalFrom(ctx)
			c := checker{}
			checkChoice(c, "provider", in.Provider, repoProviders)
			checkChoice(c, "sort_direction", in.SortDirection, sortDirections)
			if len(c) > 0 {
				return nil, validationFailed(c)
			}
			all, err := a.store.ListRepos(ctx, p.Org.ID)
			if err != nil {
				return nil, a.internal(ctx, "list repos", err)
			}
			search := strings.ToLower(in.Search)
			var repos []store.Repo
			for _, r := range all {
				if (in.Name == "" || r.Name == in.Name) && strings.Contains(strings.ToLower(r.Name), search) &&
					(in.Provider == "" || r.Provider == in.Provider) && (in.RepoID == "" || r.ExternalID == in.RepoID) && tagsMatch(r.Tags, in.Tags) {
					repos = append(repos, r)
				}
			}
			if in.SortDirection == "desc" {
				slices.Reverse(repos) // the store lists by name
			}
			pg := pageOf(in.Page, in.PerPage, 15)
			lo, hi := window(len(repos), pg)
			out := &listOutput{Body: repoListBody{Repos: make([]RepoView, 0, hi-lo), PerPage: pg.PerPage, TotalCount: len(repos)}}
			for _, r := range repos[lo:hi] {
				out.Body.Repos = append(out.Body.Repos, repoView(r))
			}
			pages := pagination(len(repos), pg)
			out.Body.Page, out.Body.TotalPages = pages.Page, pages.PageCount
			return out, nil
		})

	// A name with '/' arrives as several path segments (the CLI joins paths with
	// url.JoinPath): one route per depth, owner/repo and group/owner/repo included.
	type RepoQuery struct {
		Provider string `query:"provider" doc:"which of the repos sharing the name"`
		ID       string `query:"id" doc:"the inner id: when given, the path's name is ignored"`
	}
	type repoOutput struct{ Body RepoView }
	get := func(ctx context.Context, name string, q RepoQuery) (*repoOutput, error) {
		p := principalFrom(ctx)
		var r store.Repo
		var err error
		if q.ID != "" {
			r, err = a.repoByID(ctx, p, q.ID)
		} else {
			r, err = a.repoNamed(ctx, p, name, q.Provider)
		}
		if err != nil {
			return nil, err
		}
		return &repoOutput{Body: repoView(r)}, nil
	}
	type repoPath1 struct {
		OrgPath
		Name string `path:"name"`
		RepoQuery
	}
	huma.Register(a.huma, op(http.MethodGet, "/repos/{org}/{name}", "getRepo", PrivRead, "Get a repository by name (or ?id=)", tag),
		func(ctx context.Context, in *repoPath1) (*repoOutput, error) { return get(ctx, in.Name, in.RepoQuery) })
	type repoPath2 struct {
		OrgPath
		Owner string `path:"owner"`
		Name  string `path:"name"`
		RepoQuery
	}
	huma.Register(a.huma, op(http.MethodGet, "/repos/{org}/{owner}/{name}", "getRepoOfOwner", PrivRead,
		"Get a repository named owner/name", tag),
		func(ctx context.Context, in *repoPath2) (*repoOutput, error) {
			return get(ctx, in.Owner+"/"+in.Name, in.RepoQuery)
		})
	type repoPath3 struct {
		OrgPath
		Group string `path:"group"`
		Owner string `path:"owner"`
		Name  string `path:"name"`
		RepoQuery
	}
	huma.Register(a.huma, op(http.MethodGet, "/repos/{org}/{group}/{owner}/{name}", "getRepoInGroup", PrivRead,
		"Get a repository named group/owner/name", tag),
		func(ctx context.Context, in *repoPath3) (*repoOutput, error) {
			return get(ctx, in.Group+"/"+in.Owner+"/"+in.Name, in.RepoQuery)
		})
	// Deeper names (GitLab nests subgroups): one operation per depth up to maxRepoDepth, each
	// with a plain path template so that the OpenAPI description stays matchable segment by
	// segment; the input reads the name from the path it was asked for.
	for depth := 4; depth <= maxRepoDepth; depth++ {
		o := op(http.MethodGet, "/repos/{org}"+strings.Repeat("/{s}", depth), fmt.Sprintf("getRepoDepth%d", depth), PrivRead,
			fmt.Sprintf("Get a repository whose name has %d segments (group/subgroup/.../name)", depth), tag)
		for i := 1; i <= depth; i++ {
			name := fmt.Sprintf("s%d", i)
			o.Path = strings.Replace(o.Path, "{s}", "{"+name+"}", 1)
			o.Parameters = append(o.Parameters, &huma.Param{Name: name, In: "path", Required: true,
				Schema: &huma.Schema{Type: huma.TypeString}, Description: fmt.Sprintf("segment %d of the name", i)})
		}
		huma.Register(a.huma, o, func(ctx context.Context, in *repoPathDeep) (*repoOutput, error) {
			return get(ctx, in.fullName, RepoQuery{Provider: in.Provider, ID: in.ID})
		})
	}
}

// maxRepoDepth is the most path segments a repository name served by name may have: GitLab
// allows deeper nesting, but names past ten segments are not seen in practice, and each depth is
// an operation of its own in the description.
const maxRepoDepth = 10

// repoPathDeep is the input of a repository name of four or more segments.
type repoPathDeep struct {
	OrgPath
	Provider string `query:"provider" doc:"which of the repos sharing the name"`
	ID       string `query:"id" doc:"the inner id: when given, the path's name is ignored"`
	fullName string
}

// Resolve takes the name from the path: everything after the organization, its segments
// unescaped one by one.
func (in *repoPathDeep) Resolve(ctx huma.Context) []error {
	u := ctx.URL()
	path := u.EscapedPath()
	marker := "/repos/" + url.PathEscape(in.Org) + "/"
	i := strings.Index(path, marker)
	if i < 0 {
		return []error{&huma.ErrorDetail{Location: "path.name", Message: "the repository name could not be read from the path", Value: path}}
	}
	segments := strings.Split(strings.TrimSuffix(path[i+len(marker):], "/"), "/")
	for j, seg := range segments {
		s, err := url.PathUnescape(seg)
		if err != nil {
			return []error{&huma.ErrorDetail{Location: "path.name", Message: "invalid escape in the path", Value: seg}}
		}
		segments[j] = s
	}
	in.fullName = strings.Join(segments, "/")
	return nil
}
