package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

func TestAdminSeedAndWipe(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	file := filepath.Join(dir, "seed.yml")
	seed := "organizations:\n  - name: acme\n    service_accounts:\n      - name: reporter\n        privilege: snapshotter\n" +
		"        api_keys: [{secret: vt_seeded_reporter_key_000}]\n" +
		"users:\n  - name: jane\n    display_name: Jane Doe\n    memberships: [{org: acme, role: member}]\n"
	if err := os.WriteFile(file, []byte(seed), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := func(args ...string) string {
		return captureStdout(t, func(w io.Writer) error {
			return run(ctx, append([]string{"admin"}, append(args, "--data-dir", dir)...), w, io.Discard)
		})
	}
	for range 2 {
		if out := admin("seed", file); !strings.Contains(out, "seeded 1 organizations and 1 users") {
			t.Fatalf("seed printed %q", out)
		}
	}
	if err := run(ctx, []string{"admin", "seed", filepath.Join(dir, "missing.yml"), "--data-dir", dir}, io.Discard, io.Discard); err == nil {
		t.Fatal("seeding a missing file succeeded")
	}
	admin("make-public", "acme")

	open := func() *sqlstore.Store {
		st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	k, err := st.KeyByHash(ctx, auth.HashKey("vt_seeded_reporter_key_000"))
	if err != nil || k.Role != store.RoleSnapshotter || k.Name != "reporter" {
		t.Fatalf("seeded key: %+v, %v", k, err)
	}
	if o, err := st.OrgByName(ctx, "acme"); err != nil || !o.Public {
		t.Fatalf("acme after make-public: %+v, %v", o, err)
	}
	if _, err := st.OrgByName(ctx, "jane"); err != nil {
		t.Fatalf("jane's personal organization: %v", err)
	}
	st.Close()

	err = run(ctx, []string{"admin", "wipe", "--data-dir", dir}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--yes-really") {
		t.Fatalf("wipe without --yes-really: %v", err)
	}
	st = open()
	if _, err := st.OrgByName(ctx, "acme"); err != nil {
		t.Fatalf("a refused wipe deleted acme: %v", err)
	}
	st.Close()

	admin("wipe", "--yes-really")
	st = open()
	defer st.Close()
	for _, name := range []string{"acme", "jane"} {
		if _, err := st.OrgByName(ctx, name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("organization %s after wipe: %v", name, err)
		}
	}
}
