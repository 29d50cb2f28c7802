package tier_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/deliverylog/memlog"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/notify/tier"
	"github.com/veritrail/veritrail/plugins/sdk"
)

func TestTriggerNamesMatchTheSDK(t *testing.T) {
	var sdkNames []string
	for _, tr := range sdk.Triggers() {
		sdkNames = append(sdkNames, string(tr))
	}
	if !slices.Equal(contract.Triggers(), sdkNames) {
		t.Fatalf("contract triggers %q, SDK triggers %q", contract.Triggers(), sdkNames)
	}
}

func sampleTrigger() *contract.Trigger {
	yes, no := true, false
	return &contract.Trigger{ID: "tr-1", OrgID: "org-1", EnvID: "env-1", Trigger: contract.TriggerScaledArtifact, At: 1700000000.25,
		Description: "1 instance started running (from 1 to 2)",
		Environment: contract.TriggerEnvironment{Name: "prod eu", Type: "K8S", Compliant: &no},
		Snapshot:    &contract.TriggerSnapshot{Index: 7, At: 1700000000.25},
		Artifact: &contract.TriggerArtifact{Name: "web", Fingerprint: strings.Repeat("a", 64), Compliant: &yes, InstancesBefore: 1,
			InstancesNow: 2, Provenance: []contract.TriggerProvenance{{Flow: "app", Trail: "t1", ArtifactID: "art-1", GitCommit: "abc",
				Compliant: &yes}}}}
}

func TestEvent(t *testing.T) {
	ev := tier.Event(sampleTrigger(), "acme", "https://vt.example")
	a := ev.Artifact
	switch {
	case ev.ID != "tr-1" || ev.Trigger != sdk.OnScaledArtifact || !ev.OccurredAt.Equal(time.Unix(1700000000, 250_000_000)):
		t.Errorf("event %+v", ev)
	case ev.Environment.Name != "prod eu" || *ev.Environment.Compliant || ev.Environment.HTMLURL != "https://vt.example/acme/environments/prod%20eu":
		t.Errorf("environment %+v", ev.Environment)
	case ev.Snapshot.Index != 7 || ev.Snapshot.HTMLURL != "https://vt.example/acme/environments/prod%20eu/snapshots/7":
		t.Errorf("snapshot %+v", ev.Snapshot)
	case a.InstancesBefore != 1 || a.InstancesNow != 2 || !*a.Compliant ||
		a.HTMLURL != "https://vt.example/acme/flows/app/artifacts/"+strings.Repeat("a", 64)+"?artifact_id=art-1":
		t.Errorf("artifact %+v", a)
	case len(a.Provenance) != 1 || a.Provenance[0].HTMLURL != "https://vt.example/acme/flows/app/trails/t1" || a.Provenance[0].GitCommit != "abc":
		t.Errorf("provenance %+v", a.Provenance)
	}
	if bare := tier.Event(sampleTrigger(), "acme", ""); bare.Environment.HTMLURL != "" || bare.Artifact.HTMLURL != "" {
		t.Errorf("links without a base URL: %+v", bare)
	}
}

// fakeRules is the store's side the tier reads.
type fakeRules struct {
	rules map[string][]store.NotificationRule
	fail  error
}

func (f *fakeRules) OrgByID(_ context.Context, id string) (store.Org, error) {
	if id == "org-1" {
		return store.Org{ID: id, Name: "acme"}, nil
	}
	return store.Org{}, store.ErrNotFound
}

func (f *fakeRules) NotificationRules(_ context.Context, orgID string) ([]store.NotificationRule, error) {
	return f.rules[orgID], f.fail
}

// counting records every notification it is asked to send.
type counting struct {
	mu   sync.Mutex
	sent []*sdk.Notification
}

func (c *counting) Configure(context.Context, map[string]string) error { return nil }

func (c *counting) Notify(_ context.Context, n *sdk.Notification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, n)
	return nil
}

func (c *counting) Lookup(name string) (sdk.Notifier, error) {
	if name == "webhook" {
		return c, nil
	}
	return nil, fmt.Errorf("no notifier %q", name)
}

func message1(t *testing.T, tr *contract.Trigger) *message.Message {
	t.Helper()
	b, err := contract.MarshalTrigger(tr)
	if err != nil {
		t.Fatal(err)
	}
	return message.NewMessage(tr.ID, b)
}

