package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

func TestRoleTable(t *testing.T) {
	all := []Privilege{PrivRead, PrivSnapshot, PrivWrite, PrivAdmin}
	want := map[store.Role][]Privilege{
		store.RoleAdmin:       all,
		store.RoleMember:      {PrivRead, PrivSnapshot, PrivWrite},
		store.RoleSnapshotter: {PrivSnapshot},
		store.RoleReader:      {PrivRead},
		"":                    nil,
		"owner":               nil,
	}
	for role, grants := range want {
		for _, p := range all {
			granted := false
			for _, g := range grants {
				granted = granted || g == p
			}
			if got := Allows(role, p); got != granted {
				t.Errorf("Allows(%q, %s) = %v, want %v", role, p, got, granted)
			}
		}
	}
	for _, r := range store.Roles() {
		if _, ok := want[r]; !ok {
			t.Errorf("role %q is missing from this table", r)
		}
	}
}

// identities is an in-memory Identities.
type identities struct {
	orgs    map[string]store.Org
	keys    map[string]store.APIKey // by string(hash)
	users   map[string]store.User
	members map[[2]string]store.Role // (user, org)
	lookups int
	fail    error
}

func (s *identities) OrgByName(_ context.Context, name string) (store.Org, error) {
	s.lookups++
	if s.fail != nil {
		return store.Org{}, s.fail
	}
	o, ok := s.orgs[name]
	if !ok {
		return o, store.ErrNotFound
	}
	return o, nil
}

func (s *identities) OrgByID(_ context.Context, id string) (store.Org, error) {
	for _, o := range s.orgs {
		if o.ID == id {
			return o, nil
		}
	}
	return store.Org{}, store.ErrNotFound
}

