package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/envpolicy"
)

// PolicyPayload is the payload part of create policy. Keys beyond these are ignored.
type PolicyPayload struct {
	_           struct{} `additionalProperties:"true"`
	Name        string   `json:"name" required:"false" doc:"required on PUT /policies/{org}; on PUT /policies/{org}/{policy} the path names the policy, and a payload name must be the same"`
	Description string   `json:"description,omitempty"`
	Comment     string   `json:"comment,omitempty" doc:"what this version changes"`
	Type        string   `json:"type,omitempty" doc:"env (the default) or rego; a policy_file whose name ends in .rego is raw Rego too"`
}

// PolicyView is a policy as the API shows it.
type PolicyView struct {
	Name           string              `json:"name"`
	Description    string              `json:"description"`
	Type           string              `json:"type"` // env: an environment policy
	CreatedBy      string              `json:"created_by"`
	CreatedAt      float64             `json:"created_at"`
	LastModifiedAt float64             `json:"last_modified_at"`
	LatestVersion  int                 `json:"latest_version"`
	ConsumingEnvs  []string            `json:"consuming_envs"`
	Versions       []PolicyVersionView `json:"versions"`
	Org            string              `json:"org"`
	HTMLURL        string              `json:"html_url"`
}

// PolicyVersionView is one version of a policy, oldest first in PolicyView.Versions.
type PolicyVersionView struct {
	Version    int     `json:"version"`
	PolicyYAML string  `json:"policy_yaml" doc:"the policy file as uploaded (YAML, or Rego when format is rego)"`
	Format     string  `json:"format" enum:"yaml,rego"`
	Comment    string  `json:"comment"`
	CreatedBy  string  `json:"created_by"`
	CreatedAt  float64 `json:"created_at"`
}

func (a *API) policyView(org string, p store.Policy, consumers []string) PolicyView {
	latest := p.Latest()
	v := PolicyView{Name: p.Name, Description: p.Description, Type: "env", CreatedBy: p.CreatedBy, CreatedAt: p.CreatedAt,
		LastModifiedAt: latest.CreatedAt, LatestVersion: latest.Version, ConsumingEnvs: consumers, Org: org,
		HTMLURL: a.cfg.BaseURL + "/" + org + "/policies/" + p.Name, Versions: make([]PolicyVersionView, 0, len(p.Versions))}
	if v.ConsumingEnvs == nil {
		v.ConsumingEnvs = []string{}
	}
	for _, ver := range p.Versions {
		v.Versions = append(v.Versions, PolicyVersionView{Version: ver.Version, PolicyYAML: ver.Content, Format: ver.Format,
			Comment: ver.Comment, CreatedBy: ver.CreatedBy, CreatedAt: ver.CreatedAt})
	}
	return v
}

// policyConsumers maps each policy to the names of the live environments it is attached to.
func (a *API) policyConsumers(ctx context.Context, p *Principal) (map[string][]string, error) {
	attached, err := a.store.AttachedPolicyNames(ctx, p.Org.ID)
	if err != nil || len(attached) == 0 {
		return nil, err
	}
	envs, _, err := a.store.ListEnvironments(ctx, p.Org.ID, store.Page{})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range envs { // by name
		for _, name := range attached[e.ID] {
			out[name] = append(out[name], e.Name)
		}
	}
	return out, nil
}

func (a *API) policyNotFound(p *Principal, name string) *Error {
	return apiError(http.StatusNotFound, "Policy '%s' does not exist in organization '%s'", name, p.Org.Name)
}

// policyByName finds a policy of the caller's organization.
func (a *API) policyByName(ctx context.Context, p *Principal, name string) (store.Policy, error) {
	pol, err := lookup(ctx, a, p, func() (store.Policy, error) { return a.store.Policy(ctx, p.Org.ID, name) })
	if errors.Is(err, store.ErrNotFound) {
		return pol, a.policyNotFound(p, name)
	}
	if err != nil {
		return pol, a.internal(ctx, "look up policy", err)
	}
	return pol, nil
}

// policyFile is a validated policy file.
type policyFile struct {
	policy  *envpolicy.Policy
	format  string
	content string
}