func TestHandle(t *testing.T) {
	rules := &fakeRules{rules: map[string][]store.NotificationRule{"org-1": {
		{OrgID: "org-1", Number: 1, Name: "prod eu scaling", Environments: []string{"prod eu"},
			Triggers: []string{contract.TriggerScaledArtifact},
			Targets:  []store.NotificationTarget{{ID: "h1", Type: "WEBHOOK", URL: "https://hooks.example/1", Secret: "s"}}},
		{OrgID: "org-1", Number: 2, Name: "other env", Environments: []string{"staging"},
			Triggers: []string{contract.TriggerScaledArtifact},
			Targets:  []store.NotificationTarget{{ID: "h2", Type: "WEBHOOK", URL: "https://hooks.example/2"}}},
	}}}
	sender := &counting{}
	log := memlog.New()
	tr, err := tier.New(tier.Config{BaseURL: "https://vt.example"}, tier.Deps{Rules: rules, Log: log, Notifiers: sender,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	msg := message1(t, sampleTrigger())
	if err := tr.Handle(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if err := tr.Handle(ctx, msg); err != nil { // redelivered: the log knows it
		t.Fatal(err)
	}
	if len(sender.sent) != 1 {
		t.Fatalf("%d notifications sent, want 1", len(sender.sent))
	}
	n := sender.sent[0]
	if n.Target.URL != "https://hooks.example/1" || n.Target.Secret != "s" || n.Payload.Rule != (sdk.Rule{Org: "acme", Number: 1, Name: "prod eu scaling"}) ||
		n.Payload.Event.ID != "tr-1" || n.Payload.DeliveryID != (deliverylog.Key{Org: "acme", Rule: 1, Target: "h1", Event: "tr-1"}).DeliveryID() {
		t.Errorf("notification %+v", n)
	}
	out, err := log.TargetOutcomes(ctx, "acme", 1)
	if err != nil || len(out) != 1 || out[0].LastSuccessAt.IsZero() {
		t.Errorf("outcomes %+v, %v", out, err)
	}

	// What can never be delivered is dropped (nil); what failed for now is an error.
	if err := tr.Handle(ctx, message.NewMessage("x", []byte("{"))); err != nil {
		t.Errorf("undecodable trigger: %v", err)
	}
	other := sampleTrigger()
	other.ID, other.OrgID = "tr-2", "org-gone"
	if err := tr.Handle(ctx, message1(t, other)); err != nil {
		t.Errorf("trigger of an unknown organization: %v", err)
	}
	rules.fail = errors.New("database down")
	third := sampleTrigger()
	third.ID = "tr-3"
	if err := tr.Handle(ctx, message1(t, third)); err == nil {
		t.Error("a store failure was not reported")
	}
}

func TestNotifiers(t *testing.T) {
	ctx := context.Background()
	hits := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits <- struct{}{} }))
	defer srv.Close()
	send := func(allowPrivate bool) error {
		c, err := tier.Notifiers(ctx, tier.NotifiersConfig{AllowPrivate: allowPrivate})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		n, err := c.Lookup("webhook")
		if err != nil {
			t.Fatal(err)
		}
		return n.Notify(ctx, &sdk.Notification{Target: sdk.Target{ID: "1", Type: sdk.TargetWebhook, URL: srv.URL}})
	}
	if err := send(false); err == nil {
		t.Error("the SSRF guard let a webhook reach a loopback address")
	}
	if err := send(true); err != nil {
		t.Errorf("with private addresses allowed: %v", err)
	}

	// The catalog file: built-in settings, a relative plugin directory, unknown names refused.
	dir := t.TempDir()
	file := filepath.Join(dir, "catalog.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("builtins:\n  email: {host: smtp.example.com, from: v@example.com}\n  webhook: {timeout: 3s}\n")
	c, err := tier.Notifiers(ctx, tier.NotifiersConfig{CatalogFile: file})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	write("builtins:\n  pager: {token: x}\n")
	if _, err := tier.Notifiers(ctx, tier.NotifiersConfig{CatalogFile: file}); err == nil || !strings.Contains(err.Error(), `"pager"`) {
		t.Errorf("an unknown built-in: %v", err)
	}
	write("builtins:\n  webhook: {timeout: soon}\n")
	if _, err := tier.Notifiers(ctx, tier.NotifiersConfig{CatalogFile: file}); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("a bad built-in setting: %v", err)
	}
	write("plugin_dir: plugins\nplugins:\n  - {name: pager, command: pager, sha256: " + strings.Repeat("0", 64) + "}\n")
	_, err = tier.Notifiers(ctx, tier.NotifiersConfig{CatalogFile: file})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "plugins")) {
		t.Errorf("plugin_dir is not relative to the catalog file: %v", err)
	}
}
