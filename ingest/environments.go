package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// environmentTypes are the environment kinds; all but logical take snapshot reports.
var environmentTypes = []string{"K8S", "ECS", "S3", "lambda", "server", "docker", "azure-apps", "cloud-run", "logical"}

// EnvPath names an environment.
type EnvPath struct {
	Org string `path:"org"`
	Env string `path:"env"`
}

// CreateEnvironmentPutInput is the body of create environment (named as the CLI's contract
// check expects in the OpenAPI).
type CreateEnvironmentPutInput struct {
	Name                 string   `json:"name" pattern:"^[a-zA-Z0-9][a-zA-Z0-9\\.\\-_]*$" maxLength:"256"`
	Type                 string   `json:"type" enum:"K8S,ECS,S3,lambda,server,docker,azure-apps,cloud-run,logical"`
	Description          string   `json:"description,omitempty" required:"false"`
	IncludeScaling       bool     `json:"include_scaling,omitempty" required:"false"`
	RequireProvenance    bool     `json:"require_provenance,omitempty" required:"false"`
	IncludedEnvironments []string `json:"included_environments,omitempty" required:"false" nullable:"true"`
}

// EnvironmentView is an environment as the API shows it.
type EnvironmentView struct {
	Org                  string            `json:"org"`
	Name                 string            `json:"name"`
	Type                 string            `json:"type"`
	Description          string            `json:"description"`
	LastModifiedAt       float64           `json:"last_modified_at"`
	LastReportedAt       *float64          `json:"last_reported_at"`
	LastChangedAt        *float64          `json:"last_changed_at"`
	State                *bool             `json:"state"`
	IncludeScaling       bool              `json:"include_scaling"`
	RequireProvenance    bool              `json:"require_provenance"`
	Tags                 map[string]string `json:"tags"`
	Policies             []string          `json:"policies"`
	IncludedEnvironments []string          `json:"included_environments"`
	HTMLURL              string            `json:"html_url"`
}

// sortEnvironments orders a list by name (the default), last_modified_at or last_changed_at,
// ties by name.
func sortEnvironments(envs []store.Environment, by string, desc bool) {
	key := func(e store.Environment) float64 {
		switch by {
		case "last_modified_at":
			return e.LastModifiedAt
		case "last_changed_at":
			return e.LastChangedAt
		}
		return 0
	}
	slices.SortStableFunc(envs, func(x, y store.Environment) int {
		d := cmp.Compare(key(x), key(y))
		if d == 0 {
			d = strings.Compare(x.Name, y.Name)
		}
		if desc {
			return -d
		}
		return d
	})
}

func zeroNil(f float64) *float64 {
	if f == 0 {
		return nil
	}
	return &f
}

func (a *API) envURL(org, env string) string {
	return a.cfg.BaseURL + "/" + org + "/environments/" + env
}

// environmentView shows e with the names of the policies attached to it.
func (a *API) environmentView(ctx context.Context, p *Principal, e store.Environment, policies []string) EnvironmentView {
	v := EnvironmentView{Org: p.Org.Name, Name: e.Name, Type: e.Type, Description: e.Description, LastModifiedAt: e.LastModifiedAt,
		LastReportedAt: zeroNil(e.LastReportedAt), LastChangedAt: zeroNil(e.LastChangedAt), State: e.State,
		IncludeScaling: e.IncludeScaling, RequireProvenance: e.RequireProvenance, Tags: e.Tags, Policies: policies,
		HTMLURL: a.envURL(p.Org.Name, e.Name)}
	if v.Policies == nil {
		v.Policies = []string{}
	}
	if v.Tags == nil {
		v.Tags = map[string]string{}
	}
	if e.Type == "logical" {
		v.IncludedEnvironments = []string{}
		for _, id := range e.Included {
			if m, err := a.store.EnvironmentByID(ctx, p.Org.ID, id); err == nil && !m.Archived {
				v.IncludedEnvironments = append(v.IncludedEnvironments, m.Name)
			}
		}
	}
	return v
}

