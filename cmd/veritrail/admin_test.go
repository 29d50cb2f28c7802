package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/evaluate/store/sqlstore"
	"github.com/veritrail/veritrail/ingest"
)

// captureStdout runs f and returns what it printed.
func captureStdout(t *testing.T, f func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	ferr := f()
	os.Stdout = old
	w.Close()
	out, _ := io.ReadAll(r)
	if ferr != nil {
		t.Fatalf("%v (output %s)", ferr, out)
	}
	return string(out)
}

func TestAdminCommands(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	admin := func(args ...string) string {
		return captureStdout(t, func() error { return run(ctx, append([]string{"admin"}, append(args, "--data-dir", dir)...)) })
	}
	admin("create-org", "acme")
	admin("create-org", "beta")
	admin("create-user", "jane", "--display-name", "Jane Doe")
	admin("add-member", "jane", "acme", "--role", "member")
	admin("add-member", "jane", "beta", "--role", "reader")
	orgKey := strings.TrimSpace(admin("create-key", "--org", "acme", "--name", "ci", "--role", "member"))
	personal := strings.TrimSpace(admin("create-key", "--user", "jane", "--secret", "vt_given_secret_value_000000000"))
	if personal != "vt_given_secret_value_000000000" || !strings.HasPrefix(orgKey, "vt_") {
		t.Fatalf("keys: %q %q", orgKey, personal)
	}
	if err := run(ctx, []string{"admin", "create-org", "acme", "--data-dir", dir}); err == nil {
		t.Fatal("creating an existing organization should fail")
	}
	if err := run(ctx, []string{"admin", "create-key", "--data-dir", dir}); err == nil {
		t.Fatal("create-key without --org or --user should fail")
	}

	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, err := st.KeyByHash(ctx, ingest.HashKey(orgKey))
	if err != nil || k.Role != "member" || k.Name != "ci" {
		t.Fatalf("org key: %+v %v", k, err)
	}
	u, err := st.UserByName(ctx, "jane")
	if err != nil {
		t.Fatal(err)
	}
	orgs, err := st.UserOrgs(ctx, u.ID)
	if err != nil || len(orgs) != 2 {
		t.Fatalf("jane's orgs: %v %v", orgs, err)
	}
	pk, err := st.KeyByHash(ctx, ingest.HashKey(personal))
	if err != nil || pk.UserID != u.ID {
		t.Fatalf("personal key: %+v %v", pk, err)
	}
}
