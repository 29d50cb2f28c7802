package evaluate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

// watch creates a rule of org-1 on env for triggers.
func (f *envFixture) watch(tb testing.TB, env string, triggers ...string) {
	tb.Helper()
	f.handle(tb, func(e *contract.Envelope) {
		e.Kind, e.Notification = contract.KindNotificationCreated, &contract.NotificationRule{ID: fmt.Sprint("rule-", f.seq),
			Name: "watch " + env, Environments: []string{env}, Triggers: triggers,
			Targets: []contract.NotificationTarget{{ID: "t1", Type: "WEBHOOK", URL: "https://hooks.example/x"}}}
	})
}

// running applies a K8S snapshot of env-1 running items.
func (f *envFixture) running(tb testing.TB, items ...contract.RunningInstance) {
	tb.Helper()
	f.handle(tb, runningIn(items...))
}

// runningIn fills a K8S snapshot report of env-1 running items.
func runningIn(items ...contract.RunningInstance) func(*contract.Envelope) {
	return func(e *contract.Envelope) {
		e.Kind, e.Snapshot = contract.KindSnapshotReported, &contract.SnapshotReport{EnvID: "env-1", Type: "K8S", Instances: items}
	}
}

// runningApps fills a snapshot report of env-1 running one instance app-N of fingerprint N
// for each N of ns.
func runningApps(ns ...int) func(*contract.Envelope) {
	items := make([]contract.RunningInstance, len(ns))
	for i, n := range ns {
		items[i] = contract.RunningInstance{Name: fmt.Sprint("app-", n), Fingerprint: fp(n), CreationTimestamp: 1}
	}
	return runningIn(items...)
}

