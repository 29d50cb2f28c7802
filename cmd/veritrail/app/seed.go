package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/google/uuid"
	"gopkg.in/yaml.v3"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/internal/store"
)

// Seed is a reproducible set of identities: what `veritrail admin seed FILE` creates.
type Seed struct {
	Organizations []SeedOrg  `yaml:"organizations"`
	Users         []SeedUser `yaml:"users"`
}

// SeedOrg is an organization and its service accounts.
type SeedOrg struct {
	Name            string               `yaml:"name"`
	Public          bool                 `yaml:"public"`
	ServiceAccounts []SeedServiceAccount `yaml:"service_accounts"`
}

// SeedServiceAccount is a service account and its keys.
type SeedServiceAccount struct {
	Name        string    `yaml:"name"`
	Description string    `yaml:"description"`
	Privilege   string    `yaml:"privilege"`
	APIKeys     []SeedKey `yaml:"api_keys"`
}

// SeedUser is a user, the organizations it belongs to and its personal keys. Every user also
// gets a personal organization named after it, which it administers.
type SeedUser struct {
	Name        string           `yaml:"name"`
	DisplayName string           `yaml:"display_name"` // what created_by shows; the name when empty
	Memberships []SeedMembership `yaml:"memberships"`
	APIKeys     []SeedKey        `yaml:"api_keys"`
}

// SeedMembership is a user's role in an organization.
type SeedMembership struct {
	Org  string `yaml:"org"`
	Role string `yaml:"role"`
}

// SeedKey is an API key with a given secret (only its hash is stored).
type SeedKey struct {
	Secret      string  `yaml:"secret"`
	Description string  `yaml:"description"`
	ExpiresAt   float64 `yaml:"expires_at"` // UNIX time; 0 = never
}

// minSecretLength keeps seeded secrets from being guessable.
const minSecretLength = 16

var seedNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9\-_.~]*$`)

// ParseSeed reads a seed file; unknown fields are errors, so that a typo is not ignored.
func ParseSeed(b []byte) (Seed, error) {
	var s Seed
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("seed: %w", err)
	}
	return s, s.validate()
}

// validate reports every problem of the file at once, before anything is written.
func (s Seed) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("seed: "+format, args...)) }
	secrets := map[string]bool{}
	keys := func(owner string, ks []SeedKey) {
		for i, k := range ks {
			switch {
			case len(k.Secret) < minSecretLength:
				bad("%s: api key %d: the secret must have at least %d characters", owner, i+1, minSecretLength)
			case secrets[k.Secret]:
				bad("%s: api key %d: the secret is used twice", owner, i+1)
			}
			secrets[k.Secret] = true
			if k.ExpiresAt < 0 {
				bad("%s: api key %d: expires_at must be a UNIX time, or 0 for never", owner, i+1)
			}
		}
	}
	orgs := map[string]bool{}
	for _, o := range s.Organizations {
		if !seedNameRE.MatchString(o.Name) {
			bad("organization %q: the name must match %s", o.Name, seedNameRE)
		}
		orgs[o.Name] = true
		for _, sa := range o.ServiceAccounts {
			owner := fmt.Sprintf("service account %q of %q", sa.Name, o.Name)
			if !seedNameRE.MatchString(sa.Name) {
				bad("%s: the name must match %s", owner, seedNameRE)
			}
			if !store.Role(sa.Privilege).Valid() {
				bad("%s: privilege %q is not one of %v", owner, sa.Privilege, store.Roles())
			}
			keys(owner, sa.APIKeys)
		}
	}
	for _, u := range s.Users {
		orgs[u.Name] = true // the personal organization
	}
	for _, u := range s.Users {
		owner := fmt.Sprintf("user %q", u.Name)
		if !seedNameRE.MatchString(u.Name) {
			bad("%s: the name must match %s", owner, seedNameRE)
		}
		for _, m := range u.Memberships {
			if !orgs[m.Org] {
				bad("%s: organization %q is not in the file", owner, m.Org)
			}
			if !store.Role(m.Role).Valid() {
				bad("%s: role %q in %q is not one of %v", owner, m.Role, m.Org, store.Roles())
			}
		}
		keys(owner, u.APIKeys)
	}
	return errors.Join(errs...)
}

// ApplySeed makes the store hold what the seed lists, creating what is missing and setting
// what differs (a display name, a role, a privilege, whether an organization is public). It
// removes nothing, so running it again changes nothing.
func ApplySeed(ctx context.Context, st store.Store, s Seed) error {
	if err := s.validate(); err != nil {
		return err
	}
	for _, o := range s.Organizations {
		org, err := EnsureOrg(ctx, st, o.Name)
		if err != nil {
			return err
		}
		if org.Public != o.Public {
			if err := st.SetOrgPublic(ctx, org.ID, o.Public); err != nil {
				return fmt.Errorf("seed: organization %s: %w", o.Name, err)
			}
		}
		for _, sa := range o.ServiceAccounts {
			if err := seedServiceAccount(ctx, st, org, sa); err != nil {
				return err
			}
		}
	}
	for _, u := range s.Users {
		if err := seedUser(ctx, st, u); err != nil {
			return err
		}
	}
	return nil
}

func seedServiceAccount(ctx context.Context, st store.Store, org store.Org, in SeedServiceAccount) error {
	err := st.UpdateIdentities(ctx, func(tx store.IdentityTx) error {
		at := unixNow()
		sa, err := tx.ServiceAccountByName(ctx, org.ID, in.Name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			sa = store.ServiceAccount{ID: uuid.NewString(), OrgID: org.ID, Name: in.Name, Description: in.Description,
				Privilege: store.Role(in.Privilege), CreatedBy: "veritrail", CreatedAt: at, LastModifiedAt: at}
			err = tx.CreateServiceAccount(ctx, sa)
		case err == nil && (sa.Description != in.Description || sa.Privilege != store.Role(in.Privilege)):
			sa.Description, sa.Privilege, sa.LastModifiedAt = in.Description, store.Role(in.Privilege), at
			err = tx.UpdateServiceAccount(ctx, sa)
		}
		if err != nil {
			return err
		}
		for _, k := range in.APIKeys {
			key := store.APIKey{ID: uuid.NewString(), Hash: auth.HashKey(k.Secret), OrgID: org.ID, ServiceAccountID: sa.ID,
				Name: sa.Name, Description: k.Description, Role: sa.Privilege, CreatedAt: at, ExpiresAt: k.ExpiresAt}
			if err := seedKey(ctx, tx, key, func(have store.APIKey) bool { return have.ServiceAccountID == sa.ID }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("seed: service account %s of %s: %w", in.Name, org.Name, err)
	}
	return nil
}

// seedKey creates k unless a key with its secret exists; that key must belong to the same
// owner, since one secret cannot be two keys.
func seedKey(ctx context.Context, tx store.IdentityTx, k store.APIKey, sameOwner func(store.APIKey) bool) error {
	have, err := tx.KeyByHash(ctx, k.Hash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return tx.CreateKey(ctx, k)
	case err != nil:
		return err
	case !sameOwner(have):
		return fmt.Errorf("the secret of api key %q is already another key's", k.Description)
	}
	return nil
}

func seedUser(ctx context.Context, st store.Store, in SeedUser) error {
	display := in.DisplayName
	if display == "" {
		display = in.Name
	}
	u, err := st.UserByName(ctx, in.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		u = store.User{ID: uuid.NewString(), Name: in.Name, DisplayName: display, CreatedAt: unixNow()}
		err = st.CreateUser(ctx, u)
	case err == nil && u.DisplayName != display:
		err = st.SetUserDisplayName(ctx, u.ID, display)
	}
	if err != nil {
		return fmt.Errorf("seed: user %s: %w", in.Name, err)
	}
	personal, err := EnsureOrg(ctx, st, in.Name)
	if err != nil {
		return err
	}
	if err := st.AddMember(ctx, u.ID, personal.ID, store.RoleAdmin); err != nil {
		return fmt.Errorf("seed: user %s: personal organization: %w", in.Name, err)
	}
	for _, m := range in.Memberships {
		org, err := st.OrgByName(ctx, m.Org)
		if err != nil {
			return fmt.Errorf("seed: user %s: organization %s: %w", in.Name, m.Org, err)
		}
		if err := st.AddMember(ctx, u.ID, org.ID, store.Role(m.Role)); err != nil {
			return fmt.Errorf("seed: user %s: membership of %s: %w", in.Name, m.Org, err)
		}
	}
	return st.UpdateIdentities(ctx, func(tx store.IdentityTx) error {
		for _, k := range in.APIKeys {
			key := store.APIKey{ID: uuid.NewString(), Hash: auth.HashKey(k.Secret), UserID: u.ID, Name: display,
				Description: k.Description, Role: store.RoleReader, CreatedAt: unixNow(), ExpiresAt: k.ExpiresAt}
			if err := seedKey(ctx, tx, key, func(have store.APIKey) bool { return have.UserID == u.ID }); err != nil {
				return fmt.Errorf("seed: user %s: %w", in.Name, err)
			}
		}
		return nil
	})
}