// UserOrgs lists the user's organizations by name, as the store does.
func (s *identities) UserOrgs(_ context.Context, user string) ([]store.Org, error) {
	var out []store.Org
	for _, o := range s.orgs {
		if _, ok := s.members[[2]string{user, o.ID}]; ok {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b store.Org) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *identities) KeyByHash(_ context.Context, h []byte) (store.APIKey, error) {
	k, ok := s.keys[string(h)]
	if !ok {
		return k, store.ErrNotFound
	}
	return k, nil
}

func (s *identities) UserByID(_ context.Context, id string) (store.User, error) {
	u, ok := s.users[id]
	if !ok {
		return u, store.ErrNotFound
	}
	return u, nil
}

func (s *identities) MemberRole(_ context.Context, user, org string) (store.Role, error) {
	r, ok := s.members[[2]string{user, org}]
	if !ok {
		return r, store.ErrNotFound
	}
	return r, nil
}

// TestAuthenticate: each kind of caller is resolved or refused with the error ingest words, and
// a resolved caller is cached until its key expires.
func TestAuthenticate(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	st := &identities{
		orgs: map[string]store.Org{"acme": {ID: "o1", Name: "acme"}, "open": {ID: "o2", Name: "open", Public: true}},
		keys: map[string]store.APIKey{
			string(HashKey("ci")):      {ID: "k1", Hash: HashKey("ci"), OrgID: "o1", Name: "ci", Role: store.RoleMember},
			string(HashKey("jane")):    {ID: "k2", Hash: HashKey("jane"), UserID: "u1", Name: "jane's key"},
			string(HashKey("old")):     {ID: "k3", Hash: HashKey("old"), OrgID: "o1", Revoked: true},
			string(HashKey("soon")):    {ID: "k4", Hash: HashKey("soon"), OrgID: "o1", Role: store.RoleReader, ExpiresAt: float64(now.Unix() + 1)},
			string(HashKey("nowhere")): {ID: "k5", Hash: HashKey("nowhere")},
		},
		users:   map[string]store.User{"u1": {ID: "u1", DisplayName: "Jane"}},
		members: map[[2]string]store.Role{{"u1", "o1"}: store.RoleAdmin},
	}
	a := NewAuthenticator(st, clock)
	ctx := context.Background()

	p, err := a.Authenticate(ctx, "Bearer ci", "acme", false)
	if err != nil || p.KeyID != "k1" || p.Org.ID != "o1" || p.Role != store.RoleMember || p.Anonymous {
		t.Fatalf("service account key: %+v, %v", p, err)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("jane:x"))
	if p, err := a.Authenticate(ctx, basic, "acme", false); err != nil || p.Role != store.RoleAdmin || p.Name != "Jane" {
		t.Fatalf("personal key in Basic: %+v, %v", p, err)
	}
	for _, tt := range []struct {
		header, org string
		public      bool
		want        error
	}{
		{"", "acme", false, ErrNoKey},
		{"", "acme", true, ErrNoKey}, // not a public organization
		{"Bearer nope", "acme", false, ErrInvalidKey},
		{"Bearer nope", "open", true, ErrInvalidKey}, // refused even where anonymous reads are allowed
		{"Bearer old", "acme", false, ErrExpiredKey},
		{"Bearer ci", "open", false, ErrDenied},
		{"Bearer ci", "missing", false, ErrDenied},
		{"Bearer jane", "open", false, ErrDenied}, // no membership
		{"Bearer nowhere", "acme", false, ErrDenied},
	} {
		if _, err := a.Authenticate(ctx, tt.header, tt.org, tt.public); !errors.Is(err, tt.want) {
			t.Errorf("%q in %s (public operation %v): %v, want %v", tt.header, tt.org, tt.public, err, tt.want)
		}
	}
	for _, header := range []string{"", "Bearer ci"} { // no key, and a key of another organization
		if p, err := a.Authenticate(ctx, header, "open", true); err != nil || !p.Anonymous || p.Org.ID != "o2" {
			t.Errorf("%q reading a public organization: %+v, %v; want an anonymous reader", header, p, err)
		}
	}

	// Cached: the store is not asked again, until the key expires or Forget.
	if _, err := a.Authenticate(ctx, "Bearer soon", "acme", false); err != nil {
		t.Fatal(err)
	}
	before := st.lookups
	if _, err := a.Authenticate(ctx, "Bearer soon", "acme", false); err != nil || st.lookups != before {
		t.Fatalf("cached key: %v, %d lookups since", err, st.lookups-before)
	}
	a.Forget()
	if _, err := a.Authenticate(ctx, "Bearer soon", "acme", false); err != nil || st.lookups == before {
		t.Fatalf("after Forget: %v, %d lookups since", err, st.lookups-before)
	}
	now = now.Add(time.Second)
	if _, err := a.Authenticate(ctx, "Bearer soon", "acme", false); !errors.Is(err, ErrExpiredKey) {
		t.Fatalf("a cached key past its expiry: %v", err)
	}

	boom := errors.New("connection lost")
	st.fail = boom
	a.Forget()
	var lookup *LookupError
	if _, err := a.Authenticate(ctx, "Bearer ci", "acme", false); !errors.As(err, &lookup) || lookup.What != "look up organization" || !errors.Is(err, boom) {
		t.Fatalf("store failure: %v", err)
	}
}

// TestInDefaultOrg: a service account's key acts in its organization; a personal key in the
// organization its user chose while a member, else in the first of the user's by name.
func TestInDefaultOrg(t *testing.T) {
	st := &identities{
		orgs: map[string]store.Org{"acme": {ID: "o1", Name: "acme"}, "beta": {ID: "o2", Name: "beta"}, "zeta": {ID: "o3", Name: "zeta"}},
		keys: map[string]store.APIKey{
			string(HashKey("ci")):    {ID: "k1", Hash: HashKey("ci"), OrgID: "o3", Role: store.RoleMember},
			string(HashKey("jane")):  {ID: "k2", Hash: HashKey("jane"), UserID: "u1"},
			string(HashKey("lone")):  {ID: "k3", Hash: HashKey("lone"), UserID: "u2"},
			string(HashKey("gone")):  {ID: "k4", Hash: HashKey("gone"), OrgID: "o1", Revoked: true},
			string(HashKey("chose")): {ID: "k5", Hash: HashKey("chose"), UserID: "u3"},
		},
		users: map[string]store.User{"u1": {ID: "u1"}, "u2": {ID: "u2"}, "u3": {ID: "u3", DefaultOrgID: "o3"}},
		members: map[[2]string]store.Role{{"u1", "o3"}: store.RoleAdmin, {"u1", "o2"}: store.RoleReader,
			{"u3", "o1"}: store.RoleMember, {"u3", "o3"}: store.RoleReader},
	}
	a := NewAuthenticator(st, time.Now)
	ctx := context.Background()
	for header, want := range map[string]string{"Bearer ci": "zeta", "Bearer jane": "beta", "Bearer chose": "zeta"} {
		if p, err := a.InDefaultOrg(ctx, header); err != nil || p.Org.Name != want {
			t.Errorf("%s: %+v, %v; want organization %s", header, p, err, want)
		}
	}
	for header, want := range map[string]error{"": ErrNoKey, "Bearer nope": ErrInvalidKey, "Bearer gone": ErrExpiredKey, "Bearer lone": ErrDenied} {
		if _, err := a.InDefaultOrg(ctx, header); !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", header, err, want)
		}
	}
}
