package ingest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/internal/store"
)

// APIKeyView is a service account's key as the API shows it: never its secret.
type APIKeyView struct {
	ID             string   `json:"id"`
	ServiceAccount string   `json:"service_account"`
	Description    string   `json:"description"`
	CreatedAt      float64  `json:"created_at"`
	ExpiresAt      *float64 `json:"expires_at" doc:"UNIX time when the key stops working; null: never"`
	IsExpired      bool     `json:"is_expired"`
}

// CreatedAPIKeyView is a new key with its secret, which is shown only in this answer.
type CreatedAPIKeyView struct {
	APIKeyView
	Key string `json:"key" doc:"The secret, shown only this once: only its hash is stored"`
}

// RotatedAPIKeyView is the key a rotation made, and the key it replaces.
type RotatedAPIKeyView struct {
	CreatedAPIKeyView
	Replaced APIKeyView `json:"replaced" doc:"The old key: it works until its expires_at, the end of the grace period"`
}

func (a *API) apiKeyView(k store.APIKey) APIKeyView {
	v := APIKeyView{ID: k.ID, ServiceAccount: k.Name, Description: k.Description, CreatedAt: k.CreatedAt}
	if k.ExpiresAt > 0 {
		v.ExpiresAt = &k.ExpiresAt
		v.IsExpired = unixSeconds(a.clock()) >= k.ExpiresAt
	}
	return v
}

// APIKeysPath names a service account's keys.
type APIKeysPath struct {
	Org string `path:"org" doc:"Organization name"`
	SA  string `path:"sa" doc:"Service account name"`
}

// APIKeyPath names one key of a service account.
type APIKeyPath struct {
	APIKeysPath
	ID string `path:"id" doc:"API key ID"`
}

// liveKey finds a key of the account that is not archived (revoked); anything else is 404.
func (a *API) liveKey(ctx context.Context, r store.Reader, sa store.ServiceAccount, id string) (store.APIKey, error) {
	k, err := r.KeyByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (k.ServiceAccountID != sa.ID || k.Revoked)) {
		return k, apiError(http.StatusNotFound, "API key '%s' does not exist for service account '%s'", id, sa.Name)
	}
	if err != nil {
		return k, a.internal(ctx, "look up api key", err)
	}
	return k, nil
}

// checkExpiry refuses an expiry that has passed already.
func (a *API) checkExpiry(expiresAt *float64) error {
	if expiresAt != nil && *expiresAt <= unixSeconds(a.clock()) {
		return fieldError("expires_at", "Input should be a UNIX time in the future [input: %v]", *expiresAt)
	}
	return nil
}

// nullBody lets an operation with an optional JSON body take the body `null`, which the Kosli
// CLI sends for writes without a payload, as no body at all (Huma would want an object).
func nullBody(ctx huma.Context, next func(huma.Context)) {
	head := make([]byte, 8)
	n, _ := io.ReadFull(ctx.BodyReader(), head)
	if string(bytes.TrimSpace(head[:n])) == "null" {
		next(withBody{humaContext: ctx, body: bytes.NewReader(nil)})
		return
	}
	next(withBody{humaContext: ctx, body: io.MultiReader(bytes.NewReader(head[:n]), ctx.BodyReader())})
}

// humaContext lets withBody embed huma.Context, whose Context method clashes with the field name.
type humaContext = huma.Context

type withBody struct {
	humaContext
	body io.Reader
}

func (w withBody) BodyReader() io.Reader { return w.body }

// newKey is a new key of the account for secret; only the secret's hash is kept.
func (a *API) newKey(sa store.ServiceAccount, secret, description string, expiresAt *float64) store.APIKey {
	k := store.APIKey{ID: newID(), Hash: auth.HashKey(secret), OrgID: sa.OrgID, ServiceAccountID: sa.ID, Name: sa.Name,
		Description: description, Role: sa.Privilege, CreatedAt: unixSeconds(a.clock())}
	if expiresAt != nil {
		k.ExpiresAt = *expiresAt
	}
	return k
}

