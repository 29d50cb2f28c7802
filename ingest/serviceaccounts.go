package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/internal/store"
)

// Service accounts and their API keys are written by the API itself, not through the bus: a
// key must work on the next request, and these writes are rare. Each change is stored with
// its audit record in one transaction (changeIdentities).

// ServiceAccountView is a service account as the API shows it.
type ServiceAccountView struct {
	Name           string  `json:"name"`
	Description    string  `json:"description"`
	Privilege      string  `json:"privilege" enum:"admin,member,snapshotter,reader"`
	CreatedBy      string  `json:"created_by"`
	CreatedAt      float64 `json:"created_at"`
	LastModifiedAt float64 `json:"last_modified_at"`
}

func serviceAccountView(sa store.ServiceAccount) ServiceAccountView {
	return ServiceAccountView{Name: sa.Name, Description: sa.Description, Privilege: string(sa.Privilege),
		CreatedBy: sa.CreatedBy, CreatedAt: sa.CreatedAt, LastModifiedAt: sa.LastModifiedAt}
}

// ServiceAccountPath names a service account.
type ServiceAccountPath struct {
	Org  string `path:"org" doc:"Organization name"`
	Name string `path:"name" doc:"Service account name"`
}

// changeIdentities runs fn and records the request in the audit log, in one transaction, then
// forgets cached principals so that this process applies the change at once.
func (a *API) changeIdentities(ctx context.Context, p *Principal, fn func(tx store.IdentityTx) error) error {
	req := requestFrom(ctx)
	err := a.identities.UpdateIdentities(ctx, func(tx store.IdentityTx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return tx.InsertAudit(ctx, store.AuditRecord{ID: newID(), OrgID: p.Org.ID, KeyID: p.KeyID, Actor: p.Name,
			Operation: req.Operation, Target: req.Target, Outcome: store.AuditApplied, At: now()})
	})
	a.auth.Forget()
	return err
}

func (a *API) serviceAccount(ctx context.Context, r store.Reader, p *Principal, name string) (store.ServiceAccount, error) {
	sa, err := r.ServiceAccountByName(ctx, p.Org.ID, name)
	if errors.Is(err, store.ErrNotFound) {
		return sa, apiError(http.StatusNotFound, "Service account '%s' does not exist in organization '%s'", name, p.Org.Name)
	}
	if err != nil {
		return sa, a.internal(ctx, "look up service account", err)
	}
	return sa, nil
}

func serviceAccountExists(name string, org store.Org) error {
	// 400, not 409: the Kosli CLI retries a 409 as if it were transient.
	msg := fmt.Sprintf("Service account '%s' already exists in organization '%s'", name, org.Name)
	return &Error{Status: http.StatusBadRequest, Message: msg, Errors: map[string]string{"name": msg}}
}

