package ingest

import (
	"context"
	"net"
	"net/netip"
	"testing"
)

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

// fakeResolver resolves names from a table; any other name does not resolve.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs, ok := f[host]; ok {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestTargetAddresses: a webhook or chat target the notify tier would refuse to connect to is refused
// when the rule is written, unless private targets are allowed; names are resolved by the resolver given.
func TestTargetAddresses(t *testing.T) {
	resolver := fakeResolver{
		"internal.example":  {netip.MustParseAddr("10.0.0.1")},
		"metadata.example":  {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00::1")},
		"mixed.example":     {netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("93.184.216.34")},
		"hooks.example.com": {netip.MustParseAddr("93.184.216.34")},
	}
	refused := []string{
		"http://10.0.0.1/hook",
		"http://127.0.0.1:8080/hook",
		"http://169.254.169.254/latest/meta-data/",
		"http://[::1]:9000/x",
		"https://[::ffff:192.168.1.1]/x",
		"http://0.0.0.0/",
		"http://[fe80::1%25eth0]/",
		"https://internal.example/hook",
		"https://metadata.example/",
	}
	accepted := []string{
		"https://hooks.example.com/veritrail",
		"https://mixed.example/hook", // a public address among them: the dialler refuses the others
		"https://unresolvable.example/hook",
		"https://93.184.216.34/hook",
		"https://[2606:4700::1111]/hook",
	}
	guarded := New(Config{}, Deps{Resolver: resolver})
	open := New(Config{AllowPrivateTargets: true}, Deps{Resolver: resolver})
	for _, u := range refused {
		if msg := guarded.targetAddressProblem(context.Background(), u); msg == "" {
			t.Errorf("%s was accepted", u)
		}
		if msg := open.targetAddressProblem(context.Background(), u); msg != "" {
			t.Errorf("%s was refused with private targets allowed: %s", u, msg)
		}
	}
	for _, u := range accepted {
		if msg := guarded.targetAddressProblem(context.Background(), u); msg != "" {
			t.Errorf("%s was refused: %s", u, msg)
		}
	}
}