func (a *API) registerAPIKeys() {
	const tag = "Service accounts"
	type createdOutput struct{ Body CreatedAPIKeyView }

	type createKeyInput struct {
		APIKeysPath
		Body *struct {
			Description string   `json:"description,omitempty" maxLength:"1000"`
			ExpiresAt   *float64 `json:"expires_at,omitempty" nullable:"true" doc:"UNIX time when the key stops working; absent or null: never"`
		} `required:"false"`
	}
	o := op(http.MethodPost, "/service-accounts/{org}/{sa}/api-keys", "createAPIKey", PrivAdmin,
		"Create an API key for a service account; the answer holds its secret, shown only this once", tag)
	o.DefaultStatus = http.StatusCreated
	o.Middlewares = huma.Middlewares{nullBody}
	huma.Register(a.huma, o, func(ctx context.Context, in *createKeyInput) (*createdOutput, error) {
		p := principalFrom(ctx)
		var description string
		var expiresAt *float64
		if in.Body != nil {
			description, expiresAt = in.Body.Description, in.Body.ExpiresAt
		}
		if err := a.checkExpiry(expiresAt); err != nil {
			return nil, err
		}
		secret := auth.NewSecret()
		var k store.APIKey
		err := a.changeIdentities(ctx, p, func(tx store.IdentityTx) error {
			sa, err := a.serviceAccount(ctx, tx, p, in.SA)
			if err != nil {
				return err
			}
			k = a.newKey(sa, secret, description, expiresAt)
			return tx.CreateKey(ctx, k)
		})
		if err != nil {
			return nil, a.identityError(ctx, "create api key", err)
		}
		return &createdOutput{Body: CreatedAPIKeyView{APIKeyView: a.apiKeyView(k), Key: secret}}, nil
	})

	type keysOutput struct{ Body []APIKeyView }
	huma.Register(a.huma, op(http.MethodGet, "/service-accounts/{org}/{sa}/api-keys", "listAPIKeys", PrivAdmin,
		"List the keys of a service account that are not revoked", tag),
		func(ctx context.Context, in *APIKeysPath) (*keysOutput, error) {
			p := principalFrom(ctx)
			sa, err := a.serviceAccount(ctx, a.store, p, in.SA)
			if err != nil {
				return nil, err
			}
			keys, err := a.store.ServiceAccountKeys(ctx, sa.ID)
			if err != nil {
				return nil, a.internal(ctx, "list api keys", err)
			}
			views := make([]APIKeyView, 0, len(keys))
			for _, k := range keys {
				views = append(views, a.apiKeyView(k))
			}
			return &keysOutput{Body: views}, nil
		})

	type keyOutput struct{ Body APIKeyView }
	huma.Register(a.huma, op(http.MethodGet, "/service-accounts/{org}/{sa}/api-keys/{id}", "getAPIKey", PrivAdmin,
		"Get an API key of a service account", tag),
		func(ctx context.Context, in *APIKeyPath) (*keyOutput, error) {
			p := principalFrom(ctx)
			sa, err := a.serviceAccount(ctx, a.store, p, in.SA)
			if err != nil {
				return nil, err
			}
			k, err := a.liveKey(ctx, a.store, sa, in.ID)
			if err != nil {
				return nil, err
			}
			return &keyOutput{Body: a.apiKeyView(k)}, nil
		})

	huma.Register(a.huma, op(http.MethodDelete, "/service-accounts/{org}/{sa}/api-keys/{id}", "revokeAPIKey", PrivAdmin,
		"Revoke (archive) an API key; a key revoked already is not found", tag),
		func(ctx context.Context, in *APIKeyPath) (*stringOutput, error) {
			p := principalFrom(ctx)
			err := a.changeIdentities(ctx, p, func(tx store.IdentityTx) error {
				sa, err := a.serviceAccount(ctx, tx, p, in.SA)
				if err != nil {
					return err
				}
				if _, err := a.liveKey(ctx, tx, sa, in.ID); err != nil {
					return err
				}
				return tx.RevokeKey(ctx, in.ID)
			})
			if err != nil {
				return nil, a.identityError(ctx, "revoke api key", err)
			}
			return &stringOutput{Status: http.StatusOK, Body: "revoked"}, nil
		})

	type rotateKeyInput struct {
		APIKeyPath
		Body *struct {
			GracePeriodHours float64  `json:"grace_period_hours,omitempty" minimum:"0" maximum:"8760" doc:"How long the old key keeps working; 0 or absent: it stops at once"`
			ExpiresAt        *float64 `json:"expires_at,omitempty" nullable:"true" doc:"UNIX time when the new key stops working; absent or null: never"`
		} `required:"false"`
	}
	type rotatedOutput struct{ Body RotatedAPIKeyView }
	o = op(http.MethodPost, "/service-accounts/{org}/{sa}/api-keys/{id}/rotate", "rotateAPIKey", PrivAdmin,
		"Replace an API key with a new one; the old key works until the grace period ends", tag)
	o.DefaultStatus = http.StatusCreated
	o.Middlewares = huma.Middlewares{nullBody}
	huma.Register(a.huma, o, func(ctx context.Context, in *rotateKeyInput) (*rotatedOutput, error) {
		p := principalFrom(ctx)
		var grace float64
		var expiresAt *float64
		if in.Body != nil {
			grace, expiresAt = in.Body.GracePeriodHours, in.Body.ExpiresAt
		}
		if err := a.checkExpiry(expiresAt); err != nil {
			return nil, err
		}
		secret := auth.NewSecret()
		var fresh, old store.APIKey
		err := a.changeIdentities(ctx, p, func(tx store.IdentityTx) error {
			sa, err := a.serviceAccount(ctx, tx, p, in.SA)
			if err != nil {
				return err
			}
			if old, err = a.liveKey(ctx, tx, sa, in.ID); err != nil {
				return err
			}
			fresh = a.newKey(sa, secret, old.Description, expiresAt)
			if err := tx.CreateKey(ctx, fresh); err != nil {
				return err
			}
			if err := tx.ExpireKeyBy(ctx, old.ID, fresh.CreatedAt+grace*3600); err != nil {
				return err
			}
			old, err = tx.KeyByID(ctx, old.ID)
			return err
		})
		if err != nil {
			return nil, a.identityError(ctx, "rotate api key", err)
		}
		return &rotatedOutput{Body: RotatedAPIKeyView{
			CreatedAPIKeyView: CreatedAPIKeyView{APIKeyView: a.apiKeyView(fresh), Key: secret},
			Replaced:          a.apiKeyView(old),
		}}, nil
	})
}