// environmentByName finds a live environment; archived ones answer 404 like unknown ones.
func (a *API) environmentByName(ctx context.Context, p *Principal, name string) (store.Environment, error) {
	e, err := lookup(ctx, a, p, func() (store.Environment, error) { return a.store.EnvironmentByName(ctx, p.Org.ID, name) })
	if errors.Is(err, store.ErrNotFound) {
		return e, apiError(http.StatusNotFound, "Environment named '%s' does not exist for organization '%s'", name, p.Org.Name)
	}
	if err != nil {
		return e, a.internal(ctx, "look up environment", err)
	}
	return e, nil
}

func (a *API) registerEnvironments() {
	type createInput struct {
		OrgPath
		Body CreateEnvironmentPutInput
	}
	o := op(http.MethodPut, "/environments/{org}", "createEnvironment", PrivWrite, "Create (201) or update (200) an environment", "Environments")
	o.DefaultStatus = http.StatusCreated
	huma.Register(a.huma, o, func(ctx context.Context, in *createInput) (*stringOutput, error) {
		p := principalFrom(ctx)
		b := in.Body
		c := checker{}
		c.name("name", b.Name, envNameRE, envNamePattern)
		if b.Type != "logical" && len(b.IncludedEnvironments) > 0 {
			c["included_environments"] = "Only a logical environment includes other environments"
		}
		if err := c.err(); err != nil {
			return nil, err
		}
		var included []string
		for i, name := range b.IncludedEnvironments {
			m, err := a.environmentByName(ctx, p, name)
			if err != nil {
				return nil, fieldError(fmt.Sprintf("included_environments[%d]", i), "Environment named '%s' does not exist for organization '%s'", name, p.Org.Name)
			}
			if m.Type == "logical" {
				return nil, fieldError(fmt.Sprintf("included_environments[%d]", i), "'%s' is logical; only physical environments can be included", name)
			}
			included = append(included, m.ID)
		}
		existing, err := lookup(ctx, a, p, func() (store.Environment, error) { return a.store.EnvironmentByName(ctx, p.Org.ID, b.Name) })
		created := errors.Is(err, store.ErrNotFound)
		if err != nil && !created {
			return nil, a.internal(ctx, "look up environment", err)
		}
		id := existing.ID
		if created {
			id = newID()
		} else if existing.Type != b.Type {
			return nil, fieldError("type", "Environment '%s' is of type '%s'; its type cannot change", b.Name, existing.Type)
		}
		env := &contract.Envelope{Kind: contract.KindEnvironmentUpserted, Environment: &contract.EnvironmentUpsert{
			ID: id, Name: b.Name, Type: b.Type, Description: b.Description, IncludeScaling: b.IncludeScaling,
			RequireProvenance: b.RequireProvenance, IncludedEnvironments: included}}
		if err := a.publish(ctx, p, env); err != nil {
			return nil, err
		}
		// The hosted service's body, "OK", either way; the status tells created from updated.
		if created {
			return &stringOutput{Status: http.StatusCreated, Body: "OK"}, nil
		}
		return &stringOutput{Status: http.StatusOK, Body: "OK"}, nil
	})

	type getOutput struct{ Body EnvironmentView }
	huma.Register(a.huma, op(http.MethodGet, "/environments/{org}/{env}", "getEnvironment", PrivRead, "Get an environment", "Environments"),
		func(ctx context.Context, in *EnvPath) (*getOutput, error) {
			p := principalFrom(ctx)
			e, err := a.environmentByName(ctx, p, in.Env)
			if err != nil {
				return nil, err
			}
			attached, err := a.store.AttachedPolicyNames(ctx, p.Org.ID)
			if err != nil {
				return nil, a.internal(ctx, "look up policies", err)
			}
			return &getOutput{Body: a.environmentView(ctx, p, e, attached[e.ID])}, nil
		})

	type listInput struct {
		OrgPath
		Page          int      `query:"page" minimum:"0"`
		PerPage       int      `query:"per_page" minimum:"0" maximum:"100"`
		Name          string   `query:"name" doc:"a part of the name, any case"`
		Types         []string `query:"type,explode" doc:"K8S, ECS, S3, lambda, server, docker, azure-apps, cloud-run or logical (exact case); repeat for any of several"`
		SpaceIDs      []string `query:"space_id,explode" doc:"spaces: Veritrail has none, so no environment is in one"`
		Tags          []string `query:"tag,explode" doc:"key (the tag is set) or key:value; repeat for all of several"`
		Sort          string   `query:"sort" doc:"name (default), last_modified_at or last_changed_at"`
		SortDirection string   `query:"sort_direction" doc:"asc (default) or desc"`
	}
	type listOutput struct {
		Body any `doc:"A bare array, or {page, per_page, total_pages, total_count, environments} when page or per_page is given"`
	}
	huma.Register(a.huma, op(http.MethodGet, "/environments/{org}", "listEnvironments", PrivRead, "List environments", "Environments"),
		func(ctx context.Context, in *listInput) (*listOutput, error) {
			p := principalFrom(ctx)
			c := checker{}
			for i, t := range in.Types {
				checkChoice(c, fmt.Sprintf("type[%d]", i), t, environmentTypes)
			}
			checkChoice(c, "sort", in.Sort, []string{"name", "last_modified_at", "last_changed_at"})
			checkChoice(c, "sort_direction", in.SortDirection, sortDirections)
			if len(c) > 0 {
				return nil, validationFailed(c)
			}
			pg, paged := optionalPage(in.Page, in.PerPage)
			all, _, err := a.store.ListEnvironments(ctx, p.Org.ID, store.Page{})
			if err != nil {
				return nil, a.internal(ctx, "list environments", err)
			}
			envs := make([]store.Environment, 0, len(all))
			for _, e := range all {
				if strings.Contains(strings.ToLower(e.Name), strings.ToLower(in.Name)) && (len(in.Types) == 0 || slices.Contains(in.Types, e.Type)) &&
					len(in.SpaceIDs) == 0 && tagsMatch(e.Tags, in.Tags) {
					envs = append(envs, e)
				}
			}
			sortEnvironments(envs, in.Sort, in.SortDirection == "desc")
			attached, err := a.store.AttachedPolicyNames(ctx, p.Org.ID)
			if err != nil {
				return nil, a.internal(ctx, "look up policies", err)
			}
			lo, hi := window(len(envs), pg)
			views := make([]EnvironmentView, 0, hi-lo)
			for _, e := range envs[lo:hi] {
				views = append(views, a.environmentView(ctx, p, e, attached[e.ID]))
			}
			if !paged {
				return &listOutput{Body: views}, nil
			}
			pages := pagination(len(envs), pg)
			return &listOutput{Body: map[string]any{"page": pages.Page, "per_page": pages.PerPage, "total_pages": pages.PageCount,
				"total_count": len(envs), "environments": views}}, nil
		})

	type patchInput struct {
		EnvPath
		Body struct {
			Description    *string `json:"description,omitempty" required:"false" doc:"an empty string clears it"`
			IncludeScaling *bool   `json:"include_scaling,omitempty" required:"false"`
		}
	}
	huma.Register(a.huma, op(http.MethodPatch, "/environments/{org}/{env}", "updateEnvironment", PrivWrite, "Update single fields of an environment", "Environments"),
		func(ctx context.Context, in *patchInput) (*stringOutput, error) {
			return a.changeEnvironment(ctx, in.Env, "updated", func(c *contract.EnvironmentChange) error {
				c.Description, c.IncludeScaling = in.Body.Description, in.Body.IncludeScaling
				return nil
			})
		})

	type envRenameInput struct {
		EnvPath
		Body struct {
			NewName string `json:"new_name" pattern:"^[a-zA-Z0-9][a-zA-Z0-9\\.\\-_]*$" maxLength:"256"`
		}
	}
	huma.Register(a.huma, op(http.MethodPut, "/environments/{org}/{env}/rename", "renameEnvironment", PrivWrite, "Rename an environment", "Environments"),
		func(ctx context.Context, in *envRenameInput) (*stringOutput, error) {
			p := principalFrom(ctx)
			return a.changeEnvironment(ctx, in.Env, "renamed", func(c *contract.EnvironmentChange) error {
				n := in.Body.NewName
				ck := checker{}
				ck.name("new_name", n, envNameRE, envNamePattern)
				if err := ck.err(); err != nil {
					return err
				}
				if _, err := a.store.EnvironmentByName(ctx, p.Org.ID, n); err == nil {
					return fieldError("new_name", "An environment named '%s' already exists", n)
				}
				c.NewName = &n
				return nil
			})
		})

	huma.Register(a.huma, op(http.MethodPut, "/environments/{org}/{env}/archive", "archiveEnvironment", PrivWrite, "Archive an environment", "Environments"),
		func(ctx context.Context, in *EnvPath) (*stringOutput, error) {
			return a.changeEnvironment(ctx, in.Env, "archived", func(c *contract.EnvironmentChange) error {
				c.Archive = true
				return nil
			})
		})

	type joinInput struct {
		EnvPath
		Body struct {
			PhysicalEnvName string `json:"physical_env_name"`
		}
	}
	huma.Register(a.huma, op(http.MethodPut, "/environments/{org}/{env}/join", "joinEnvironment", PrivWrite,
		"Join a physical environment to a logical one", "Environments"),
		func(ctx context.Context, in *joinInput) (*stringOutput, error) {
			p := principalFrom(ctx)
			return a.changeEnvironment(ctx, in.Env, "joined", func(c *contract.EnvironmentChange) error {
				logical, err := a.environmentByName(ctx, p, in.Env)
				if err != nil {
					return err
				}
				if logical.Type != "logical" {
					return fieldError("env", "Environment '%s' is not logical; only logical environments include others", in.Env)
				}
				phys, err := a.environmentByName(ctx, p, in.Body.PhysicalEnvName)
				if err != nil {
					return err
				}
				if phys.Type == "logical" {
					return fieldError("physical_env_name", "'%s' is logical; only physical environments can join", phys.Name)
				}
				c.JoinPhysical = phys.ID
				return nil
			})
		})

	type allowInput struct {
		EnvPath
		Body struct {
			ArtifactFingerprint string `json:"artifact_fingerprint" pattern:"^[a-f0-9]{64}$"`
			ArtifactName        string `json:"artifact_name,omitempty" required:"false"`
			Description         string `json:"description"`
		}
	}
	o = op(http.MethodPut, "/allowlists/{org}/{env}", "allowArtifact", PrivWrite, "Allow an artifact to run in an environment", "Environments")
	o.DefaultStatus = http.StatusCreated
	huma.Register(a.huma, o, func(ctx context.Context, in *allowInput) (*stringOutput, error) {
		p := principalFrom(ctx)
		e, err := a.environmentByName(ctx, p, in.Env)
		if err != nil {
			return nil, err
		}
		b := in.Body
		env := &contract.Envelope{Kind: contract.KindAllowlisted, Allow: &contract.AllowlistEntry{ID: newID(), EnvID: e.ID,
			Fingerprint: b.ArtifactFingerprint, ArtifactName: b.ArtifactName, Description: b.Description}}
		if err := a.publish(ctx, p, env); err != nil {
			return nil, err
		}
		return &stringOutput{Status: http.StatusCreated, Body: fmt.Sprintf("Artifact '%s' is allowed in environment '%s'", b.ArtifactFingerprint, in.Env)}, nil
	})

	a.registerSnapshotReports()
}

