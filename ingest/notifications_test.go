package ingest

import "testing"

// TestTargetID: a target keeps its ID (and so its outcomes and deduplication) while it sends to
// the same place, whatever its secret; sending elsewhere makes it another target.
func TestTargetID(t *testing.T) {
	base := NotificationTargetInput{Type: "SLACK", Webhook: "https://hooks.slack.example/a", Context: map[string]string{"channel_id": "C1", "team_id": "T1"}}
	same := base
	same.Context = map[string]string{"team_id": "T1", "channel_id": "C1"}
	secret := NotificationTargetInput{Type: "WEBHOOK", Webhook: "https://hooks.example/x", Secret: "one"}
	rotated := secret
	rotated.Secret = "two"
	if targetID(base) != targetID(same) || targetID(secret) != targetID(rotated) {
		t.Error("an unchanged target got a new ID")
	}
	others := []NotificationTargetInput{
		{Type: "MS_TEAMS", Webhook: base.Webhook, Context: base.Context},
		{Type: "SLACK", Webhook: "https://hooks.slack.example/b", Context: base.Context},
		{Type: "SLACK", Webhook: base.Webhook},
		{Type: "EMAIL", Emails: []string{"a@example.com"}},
		{Type: "EMAIL", Emails: []string{"a@example.com", "b@example.com"}},
		{Type: "PLUGIN", Plugin: "pager"},
	}
	seen := map[string]bool{targetID(base): true}
	for _, o := range others {
		id := targetID(o)
		if seen[id] {
			t.Errorf("%+v shares an ID with another target", o)
		}
		seen[id] = true
	}
}

func TestCheckTarget(t *testing.T) {
	for _, tc := range []struct {
		in    NotificationTargetInput
		field string
	}{
		{NotificationTargetInput{Type: "WEBHOOK"}, "t.webhook"},
		{NotificationTargetInput{Type: "WEBHOOK", Webhook: "ftp://x.example"}, "t.webhook"},
		{NotificationTargetInput{Type: "SLACK", Webhook: "https://x.example", Secret: "s"}, "t.secret"},
		{NotificationTargetInput{Type: "EMAIL"}, "t.emails"},
		{NotificationTargetInput{Type: "EMAIL", Emails: []string{"not an address"}}, "t.emails[0]"},
		{NotificationTargetInput{Type: "PLUGIN", Plugin: "Bad Name"}, "t.plugin"},
		{NotificationTargetInput{Type: "WEBHOOK", Webhook: "https://x.example", Plugin: "pager"}, "t.plugin"},
		{NotificationTargetInput{Type: "FAX"}, "t.type"},
	} {
		c := checker{}
		checkTarget(c, "t", tc.in)
		if _, ok := c[tc.field]; !ok {
			t.Errorf("%+v: errors %v, want one for %s", tc.in, c, tc.field)
		}
	}
	c := checker{}
	checkTarget(c, "t", NotificationTargetInput{Type: "PLUGIN", Plugin: "pager", Webhook: "https://pager.example/v1"})
	checkTarget(c, "u", NotificationTargetInput{Type: "EMAIL", Emails: []string{"Ops <ops@example.com>"}})
	if len(c) != 0 {
		t.Errorf("valid targets refused: %v", c)
	}
}
