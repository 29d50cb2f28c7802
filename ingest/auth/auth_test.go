package auth

import (
	"testing"

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