// changeEnvironment validates one change of an environment and publishes it.
func (a *API) changeEnvironment(ctx context.Context, name, verb string, fill func(*contract.EnvironmentChange) error) (*stringOutput, error) {
	p := principalFrom(ctx)
	e, err := a.environmentByName(ctx, p, name)
	if err != nil {
		return nil, err
	}
	c := &contract.EnvironmentChange{EnvID: e.ID}
	if err := fill(c); err != nil {
		return nil, err
	}
	if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindEnvironmentChanged, EnvChange: c}); err != nil {
		return nil, err
	}
	return &stringOutput{Status: http.StatusOK, Body: fmt.Sprintf("Environment '%s' was %s", name, verb)}, nil
}

// reportTypes maps the report path segment to the environment type it reports.
var reportTypes = map[string]string{"server": "server", "docker": "docker", "K8S": "K8S", "k8s": "K8S", "ECS": "ECS",
	"ecs": "ECS", "lambda": "lambda", "S3": "S3", "s3": "S3", "azure-apps": "azure-apps", "cloud-run": "cloud-run"}

func (a *API) registerSnapshotReports() {
	type reportInput struct {
		EnvPath
		Type string `path:"type" doc:"server, docker, K8S, ECS, lambda, S3, azure-apps or cloud-run"`
		Body struct {
			Artifacts []map[string]json.RawMessage `json:"artifacts" doc:"running artifacts: {digests: {name: sha256}, creationTimestamp, ...type-specific fields}"`
			// `kosli snapshot cloud-run` names the type in the body too.
			Type string `json:"type,omitempty" required:"false" doc:"the report's type, as the path gives it (cloud-run sends it)"`
		}
	}
	o := op(http.MethodPut, "/environments/{org}/{env}/report/{type}", "reportSnapshot", PrivSnapshot,
		"Report what runs in an environment", "Environments")
	o.DefaultStatus = http.StatusCreated
	o.MaxBodyBytes = 32 << 20 // a large cluster (~800 artifacts) is a few hundred KB; this leaves ample room
	huma.Register(a.huma, o, func(ctx context.Context, in *reportInput) (*stringOutput, error) {
		p := principalFrom(ctx)
		typ, ok := reportTypes[in.Type]
		if !ok {
			return nil, apiError(http.StatusNotFound, "Unknown environment report type '%s'", in.Type)
		}
		if bt := in.Body.Type; bt != "" && reportTypes[bt] != typ {
			return nil, fieldError("type", "Input should be '%s', the type the path reports [input: %s]", in.Type, echo(bt))
		}
		e, err := a.environmentByName(ctx, p, in.Env)
		if err != nil {
			return nil, err
		}
		if e.Type == "logical" || !strings.EqualFold(e.Type, typ) {
			return nil, fieldError("type", "Environment '%s' is of type '%s' and cannot take a %s report", e.Name, e.Type, typ)
		}
		instances, err := runningInstances(in.Body.Artifacts)
		if err != nil {
			return nil, err
		}
		env := &contract.Envelope{Kind: contract.KindSnapshotReported, Snapshot: &contract.SnapshotReport{EnvID: e.ID, Type: typ, Instances: instances}}
		if err := a.publish(ctx, p, env); err != nil {
			return nil, err
		}
		return &stringOutput{Status: http.StatusCreated, Body: fmt.Sprintf("Environment '%s' report received", e.Name)}, nil
	})
}

