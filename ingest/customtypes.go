package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/veritrail/veritrail/ingest/blobs"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/customtype"
)

// CustomTypeInput is the data_json of create custom attestation type, as `kosli create
// attestation-type` sends it. Keys beyond these are ignored, as encoding/json ignores them.
type CustomTypeInput struct {
	_           struct{} `additionalProperties:"true"`
	Name        string   `json:"name"`
	Description string   `json:"description" required:"false"`
	Evaluator   *struct {
		ContentType string   `json:"content_type" required:"false" enum:"jq" doc:"jq (the only kind) when given"`
		Rules       []string `json:"rules" required:"false" doc:"jq expressions, each true for compliant data"`
	} `json:"evaluator,omitempty"`
	Summary []SummaryInput `json:"summary,omitempty" doc:"named jq expressions that summarise the data, kept verbatim and in order"`
}

// SummaryInput is one named jq expression of a custom type's summary.
type SummaryInput struct {
	Name       string `json:"name" minLength:"1"`
	Expression string `json:"expression" minLength:"1"`
}

// anyData is the type_schema of a type created without one: the empty JSON Schema, which every
// document matches, so that a type with neither schema nor rules accepts any data.
const anyData = "{}"

// check checks the type's fields and its optional type_schema part.
func (t *CustomTypeInput) check(c checker, f *form) {
	c.name("name", t.Name, typeNameRE, typeNamePattern)
	if t.Evaluator != nil && t.Evaluator.ContentType != "" && t.Evaluator.ContentType != "jq" {
		c["evaluator.content_type"] = fmt.Sprintf("Input should be 'jq' [input: %s]", t.Evaluator.ContentType)
	}
	if schema, ok := f.part("type_schema"); ok {
		if msg := textPartProblem(schema); msg != "" {
			c["type_schema"] = msg
		}
	}
}

// schema is the type's JSON Schema: the type_schema part, or anyData when it is absent or blank.
func (t *CustomTypeInput) schema(f *form) []byte {
	if b, ok := f.part("type_schema"); ok && len(strings.TrimSpace(string(b))) > 0 {
		return b
	}
	return []byte(anyData)
}

// CustomTypeView is a custom attestation type with its versions, as `kosli get
// attestation-type` reads it. The answer for one version (?version=N) leaves out the creation
// and modification fields, and description is left out when there is none.
type CustomTypeView struct {
	Name           string              `json:"name"`
	Org            string              `json:"org"`
	Description    string              `json:"description,omitempty"`
	Archived       bool                `json:"archived"`
	CreatedBy      *string             `json:"created_by,omitempty"`
	CreatedAt      *float64            `json:"created_at,omitempty"`
	LastModifiedAt *float64            `json:"last_modified_at,omitempty"`
	Versions       []CustomTypeVersion `json:"versions"`
}

// CustomTypeVersion is one version of a custom type.
type CustomTypeVersion struct {
	Version    int                 `json:"version"`
	Timestamp  float64             `json:"timestamp"`
	CreatedBy  string              `json:"created_by"`
	TypeSchema json.RawMessage     `json:"type_schema" doc:"the JSON Schema, as a JSON value (an object; {} when the type was created without one)"`
	Evaluator  CustomTypeEvaluator `json:"evaluator"`
	Summary    []store.SummaryExpr `json:"summary" nullable:"true" doc:"null when the type has no summary"`
}

// CustomTypeEvaluator is how a version judges data: jq rules, or "default" (the schema alone).
type CustomTypeEvaluator struct {
	ContentType string   `json:"content_type" enum:"jq,default"`
	Rules       []string `json:"rules,omitempty"`
}

