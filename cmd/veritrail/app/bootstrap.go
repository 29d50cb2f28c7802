package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/internal/store"
)

// DefaultOrg is the organization `serve` creates when nothing else is configured.
const DefaultOrg = "default"

// NewSecret makes an API key secret (auth.NewSecret), for the commands that print one.
func NewSecret() string { return auth.NewSecret() }

func unixNow() float64 { return float64(time.Now().UnixMicro()) / 1e6 }

// bootstrap makes the first organization and admin key. With VERITRAIL_BOOTSTRAP_ORG and
// _TOKEN it ensures exactly those (idempotent across restarts); with neither and fresh is
// set (serve), it creates the default organization once and prints its new key.
func bootstrap(ctx context.Context, st store.Store, cfg Config, fresh bool, out io.Writer) error {
	if cfg.BootstrapOrg == "" && cfg.BootstrapToken == "" {
		if !fresh {
			return nil
		}
		if _, err := st.OrgByName(ctx, DefaultOrg); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("bootstrap: %w", err)
		}
		org, err := EnsureOrg(ctx, st, DefaultOrg)
		if err != nil {
			return err
		}
		secret := NewSecret()
		if err := CreateOrgKey(ctx, st, org, "admin", store.RoleAdmin, secret); err != nil {
			return err
		}
		fmt.Fprintf(out, "\nVeritrail created organization %q and an admin API key. It is shown only this once:\n\n"+
			"  export KOSLI_ORG=%s KOSLI_API_TOKEN=%s\n\n", DefaultOrg, DefaultOrg, secret)
		return nil
	}
	if cfg.BootstrapOrg == "" || cfg.BootstrapToken == "" {
		return errors.New("bootstrap: set both VERITRAIL_BOOTSTRAP_ORG and VERITRAIL_BOOTSTRAP_TOKEN, or neither")
	}
	org, err := EnsureOrg(ctx, st, cfg.BootstrapOrg)
	if err != nil {
		return err
	}
	k, err := st.KeyByHash(ctx, auth.HashKey(cfg.BootstrapToken))
	switch {
	case err == nil:
		if k.OrgID != org.ID {
			return fmt.Errorf("bootstrap: the bootstrap token already belongs to another organization")
		}
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("bootstrap: %w", err)
	}
	return CreateOrgKey(ctx, st, org, "admin", store.RoleAdmin, cfg.BootstrapToken)
}

// EnsureOrg returns the organization, creating it if missing.
func EnsureOrg(ctx context.Context, st store.Store, name string) (store.Org, error) {
	org, err := st.OrgByName(ctx, name)
	if err == nil {
		return org, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return org, fmt.Errorf("look up organization %s: %w", name, err)
	}
	org = store.Org{ID: uuid.NewString(), Name: name, CreatedAt: unixNow()}
	if err := st.CreateOrg(ctx, org); err != nil {
		if errors.Is(err, store.ErrConflict) { // created concurrently by another process
			return st.OrgByName(ctx, name)
		}
		return org, fmt.Errorf("create organization %s: %w", name, err)
	}
	return org, nil
}

// CreateOrgKey stores a key for secret (only its hash is kept) in the organization's service
// account name, creating the account with privilege role if it does not exist.
func CreateOrgKey(ctx context.Context, st store.Store, org store.Org, name string, role store.Role, secret string) error {
	err := st.UpdateIdentities(ctx, func(tx store.IdentityTx) error {
		sa, err := EnsureServiceAccount(ctx, tx, org, name, role)
		if err != nil {
			return err
		}
		return tx.CreateKey(ctx, store.APIKey{ID: uuid.NewString(), Hash: auth.HashKey(secret), OrgID: org.ID,
			ServiceAccountID: sa.ID, Name: sa.Name, Role: sa.Privilege, CreatedAt: unixNow()})
	})
	if errors.Is(err, store.ErrConflict) {
		return errors.New("create key: that secret is already in use")
	}
	return err
}

// EnsureServiceAccount returns the organization's service account name, creating it with
// privilege role if missing. An existing account with another privilege is an error rather
// than a silent change of what its other keys may do.
func EnsureServiceAccount(ctx context.Context, tx store.IdentityTx, org store.Org, name string, role store.Role) (store.ServiceAccount, error) {
	sa, err := tx.ServiceAccountByName(ctx, org.ID, name)
	switch {
	case err == nil:
		if sa.Privilege != role {
			return sa, fmt.Errorf("service account %s of %s has the privilege %s, not %s", name, org.Name, sa.Privilege, role)
		}
		return sa, nil
	case !errors.Is(err, store.ErrNotFound):
		return sa, fmt.Errorf("look up service account %s: %w", name, err)
	}
	at := unixNow()
	sa = store.ServiceAccount{ID: uuid.NewString(), OrgID: org.ID, Name: name, Privilege: role, CreatedBy: "veritrail",
		CreatedAt: at, LastModifiedAt: at}
	if err := tx.CreateServiceAccount(ctx, sa); err != nil {
		return sa, fmt.Errorf("create service account %s: %w", name, err)
	}
	return sa, nil
}