// readPolicyFile parses the policy_file part of f. A raw Rego policy is marked by typ "rego" or a file name ending
// in .rego (the Kosli CLI always sends type env, and the file's name). for_control must name a control of the
// caller's organization.
func (a *API) readPolicyFile(ctx context.Context, p *Principal, f *form, typ string) (policyFile, error) {
	content, ok := f.part("policy_file")
	if !ok || len(content) == 0 {
		return policyFile{}, fieldError("policy_file", "Field required")
	}
	if msg := textPartProblem(content); msg != "" {
		return policyFile{}, fieldError("policy_file", "%s", msg)
	}
	out := policyFile{format: store.PolicyYAML, content: string(content)}
	if typ == "rego" || strings.HasSuffix(f.files["policy_file"].name, ".rego") {
		out.format = store.PolicyRego
	}
	var err error
	if out.format == store.PolicyRego {
		out.policy, err = envpolicy.ParseRego(content)
	} else {
		// Controls the caller created a moment ago must be found.
		a.awaitWrites(ctx, p)
		var storeErr error
		out.policy, err = envpolicy.Parse(content, envpolicy.ParseOptions{ControlExists: func(id string) bool {
			_, err := a.store.Control(ctx, p.Org.ID, id)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				storeErr = err
			}
			return err == nil
		}})
		if storeErr != nil {
			return out, a.internal(ctx, "look up control", storeErr)
		}
	}
	var ve *envpolicy.ValidationError
	if errors.As(err, &ve) {
		return out, policyValidationError(ve)
	}
	if err != nil {
		return out, fieldError("policy_file", "%v", err)
	}
	return out, nil
}

// policyValidationError is a 400 naming each field of the policy file that is wrong, under policy_file.
func policyValidationError(ve *envpolicy.ValidationError) *Error {
	fields := map[string]string{}
	for k, v := range ve.Fields() {
		if k != envpolicy.FieldPolicyFile {
			k = envpolicy.FieldPolicyFile + "." + k
		}
		fields[k] = v
	}
	return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("Invalid policy: %d error(s): %s", len(ve.Problems), fieldList(fields)),
		Errors: fields}
}

// checkPolicyType validates the payload's type.
func checkPolicyType(c checker, typ string) {
	if typ != "" && typ != "env" && typ != "rego" {
		c["type"] = fmt.Sprintf("Input should be 'env' or 'rego' [input: %s]", typ)
	}
}

// policyParts are the parts of the operations that take a policy file: the payload part is
// optional where the path names the policy.
func policyParts(optionalPayload bool) formParts {
	return formParts{json: "payload", optional: optionalPayload, files: []filePart{
		{name: "policy_file", doc: "The policy: YAML, or Rego (type rego, or a file name ending in .rego)", required: true},
	}}
}

// PolicyPath names one policy.
type PolicyPath struct {
	OrgPath
	Policy string `path:"policy" doc:"policy name"`
}

func (a *API) registerPolicies() {
	o := op(http.MethodPut, "/policies/{org}", "createPolicy", PrivWrite,
		"Create a policy (201) or add a version to it (200)", "Policies")
	o.DefaultStatus = http.StatusCreated
	registerForm(a, o, policyParts(false), func(ctx context.Context, in *orgForm, f *Form[PolicyPayload]) (*stringOutput, error) {
		return a.putPolicy(ctx, f, "")
	})

	type putNamedInput struct {
		PolicyPath
		FormBody
	}
	o = op(http.MethodPut, "/policies/{org}/{policy}", "putPolicy", PrivWrite,
		"Create the named policy (201) or add a version to it (200); payload is optional here", "Policies")
	o.DefaultStatus = http.StatusCreated
	registerForm(a, o, policyParts(true), func(ctx context.Context, in *putNamedInput, f *Form[PolicyPayload]) (*stringOutput, error) {
		return a.putPolicy(ctx, f, in.Policy)
	})

	type getOutput struct{ Body PolicyView }
	huma.Register(a.huma, op(http.MethodGet, "/policies/{org}/{policy}", "getPolicy", PrivRead, "Get a policy with its versions", "Policies"),
		func(ctx context.Context, in *PolicyPath) (*getOutput, error) {
			p := principalFrom(ctx)
			pol, err := a.policyByName(ctx, p, in.Policy)
			if err != nil {
				return nil, err
			}
			consumers, err := a.policyConsumers(ctx, p)
			if err != nil {
				return nil, a.internal(ctx, "look up policy environments", err)
			}
			return &getOutput{Body: a.policyView(p.Org.Name, pol, consumers[pol.Name])}, nil
		})

	type listOutput struct{ Body []PolicyView }
	huma.Register(a.huma, op(http.MethodGet, "/policies/{org}", "listPolicies", PrivRead, "List policies by name", "Policies"),
		func(ctx context.Context, in *OrgPath) (*listOutput, error) {
			p := principalFrom(ctx)
			pols, err := a.store.ListPolicies(ctx, p.Org.ID)
			if err != nil {
				return nil, a.internal(ctx, "list policies", err)
			}
			consumers, err := a.policyConsumers(ctx, p)
			if err != nil {
				return nil, a.internal(ctx, "look up policy environments", err)
			}
			out := &listOutput{Body: make([]PolicyView, 0, len(pols))}
			for _, pol := range pols {
				out.Body = append(out.Body, a.policyView(p.Org.Name, pol, consumers[pol.Name]))
			}
			return out, nil
		})

	a.registerPolicyAttachments()
	a.registerWhatIf()
}

