package contract

import (
	"reflect"
	"strings"
	"testing"
)

func TestTriggerRoundTrip(t *testing.T) {
	no := false
	in := &Trigger{ID: "t-1", OrgID: "org-1", EnvID: "env-1", Trigger: TriggerStartedArtifact, At: 12.5,
		Environment: TriggerEnvironment{Name: "prod", Type: "K8S"},
		Snapshot:    &TriggerSnapshot{Index: 3, At: 12.5},
		Artifact: &TriggerArtifact{Name: "web", Fingerprint: strings.Repeat("a", 64), Compliant: &no, InstancesNow: 2,
			Provenance: []TriggerProvenance{{Flow: "app", Trail: "t1", ArtifactID: "a-1", Compliant: &no}}}}
	b, err := MarshalTrigger(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := UnmarshalTrigger(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.Version != TriggerSchemaVersion || !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v", out, in)
	}
	if out.PartitionKey() != EnvironmentKey("org-1", "env-1") {
		t.Errorf("partition key %q: triggers must share their environment's key", out.PartitionKey())
	}
}

func TestUnmarshalTriggerRefuses(t *testing.T) {
	for name, body := range map[string]string{
		"newer version": `{"id":"t","org_id":"o","trigger":"ON_STARTED_ARTIFACT","version":2}`,
		"no id":         `{"org_id":"o","trigger":"ON_STARTED_ARTIFACT","version":1}`,
		"no trigger":    `{"id":"t","org_id":"o","version":1}`,
		"not JSON":      `{`,
	} {
		if _, err := UnmarshalTrigger([]byte(body)); err == nil {
			t.Errorf("%s: accepted %s", name, body)
		}
	}
}

func TestNotificationWritesShareTheOrganizationsKey(t *testing.T) {
	for _, e := range []*Envelope{
		{OrgID: "org-1", Kind: KindNotificationCreated, Notification: &NotificationRule{ID: "r-1"}},
		{OrgID: "org-1", Kind: KindNotificationDeleted, Notification: &NotificationRule{ID: "r-2", Number: 4}},
	} {
		if got := e.PartitionKey(); got != NotificationsKey("org-1") {
			t.Errorf("%s: partition key %q, want the organization's rules key", e.Kind, got)
		}
	}
}