func customTypeVersionView(ver store.CustomTypeVersion) CustomTypeVersion {
	ev := CustomTypeEvaluator{ContentType: "default"}
	if len(ver.Rules) > 0 {
		ev = CustomTypeEvaluator{ContentType: "jq", Rules: ver.Rules}
	}
	schema := json.RawMessage(ver.Schema)
	if !validJSON(schema) { // stored schemas were compiled, so valid; guard the encoder anyway
		schema = json.RawMessage(anyData)
	}
	return CustomTypeVersion{Version: ver.Version, Timestamp: ver.CreatedAt, CreatedBy: ver.CreatedBy, TypeSchema: schema,
		Evaluator: ev, Summary: ver.Summary}
}

func customTypeView(org string, ct store.CustomType) CustomTypeView {
	v := CustomTypeView{Name: ct.Name, Description: ct.Description, Archived: ct.Archived, Org: org, Versions: []CustomTypeVersion{}}
	for _, ver := range ct.Versions {
		v.Versions = append(v.Versions, customTypeVersionView(ver))
	}
	if n := len(ct.Versions); n > 0 {
		first, last := ct.Versions[0], ct.Versions[n-1]
		v.CreatedBy, v.CreatedAt, v.LastModifiedAt = &first.CreatedBy, &first.CreatedAt, &last.CreatedAt
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (a *API) registerCustomTypes() {
	o := op(http.MethodPost, "/custom-attestation-types/{org}", "createCustomType", PrivWrite,
		"Create a custom attestation type, or a new version of it", "Custom attestation types")
	o.DefaultStatus = http.StatusCreated
	parts := formParts{json: "data_json", files: []filePart{
		{name: "type_schema", doc: "The JSON Schema that attestation_data of this type must match; without it any data matches"},
	}}
	registerForm(a, o, parts, func(ctx context.Context, in *orgForm, f *Form[CustomTypeInput]) (*stringOutput, error) {
		p := principalFrom(ctx)
		body := f.Payload
		var rules []string
		if body.Evaluator != nil {
			rules = body.Evaluator.Rules
		}
		schema := body.schema(f.parts)
		if _, err := customtype.Compile(schema, rules); err != nil {
			var de *customtype.DefinitionError
			if errors.As(err, &de) {
				return nil, validationFailed(de.Fields)
			}
			return nil, fieldError("type_schema", "%v", err)
		}
		existing, err := lookup(ctx, a, p, func() (store.CustomType, error) { return a.store.CustomType(ctx, p.Org.ID, body.Name) })
		created := errors.Is(err, store.ErrNotFound) || (err == nil && existing.Archived)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, a.internal(ctx, "look up custom type", err)
		}
		env := &contract.Envelope{Kind: contract.KindCustomTypeCreated, CustomType: &contract.CustomTypeCreate{
			Name: body.Name, Description: body.Description, Schema: string(schema), Rules: nonNil(rules), Summary: summaryExprs(body.Summary),
		}}
		if err := a.publish(ctx, p, env); err != nil {
			return nil, err
		}
		if created {
			return &stringOutput{Status: http.StatusCreated, Body: fmt.Sprintf("Custom attestation type '%s' was created", body.Name)}, nil
		}
		return &stringOutput{Status: http.StatusOK, Body: fmt.Sprintf("Custom attestation type '%s' has a new version", body.Name)}, nil
	})

	type typePath struct {
		Org  string `path:"org"`
		Name string `path:"name"`
	}
	type getInput struct {
		Org  string `path:"org"`
		Name string `path:"name"`
		// A string: a version that is not an integer asks for the whole type (name@vX in the CLI).
		Version string `query:"version" doc:"one version only; not an integer: the whole type"`
	}
	type getOutput struct{ Body CustomTypeView }
	huma.Register(a.huma, op(http.MethodGet, "/custom-attestation-types/{org}/{name}", "getCustomType", PrivRead,
		"Get a custom attestation type with its versions, or one version", "Custom attestation types"),
		func(ctx context.Context, in *getInput) (*getOutput, error) {
			p := principalFrom(ctx)
			ct, err := a.store.CustomType(ctx, p.Org.ID, in.Name)
			if errors.Is(err, store.ErrNotFound) {
				return nil, apiError(http.StatusNotFound, "Custom attestation type '%s' does not exist for org '%s'", in.Name, p.Org.Name)
			}
			if err != nil {
				return nil, a.internal(ctx, "look up custom type", err)
			}
			n, err := strconv.Atoi(in.Version)
			if err != nil {
				return &getOutput{Body: customTypeView(p.Org.Name, ct)}, nil
			}
			for _, ver := range ct.Versions {
				if ver.Version == n {
					return &getOutput{Body: CustomTypeView{Name: ct.Name, Org: p.Org.Name, Archived: ct.Archived,
						Versions: []CustomTypeVersion{customTypeVersionView(ver)}}}, nil
				}
			}
			return nil, apiError(http.StatusNotFound, "version %d does not exist for custom attestation type '%s'", n, ct.Name)
		})

	huma.Register(a.huma, op(http.MethodGet, "/custom-attestation-types/{org}", "listCustomTypes", PrivRead,
		"List custom attestation types", "Custom attestation types"),
		func(ctx context.Context, in *OrgPath) (*listOutput[CustomTypeView], error) {
			p := principalFrom(ctx)
			cts, err := a.store.ListCustomTypes(ctx, p.Org.ID)
			if err != nil {
				return nil, a.internal(ctx, "list custom types", err)
			}
			out := &listOutput[CustomTypeView]{Body: []CustomTypeView{}}
			for _, ct := range cts {
				out.Body = append(out.Body, customTypeView(p.Org.Name, ct))
			}
			return out, nil
		})

	huma.Register(a.huma, op(http.MethodPut, "/custom-attestation-types/{org}/{name}/archive", "archiveCustomType", PrivWrite,
		"Archive a custom attestation type", "Custom attestation types"),
		func(ctx context.Context, in *typePath) (*stringOutput, error) {
			p := principalFrom(ctx)
			ct, err := lookup(ctx, a, p, func() (store.CustomType, error) { return a.store.CustomType(ctx, p.Org.ID, in.Name) })
			if errors.Is(err, store.ErrNotFound) || (err == nil && ct.Archived) {
				return nil, apiError(http.StatusNotFound, "Custom attestation type '%s' does not exist for org '%s'", in.Name, p.Org.Name)
			}
			if err != nil {
				return nil, a.internal(ctx, "look up custom type", err)
			}
			if err := a.publish(ctx, p, &contract.Envelope{Kind: contract.KindCustomTypeArchived, TypeArchive: &contract.CustomTypeRef{Name: in.Name}}); err != nil {
				return nil, err
			}
			return &stringOutput{Status: http.StatusOK, Body: fmt.Sprintf("Custom attestation type '%s' was archived", in.Name)}, nil
		})
}

// typeCache keeps compiled custom type versions by the digest of their definition, which
// never changes for a version.
type typeCache struct {
	c *lru.Cache[string, *customtype.Type]
}

func newTypeCache() *typeCache {
	c, _ := lru.New[string, *customtype.Type](256) // only fails for a non-positive size
	return &typeCache{c: c}
}

// summaryExprs is a summary as the message carries it (nil for none).
func summaryExprs(in []SummaryInput) []contract.SummaryExpr {
	if len(in) == 0 {
		return nil
	}
	out := make([]contract.SummaryExpr, len(in))
	for i, s := range in {
		out[i] = contract.SummaryExpr{Name: s.Name, Expression: s.Expression}
	}
	return out
}

func (t *typeCache) get(v store.CustomTypeVersion) (*customtype.Type, error) {
	rules, _ := json.Marshal(v.Rules) // strings always marshal
	key := blobs.Digest(append([]byte(v.Schema+"\x00"), rules...))
	if typ, ok := t.c.Get(key); ok {
		return typ, nil
	}
	typ, err := customtype.Compile([]byte(v.Schema), v.Rules)
	if err != nil {
		return nil, err
	}
	t.c.Add(key, typ)
	return typ, nil
}