// putPolicy creates a policy or adds a version to it. name is the path's policy name ("" on PUT /policies/{org},
// where the payload names it). A file identical to the latest version's adds no version (200).
func (a *API) putPolicy(ctx context.Context, f *Form[PolicyPayload], name string) (*stringOutput, error) {
	p := principalFrom(ctx)
	payload := f.Payload
	c := checker{}
	switch {
	case name == "":
		c.name("name", payload.Name, policyNameRE, policyNamePattern)
		name = payload.Name
	case payload.Name != "" && payload.Name != name:
		c["name"] = fmt.Sprintf("The payload names policy '%s' but the path names '%s'", payload.Name, name)
	default:
		c.name("name", name, policyNameRE, policyNamePattern)
	}
	checkPolicyType(c, payload.Type)
	if err := c.err(); err != nil {
		return nil, err
	}
	file, err := a.readPolicyFile(ctx, p, f.parts, payload.Type)
	if err != nil {
		return nil, err
	}
	// The organization's earlier versions (acknowledged before this request) decide whether this one is new.
	a.awaitWrites(ctx, p)
	existing, err := a.store.Policy(ctx, p.Org.ID, name)
	created := errors.Is(err, store.ErrNotFound)
	if err != nil && !created {
		return nil, a.internal(ctx, "look up policy", err)
	}
	if !created {
		latest := existing.Latest()
		if latest.Content == file.content && latest.Format == file.format {
			if payload.Description == "" || payload.Description == existing.Description {
				return &stringOutput{Status: http.StatusOK,
					Body: fmt.Sprintf("Policy '%s' is unchanged: version %d has the same content", name, latest.Version)}, nil
			}
		}
	}
	if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindPolicyVersion, Policy: &contract.PolicyVersion{
		Name: name, Description: payload.Description, Comment: payload.Comment, Format: file.format, Content: file.content,
		ContentID: file.policy.ID}}); err != nil {
		return nil, err
	}
	if created {
		return &stringOutput{Status: http.StatusCreated, Body: fmt.Sprintf("Policy '%s' was created", name)}, nil
	}
	return &stringOutput{Status: http.StatusOK, Body: fmt.Sprintf("Policy '%s' was updated", name)}, nil
}

// PolicyNamesInput is the body of attach and detach (nothing else is allowed in it).
type PolicyNamesInput struct {
	_           struct{} `additionalProperties:"false"`
	PolicyNames []string `json:"policy_names" minItems:"1" doc:"names of existing policies"`
}

func (a *API) registerPolicyAttachments() {
	type attachInput struct {
		EnvPath
		Body PolicyNamesInput
	}
	for _, change := range []struct {
		method, id, summary, verb string
		detach                    bool
	}{
		{http.MethodPost, "attachPolicies", "Attach policies to an environment and judge its latest snapshot against them", "attached to", false},
		// CLIENT-2.md section 16 lists PUT for attach (older CLIs send POST): both attach.
		{http.MethodPut, "attachPoliciesPut", "Attach policies to an environment (PUT, as newer Kosli CLIs send it)", "attached to", false},
		{http.MethodDelete, "detachPolicies", "Detach policies from an environment and judge its latest snapshot again", "detached from", true},
	} {
		huma.Register(a.huma, op(change.method, "/environments/{org}/{env}/policies", change.id, PrivWrite, change.summary, "Environments"),
			func(ctx context.Context, in *attachInput) (*stringOutput, error) {
				p := principalFrom(ctx)
				names := slices.Compact(slices.Sorted(slices.Values(in.Body.PolicyNames)))
				c := checker{}
				for i, n := range in.Body.PolicyNames {
					if n == "" {
						c[fmt.Sprintf("policy_names[%d]", i)] = "Field required"
					}
				}
				if err := c.err(); err != nil {
					return nil, err
				}
				e, err := a.environmentByName(ctx, p, in.Env)
				if err != nil {
					return nil, err
				}
				for _, n := range names {
					if _, err := a.policyByName(ctx, p, n); err != nil {
						return nil, err
					}
				}
				// Attached in the order given, as the environment lists them.
				ordered := make([]string, 0, len(names))
				for _, n := range in.Body.PolicyNames {
					if !slices.Contains(ordered, n) {
						ordered = append(ordered, n)
					}
				}
				if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindPolicyAttachment, Attach: &contract.PolicyAttachment{
					EnvID: e.ID, Names: ordered, Detach: change.detach}}); err != nil {
					return nil, err
				}
				return &stringOutput{Status: http.StatusOK, Body: fmt.Sprintf("Policies %s %s environment '%s'",
					quoteList(ordered), change.verb, e.Name)}, nil
			})
	}
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}