func (a *API) registerServiceAccounts() {
	const tag = "Service accounts"
	type accountOutput struct{ Body ServiceAccountView }

	type createAccountInput struct {
		OrgPath
		Body struct {
			Name        string `json:"name" pattern:"^[a-zA-Z0-9][a-zA-Z0-9\\-_.~]*$" maxLength:"100"`
			Description string `json:"description,omitempty" maxLength:"1000"`
			Privilege   string `json:"privilege" enum:"admin,member,snapshotter,reader" doc:"what the account's keys may do"`
		}
	}
	o := op(http.MethodPost, "/service-accounts/{org}", "createServiceAccount", PrivAdmin, "Create a service account", tag)
	o.DefaultStatus = http.StatusCreated
	huma.Register(a.huma, o, func(ctx context.Context, in *createAccountInput) (*accountOutput, error) {
		p := principalFrom(ctx)
		at := unixSeconds(a.clock())
		sa := store.ServiceAccount{ID: newID(), OrgID: p.Org.ID, Name: in.Body.Name, Description: in.Body.Description,
			Privilege: store.Role(in.Body.Privilege), CreatedBy: p.Name, CreatedAt: at, LastModifiedAt: at}
		err := a.changeIdentities(ctx, p, func(tx store.IdentityTx) error { return tx.CreateServiceAccount(ctx, sa) })
		if errors.Is(err, store.ErrConflict) {
			return nil, serviceAccountExists(sa.Name, p.Org)
		}
		if err != nil {
			return nil, a.internal(ctx, "create service account", err)
		}
		return &accountOutput{Body: serviceAccountView(sa)}, nil
	})

	type accountsOutput struct{ Body []ServiceAccountView }
	huma.Register(a.huma, op(http.MethodGet, "/service-accounts/{org}", "listServiceAccounts", PrivAdmin,
		"List service accounts", tag),
		func(ctx context.Context, in *OrgPath) (*accountsOutput, error) {
			p := principalFrom(ctx)
			list, err := a.store.ListServiceAccounts(ctx, p.Org.ID)
			if err != nil {
				return nil, a.internal(ctx, "list service accounts", err)
			}
			views := make([]ServiceAccountView, 0, len(list))
			for _, sa := range list {
				views = append(views, serviceAccountView(sa))
			}
			return &accountsOutput{Body: views}, nil
		})

	huma.Register(a.huma, op(http.MethodGet, "/service-accounts/{org}/{name}", "getServiceAccount", PrivAdmin,
		"Get a service account", tag),
		func(ctx context.Context, in *ServiceAccountPath) (*accountOutput, error) {
			sa, err := a.serviceAccount(ctx, a.store, principalFrom(ctx), in.Name)
			if err != nil {
				return nil, err
			}
			return &accountOutput{Body: serviceAccountView(sa)}, nil
		})

	type updateAccountInput struct {
		ServiceAccountPath
		Body struct {
			Name        *string `json:"name,omitempty" pattern:"^[a-zA-Z0-9][a-zA-Z0-9\\-_.~]*$" maxLength:"100"`
			Description *string `json:"description,omitempty" maxLength:"1000"`
			Privilege   *string `json:"privilege,omitempty" enum:"admin,member,snapshotter,reader"`
		}
	}
	huma.Register(a.huma, op(http.MethodPatch, "/service-accounts/{org}/{name}", "updateServiceAccount", PrivAdmin,
		"Change the name, description or privilege of a service account; its keys follow at once", tag),
		func(ctx context.Context, in *updateAccountInput) (*accountOutput, error) {
			p := principalFrom(ctx)
			var sa store.ServiceAccount
			err := a.changeIdentities(ctx, p, func(tx store.IdentityTx) error {
				var err error
				if sa, err = a.serviceAccount(ctx, tx, p, in.Name); err != nil {
					return err
				}
				if in.Body.Name != nil {
					sa.Name = *in.Body.Name
				}
				if in.Body.Description != nil {
					sa.Description = *in.Body.Description
				}
				if in.Body.Privilege != nil {
					sa.Privilege = store.Role(*in.Body.Privilege)
				}
				sa.LastModifiedAt = unixSeconds(a.clock())
				return tx.UpdateServiceAccount(ctx, sa)
			})
			if errors.Is(err, store.ErrConflict) {
				return nil, serviceAccountExists(sa.Name, p.Org)
			}
			if err != nil {
				return nil, a.identityError(ctx, "update service account", err)
			}
			return &accountOutput{Body: serviceAccountView(sa)}, nil
		})

	huma.Register(a.huma, op(http.MethodDelete, "/service-accounts/{org}/{name}", "deleteServiceAccount", PrivAdmin,
		"Delete a service account and revoke its keys", tag),
		func(ctx context.Context, in *ServiceAccountPath) (*stringOutput, error) {
			p := principalFrom(ctx)
			err := a.changeIdentities(ctx, p, func(tx store.IdentityTx) error {
				sa, err := a.serviceAccount(ctx, tx, p, in.Name)
				if err != nil {
					return err
				}
				return tx.DeleteServiceAccount(ctx, p.Org.ID, sa.ID)
			})
			if err != nil {
				return nil, a.identityError(ctx, "delete service account", err)
			}
			return &stringOutput{Status: http.StatusOK, Body: "OK"}, nil
		})
}

// identityError passes an API error through and hides any other.
func (a *API) identityError(ctx context.Context, what string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return a.internal(ctx, what, err)
}
