package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/veritrail/veritrail/ingest/blobs"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/policies/customtype"
)

// CustomTypeInput is the data_json of create custom attestation type. Keys beyond these are
// ignored, as encoding/json ignores them.
type CustomTypeInput struct {
	_           struct{} `additionalProperties:"true"`
	Name        string   `json:"name"`
	Description string   `json:"description" required:"false"`
	Evaluator   *struct {
		ContentType string   `json:"content_type" required:"false" enum:"jq" doc:"jq (the only kind) when given"`
		Rules       []string `json:"rules" required:"false" doc:"jq expressions, each true for compliant data"`
	} `json:"evaluator,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// check checks the type's fields and its type_schema part.
func (t *CustomTypeInput) check(c checker, f *form) {
	c.name("name", t.Name, typeNameRE, typeNamePattern)
	if t.Evaluator != nil && t.Evaluator.ContentType != "" && t.Evaluator.ContentType != "jq" {
		c["evaluator.content_type"] = fmt.Sprintf("Input should be 'jq' [input: %s]", t.Evaluator.ContentType)
	}
	schema, ok := f.part("type_schema")
	if !ok || len(strings.TrimSpace(string(schema))) == 0 {
		c["type_schema"] = "Field required"
	} else if msg := textPartProblem(schema); msg != "" {
		c["type_schema"] = msg
	}
}

// CustomTypeView is a custom attestation type with its versions.
type CustomTypeView struct {
	Name        string              `json:"name"`
	Description string              `json:"description"`
	Archived    bool                `json:"archived"`
	Versions    []CustomTypeVersion `json:"versions"`
	Org         string              `json:"org"`
}

// CustomTypeVersion is one version of a custom type.
type CustomTypeVersion struct {
	Version    int             `json:"version"`
	Timestamp  float64         `json:"timestamp"`
	TypeSchema string          `json:"type_schema"`
	Evaluator  json.RawMessage `json:"evaluator"`
	CreatedBy  string          `json:"created_by"`
}

func customTypeView(org string, ct store.CustomType) CustomTypeView {
	v := CustomTypeView{Name: ct.Name, Description: ct.Description, Archived: ct.Archived, Org: org, Versions: []CustomTypeVersion{}}
	for _, ver := range ct.Versions {
		ev, _ := json.Marshal(map[string]any{"content_type": "jq", "rules": nonNil(ver.Rules)}) // strings always marshal
		v.Versions = append(v.Versions, CustomTypeVersion{Version: ver.Version, Timestamp: ver.CreatedAt, TypeSchema: ver.Schema,
			Evaluator: ev, CreatedBy: ver.CreatedBy})
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
		{name: "type_schema", doc: "The JSON Schema that attestation_data of this type must match", required: true},
	}}
	registerForm(a, o, parts, func(ctx context.Context, in *orgForm, f *Form[CustomTypeInput]) (*stringOutput, error) {
		p := principalFrom(ctx)
		body := f.Payload
		var rules []string
		if body.Evaluator != nil {
			rules = body.Evaluator.Rules
		}
		schema, _ := f.part("type_schema")
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
			Name: body.Name, Description: body.Description, Schema: string(schema), Rules: nonNil(rules),
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
	type getOutput struct{ Body CustomTypeView }
	huma.Register(a.huma, op(http.MethodGet, "/custom-attestation-types/{org}/{name}", "getCustomType", PrivRead,
		"Get a custom attestation type with its versions", "Custom attestation types"),
		func(ctx context.Context, in *typePath) (*getOutput, error) {
			p := principalFrom(ctx)
			ct, err := a.store.CustomType(ctx, p.Org.ID, in.Name)
			if errors.Is(err, store.ErrNotFound) {
				return nil, apiError(http.StatusNotFound, "Custom attestation type '%s' does not exist for org '%s'", in.Name, p.Org.Name)
			}
			if err != nil {
				return nil, a.internal(ctx, "look up custom type", err)
			}
			return &getOutput{Body: customTypeView(p.Org.Name, ct)}, nil
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
