package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/evaluate"
	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
	"github.com/veritrail/veritrail/policies/template"
)

// captureStdout runs f with a writer for its output and returns what it wrote.
func captureStdout(t *testing.T, f func(io.Writer) error) string {
	t.Helper()
	var out bytes.Buffer
	if err := f(&out); err != nil {
		t.Fatalf("%v (output %s)", err, out.String())
	}
	return out.String()
}

func TestAdminCommands(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	admin := func(args ...string) string {
		return captureStdout(t, func(w io.Writer) error {
			return run(ctx, append([]string{"admin"}, append(args, "--data-dir", dir)...), w, io.Discard)
		})
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
	if err := run(ctx, []string{"admin", "create-org", "acme", "--data-dir", dir}, io.Discard, io.Discard); err == nil {
		t.Fatal("creating an existing organization should fail")
	}
	if err := run(ctx, []string{"admin", "create-key", "--data-dir", dir}, io.Discard, io.Discard); err == nil {
		t.Fatal("create-key without --org or --user should fail")
	}

	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k, err := st.KeyByHash(ctx, auth.HashKey(orgKey))
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
	pk, err := st.KeyByHash(ctx, auth.HashKey(personal))
	if err != nil || pk.UserID != u.ID {
		t.Fatalf("personal key: %+v %v", pk, err)
	}
}

// TestAdminRejectedMessages: `admin rejected-messages` lists what the evaluator set aside, of
// every organization or one; `admin replay` asks for replays, which a running evaluator
// performs, and prints their outcomes.
func TestAdminRejectedMessages(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := func(args ...string) string {
		t.Helper()
		return captureStdout(t, func(w io.Writer) error {
			return run(ctx, append([]string{"admin"}, append(args, "--data-dir", dir)...), w, io.Discard)
		})
	}
	admin("create-org", "acme")
	admin("create-org", "beta")

	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ev, err := evaluate.New(evaluate.Config{ReplayPoll: 10 * time.Millisecond},
		evaluate.Deps{Store: st, Engine: template.NewEngine(template.EngineOptions{}), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	replays := make(chan error, 1)
	go func() { replays <- ev.RunReplays(ctx) }()
	defer func() {
		cancel()
		if err := <-replays; err != nil {
			t.Error(err)
		}
	}()
	orgID := func(name string) string {
		o, err := st.OrgByName(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return o.ID
	}
	handle := func(id string, payload []byte, org string) {
		t.Helper()
		m := message.NewMessage(id, payload)
		m.Metadata.Set(contract.MetaOrg, org)
		if err := ev.Handle(m); err != nil {
			t.Fatal(err)
		}
	}
	envelope := func(e *contract.Envelope) []byte {
		e.Actor, e.At = contract.Actor{KeyID: "k", Name: "ci"}, 1_700_000_000
		b, err := contract.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	begin := func(id, org, flowID string) {
		handle(id, envelope(&contract.Envelope{ID: id, Kind: contract.KindTrailBegun, OrgID: org,
			Trail: &contract.TrailBegin{ID: "trail-" + id, FlowID: flowID, Name: "t1"}}), org)
	}
	acme, beta := orgID("acme"), orgID("beta")
	begin("m-late", acme, "flow-late")
	handle("m-garbage", []byte("not an envelope"), acme)
	begin("m-beta", beta, "flow-none")

	all := admin("rejected-messages")
	rows := map[string][]string{}
	for _, line := range strings.Split(all, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	for id, want := range map[string]string{"m-late": "acme trail.begun rejected", "m-garbage": "acme - rejected",
		"m-beta": "beta trail.begun rejected"} {
		if got := strings.Join(rows[id][1:min(4, len(rows[id]))], " "); got != want {
			t.Errorf("rejected-messages: %s is %q, want %q:\n%s", id, got, want, all)
		}
	}
	if !strings.Contains(all, "flow flow-late: not found") || !strings.Contains(all, "decode envelope") ||
		!strings.Contains(all, "(3 rejected messages)") {
		t.Errorf("rejected-messages without the reasons:\n%s", all)
	}
	if one := admin("rejected-messages", "acme"); strings.Contains(one, "m-beta") || !strings.Contains(one, "(2 rejected messages)") {
		t.Errorf("rejected-messages acme:\n%s", one)
	}
	if js := admin("rejected-messages", "beta", "--json"); !strings.Contains(js, `"id":"m-beta","org":"beta"`) ||
		!strings.Contains(js, `"payload":{"id":"m-beta"`) {
		t.Errorf("rejected-messages beta --json:\n%s", js)
	}
	if none := admin("rejected-messages", "--state", "replayed"); !strings.Contains(none, "(0 rejected messages)") {
		t.Errorf("rejected-messages --state replayed:\n%s", none)
	}
	if err := run(ctx, []string{"admin", "rejected-messages", "--state", "gone", "--data-dir", dir}, io.Discard, io.Discard); err == nil {
		t.Error("an unknown --state was accepted")
	}

	// The cause is fixed: the flow exists now.
	tmpl, err := template.Parse([]byte("version: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	handle("m-flow", envelope(&contract.Envelope{ID: "m-flow", Kind: contract.KindFlowUpserted, OrgID: acme,
		Flow: &contract.FlowUpsert{ID: "flow-late", Name: "late", Visibility: "private", Template: tmpl.Content, TemplateID: tmpl.ID}}), acme)
	if out := admin("replay", "acme", "m-late"); !strings.Contains(out, "m-late replayed") {
		t.Fatalf("replay acme m-late:\n%s", out)
	}
	if _, err := st.TrailByName(ctx, "flow-late", "t1"); err != nil {
		t.Fatalf("the replayed trail: %v", err)
	}
	if out := admin("replay", "acme", "m-late"); !strings.Contains(out, "m-late was replayed already") {
		t.Errorf("replay of a replayed message:\n%s", out)
	}
	if out := admin("replay", "acme", "--all"); !strings.Contains(out, "asked for the replay of 1 rejected messages of acme") ||
		!strings.Contains(out, "m-garbage rejected again: ") {
		t.Errorf("replay acme --all:\n%s", out)
	}
	if m, err := st.RejectedMessage(ctx, beta, "m-beta"); err != nil || m.State != store.StateRejected {
		t.Errorf("beta's message after replaying acme's: %+v, %v", m, err)
	}
	for _, args := range [][]string{{"replay", "acme", "nope"}, {"replay", "acme"}, {"replay", "nosuchorg", "--all"}} {
		if err := run(ctx, append(append([]string{"admin"}, args...), "--data-dir", dir), io.Discard, io.Discard); err == nil {
			t.Errorf("admin %v succeeded", args)
		}
	}
}