// runningInstances validates report items: each needs digests {name: sha256}; every other
// field is kept as the instance's context.
func runningInstances(items []map[string]json.RawMessage) ([]contract.RunningInstance, error) {
	c := checker{}
	var out []contract.RunningInstance
	for i, item := range items {
		var digests map[string]string
		if err := json.Unmarshal(item["digests"], &digests); err != nil || len(digests) == 0 {
			c[fmt.Sprintf("artifacts[%d].digests", i)] = "Field required: an object of artifact name to sha256 fingerprint"
			continue
		}
		var ts float64
		if raw, ok := item["creationTimestamp"]; ok && !isJSONNull(raw) {
			if err := json.Unmarshal(raw, &ts); err != nil {
				c[fmt.Sprintf("artifacts[%d].creationTimestamp", i)] = "Input should be a valid number"
			}
		}
		ctxFields := map[string]any{}
		for k, v := range item {
			if k == "digests" || k == "creationTimestamp" {
				continue
			}
			var x any
			if json.Unmarshal(v, &x) == nil {
				ctxFields[k] = x
			}
		}
		names := make([]string, 0, len(digests))
		for n := range digests {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			fp := digests[n]
			if !fingerprintRE.MatchString(fp) {
				c[fmt.Sprintf("artifacts[%d].digests.%s", i, n)] = patternError(fingerprintPattern, fp)
				continue
			}
			inst := contract.RunningInstance{Name: n, Fingerprint: fp, CreationTimestamp: ts}
			if len(ctxFields) > 0 {
				inst.Context = ctxFields
			}
			out = append(out, inst)
		}
	}
	return out, c.err()
}