// pending relays the outbox and decodes what it held.
func (f *envFixture) pending(tb testing.TB) []*contract.Trigger {
	tb.Helper()
	var out []*contract.Trigger
	_, err := f.st.RelayTriggers(context.Background(), 1000, func(_ context.Context, rows []store.Trigger) error {
		for _, r := range rows {
			t, err := contract.UnmarshalTrigger(r.Payload)
			if err != nil {
				return err
			}
			if t.ID != r.ID || t.EnvID != r.EnvID || t.OrgID != r.OrgID {
				tb.Errorf("outbox row %+v does not match its payload %+v", r, t)
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func inst(name string, i int, created float64) contract.RunningInstance {
	return contract.RunningInstance{Name: name, Fingerprint: fp(i), CreationTimestamp: created}
}

func TestSnapshotTriggers(t *testing.T) {
	f := newEnvFixture(t, 2)
	f.watch(t, "prod", contract.Triggers()...)
	f.running(t, inst("web", 0, 1))                    // 1: web starts
	f.running(t, inst("web", 0, 1), inst("web", 0, 2)) // 2: web scales 1 -> 2
	f.running(t, inst("web", 0, 1), inst("web", 0, 2)) // a repeat: nothing
	f.running(t, inst("api", 1, 3))                    // 3: web exits, api starts
	f.running(t, inst("api", 1, 4))                    // 4 is not created: same set
	f.running(t, inst("api", 1, 3), inst("zzz", 5, 1)) // 4: zzz (of no flow) starts
	got := f.pending(t)
	var seen []string
	for _, tr := range got {
		seen = append(seen, fmt.Sprint(tr.Snapshot.Index, " ", tr.Trigger, " ", tr.Artifact.Name))
	}
	want := []string{"1 ON_STARTED_ARTIFACT web", "2 ON_SCALED_ARTIFACT web", "3 ON_STARTED_ARTIFACT api",
		"3 ON_EXITED_ARTIFACT web", "4 ON_STARTED_ARTIFACT zzz"}
	if !slices.Equal(seen, want) {
		t.Fatalf("triggers %q, want %q", seen, want)
	}
	scaled := got[1]
	if scaled.Artifact.InstancesBefore != 1 || scaled.Artifact.InstancesNow != 2 || scaled.Artifact.Fingerprint != fp(0) ||
		scaled.OrgID != "org-1" || scaled.EnvID != "env-1" || scaled.Environment.Name != "prod" || scaled.Environment.Type != "K8S" ||
		scaled.Description == "" || scaled.At == 0 || scaled.Snapshot.At != scaled.At {
		t.Errorf("scaled trigger %+v", scaled)
	}
	if p := got[0].Artifact.Provenance; len(p) != 1 || p[0].Flow != "app" || p[0].Trail != "t1" || p[0].ArtifactID != "art-0" ||
		p[0].Compliant == nil || got[0].Artifact.Compliant == nil {
		t.Errorf("provenance %+v, compliance %v", p, got[0].Artifact.Compliant)
	}
	if z := got[4].Artifact; len(z.Provenance) != 0 || z.Compliant != nil {
		t.Errorf("an artifact of no flow: %+v", z)
	}
	ids := map[string]bool{}
	for _, tr := range got {
		ids[tr.ID] = true
	}
	if len(ids) != len(got) {
		t.Errorf("trigger IDs are not distinct: %d for %d triggers", len(ids), len(got))
	}
	if again := f.pending(t); len(again) != 0 {
		t.Errorf("relayed twice: %+v", again)
	}
}

// TestTriggersOnlyForWatchedPairs: what no rule watches is not written at all.
func TestTriggersOnlyForWatchedPairs(t *testing.T) {
	f := newEnvFixture(t, 2)
	f.running(t, inst("web", 0, 1)) // no rule yet
	f.watch(t, "staging", contract.TriggerStartedArtifact)
	f.watch(t, "prod", contract.TriggerExitedArtifact)
	f.running(t, inst("api", 1, 1))
	got := f.pending(t)
	if len(got) != 1 || got[0].Trigger != contract.TriggerExitedArtifact || got[0].Artifact.Name != "web" {
		t.Fatalf("triggers %+v, want only web's exit", got)
	}
}

func TestAllowlistTrigger(t *testing.T) {
	f := newEnvFixture(t, 2)
	f.watch(t, "prod", contract.TriggerAllowedArtifact)
	f.running(t, inst("web", 1, 1))
	allow := func(id, name string) {
		f.handle(t, func(e *contract.Envelope) {
			e.Kind, e.Allow = contract.KindAllowlisted, &contract.AllowlistEntry{ID: id, EnvID: "env-1", Fingerprint: fp(1),
				ArtifactName: name, Description: "hotfix"}
		})
	}
	allow("al-1", "")
	allow("al-2", "web-named")
	got := f.pending(t)
	if len(got) != 2 {
		t.Fatalf("triggers %+v, want two", got)
	}
	a := got[0]
	if a.Trigger != contract.TriggerAllowedArtifact || a.Artifact.Name != "web" || a.Artifact.Fingerprint != fp(1) ||
		a.Artifact.Compliant == nil || !*a.Artifact.Compliant || a.Allowlisted == nil || a.Allowlisted.By != "ci" ||
		a.Allowlisted.Description != "hotfix" || a.Snapshot != nil || len(a.Artifact.Provenance) != 1 {
		t.Errorf("allowed trigger %+v (artifact %+v)", a, a.Artifact)
	}
	if got[1].Artifact.Name != "web-named" || got[1].ID == a.ID {
		t.Errorf("second allowed trigger %+v", got[1])
	}
}

func TestNotificationRuleWrites(t *testing.T) {
	f := newEnvFixture(t, 0)
	f.watch(t, "prod", contract.TriggerStartedArtifact)
	f.watch(t, "staging", contract.TriggerStartedArtifact)
	ctx := context.Background()
	r, err := f.st.NotificationRule(ctx, "org-1", 2)
	if err != nil || r.Name != "watch staging" || r.CreatedBy != "ci" || len(r.Targets) != 1 || r.Targets[0].ID != "t1" {
		t.Fatalf("rule 2 = %+v, %v", r, err)
	}
	f.handle(t, func(e *contract.Envelope) {
		e.Kind, e.Notification = contract.KindNotificationUpdated, &contract.NotificationRule{ID: r.ID, Number: 2, Name: "renamed",
			Environments: []string{"qa"}, Triggers: []string{contract.TriggerExitedArtifact}}
	})
	if r, err := f.st.NotificationRule(ctx, "org-1", 2); err != nil || r.Name != "renamed" || r.Environments[0] != "qa" ||
		len(r.Targets) != 0 || r.LastModifiedAt <= r.CreatedAt {
		t.Fatalf("updated rule 2 = %+v, %v", r, err)
	}
	del := func() {
		f.handle(t, func(e *contract.Envelope) {
			e.Kind, e.Notification = contract.KindNotificationDeleted, &contract.NotificationRule{ID: r.ID, Number: 2}
		})
	}
	del()
	del() // a redelivered or repeated delete is no error
	if _, err := f.st.NotificationRule(ctx, "org-1", 2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted rule: %v", err)
	}
}

// recorder is a publisher that records what it is given, failing while fail is set.
type recorder struct {
	mu       sync.Mutex
	fail     error
	got      []*message.Message
	sent     chan struct{}
	attempts chan struct{} // optional: one per refused publish
}

func (r *recorder) Publish(topic string, msgs ...*message.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		select {
		case r.attempts <- struct{}{}:
		default:
		}
		return r.fail
	}
	if topic != contract.TopicTriggers {
		return fmt.Errorf("topic %s", topic)
	}
	r.got = append(r.got, msgs...)
	r.sent <- struct{}{}
	return nil
}

func (r *recorder) Close() error { return nil }

func (r *recorder) messages() []*message.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestRelayIsWokenByCommits: the relay publishes what the evaluator committed as soon as the
// commit wakes it (its poll is an hour away), keyed by environment.
func TestRelayIsWokenByCommits(t *testing.T) {
	f := newEnvFixture(t, 2)
	pub := &recorder{sent: make(chan struct{}, 16)}
	relay := NewRelay(RelayConfig{Poll: time.Hour}, f.st, pub, slog.New(slog.DiscardHandler))
	f.ev.d.Triggered = relay.Wake
	f.watch(t, "prod", contract.TriggerStartedArtifact)
	stop := runRelay(t, relay)
	defer stop()
	for i, name := range []string{"web", "api"} {
		f.running(t, inst(name, i, 1))
		select {
		case <-pub.sent:
		case <-time.After(30 * time.Second):
			t.Fatalf("the commit that started %s did not wake the relay", name)
		}
	}
	msgs := pub.messages()
	if len(msgs) != 2 {
		t.Fatalf("published %d messages, want 2", len(msgs))
	}
	for i, m := range msgs {
		tr, err := contract.UnmarshalTrigger(m.Payload)
		if err != nil || m.UUID != tr.ID || m.Metadata.Get(contract.MetaPartitionKey) != contract.EnvironmentKey("org-1", "env-1") ||
			tr.Artifact.Name != []string{"web", "api"}[i] {
			t.Errorf("message %s %v: %+v, %v", m.UUID, m.Metadata, tr, err)
		}
	}
}

// TestRelayKeepsTriggersWhileTheBusRefuses: a failed publish leaves the triggers in the outbox,
// and the relay publishes them once the bus takes them again.
func TestRelayKeepsTriggersWhileTheBusRefuses(t *testing.T) {
	f := newEnvFixture(t, 2)
	pub := &recorder{fail: errors.New("broker down"), sent: make(chan struct{}, 16), attempts: make(chan struct{}, 64)}
	relay := NewRelay(RelayConfig{Poll: time.Hour}, f.st, pub, slog.New(slog.DiscardHandler))
	retry := &recordedBackOff{reset: make(chan struct{}, 1)}
	relay.retry = retry // retries at once, counted, rather than after a real wait
	f.watch(t, "prod", contract.TriggerStartedArtifact)
	f.running(t, inst("web", 0, 1))
	stop := sync.OnceFunc(runRelay(t, relay))
	defer stop()
	for range 2 { // two refused attempts
		select {
		case <-pub.attempts:
		case <-time.After(30 * time.Second):
			t.Fatal("the relay did not try to publish")
		}
	}
	pub.mu.Lock()
	pub.fail = nil
	pub.mu.Unlock()
	select {
	case <-pub.sent:
	case <-time.After(30 * time.Second):
		t.Fatal("the relay did not publish after the bus came back")
	}
	if msgs := pub.messages(); len(msgs) != 1 {
		t.Fatalf("published %d messages, want the one trigger once", len(msgs))
	}
	select {
	case <-retry.reset:
	case <-time.After(30 * time.Second):
		t.Fatal("the backoff was not reset after the publish")
	}
	if waits := retry.count(); waits < 2 {
		t.Fatalf("backoff asked %d times; want a wait per refused publish", waits)
	}
}

// recordedBackOff answers every wait with 0, counts them, and signals resets.
type recordedBackOff struct {
	mu    sync.Mutex
	waits int
	reset chan struct{}
}

func (b *recordedBackOff) NextBackOff() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waits++
	return 0
}

func (b *recordedBackOff) Reset() {
	select {
	case b.reset <- struct{}{}:
	default:
	}
}

func (b *recordedBackOff) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waits
}

func runRelay(t *testing.T, r *Relay) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
