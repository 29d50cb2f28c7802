package contract

import "testing"

// TestPolicyPartitionKeys: attachments share the environment's key, so they apply in order with its reports;
// versions of one policy share the policy's.
func TestPolicyPartitionKeys(t *testing.T) {
	attach := &Envelope{OrgID: "o", Attach: &PolicyAttachment{EnvID: "e1", Names: []string{"p"}}}
	report := &Envelope{OrgID: "o", Snapshot: &SnapshotReport{EnvID: "e1"}}
	if attach.PartitionKey() != report.PartitionKey() {
		t.Errorf("attachment key %q, report key %q: want the same", attach.PartitionKey(), report.PartitionKey())
	}
	v := &Envelope{OrgID: "o", Policy: &PolicyVersion{Name: "prod"}}
	if got := v.PartitionKey(); got != PolicyKey("o", "prod") || got == PolicyKey("o", "dev") {
		t.Errorf("policy version key %q", got)
	}
}
