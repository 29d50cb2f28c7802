package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"

	"github.com/veritrail/veritrail/internal/contract"
	"github.com/veritrail/veritrail/internal/store"
)

func rule(orgID, id, name string, at float64) store.NotificationRule {
	return store.NotificationRule{ID: id, OrgID: orgID, Name: name, Environments: []string{"prod", "staging"},
		Triggers: []string{contract.TriggerStartedArtifact, contract.TriggerCompliantEnv},
		Targets: []store.NotificationTarget{
			{ID: "t-hook", Type: "WEBHOOK", URL: "https://hooks.example/x", Secret: "s3cret"},
			{ID: "t-mail", Type: "EMAIL", Emails: []string{"ops@example.com", "dev@example.com"}},
			{ID: "t-chat", Type: "SLACK", URL: "https://hooks.slack.example/y", Context: map[string]string{"channel_id": "C1"}},
			{ID: "t-page", Type: "PLUGIN", Plugin: "pager", URL: "https://pager.example/v1"},
		},
		CreatedBy: "alice", CreatedAt: at, LastModifiedAt: at}
}

func (e *env) insertRule(t *testing.T, r store.NotificationRule) int64 {
	t.Helper()
	var n int64
	e.update(t, func(tx store.Tx) error {
		var err error
		n, err = tx.InsertNotificationRule(e.ctx, r)
		return err
	})
	return n
}

func testNotificationRules(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	e.org(t, "org-b", "other")
	first := rule("org-a", "r-1", "prod watch", t0)
	if n := e.insertRule(t, first); n != 1 {
		t.Fatalf("first rule got number %d, want 1", n)
	}
	if n := e.insertRule(t, rule("org-a", "r-2", "second", t0+1)); n != 2 {
		t.Fatalf("second rule got number %d, want 2", n)
	}
	if n := e.insertRule(t, rule("org-b", "r-3", "elsewhere", t0)); n != 1 {
		t.Fatalf("another organization's first rule got number %d, want 1", n)
	}

	first.Number = 1
	got, err := e.s.NotificationRule(e.ctx, "org-a", 1)
	if err != nil || !reflect.DeepEqual(got, first) {
		t.Fatalf("NotificationRule = %+v, %v\nwant %+v", got, err, first)
	}
	if got, err := e.s.NotificationRuleByID(e.ctx, "org-a", "r-1"); err != nil || !reflect.DeepEqual(got, first) {
		t.Errorf("NotificationRuleByID = %+v, %v", got, err)
	}
	_, err = e.s.NotificationRuleByID(e.ctx, "org-b", "r-1")
	wantErr(t, "NotificationRuleByID of another organization", err, store.ErrNotFound)
	_, err = e.s.NotificationRule(e.ctx, "org-a", 9)
	wantErr(t, "NotificationRule unknown", err, store.ErrNotFound)
	list, err := e.s.NotificationRules(e.ctx, "org-a")
	must(t, "NotificationRules", err)
	checkIDs(t, "NotificationRules", list, ruleID, "r-1", "r-2")

	// An update replaces what the rule does and keeps who made it and when.
	changed := first
	changed.Name, changed.Environments, changed.Triggers = "renamed", []string{"prod"}, []string{contract.TriggerExitedArtifact}
	changed.Targets = changed.Targets[:1]
	changed.CreatedBy, changed.CreatedAt, changed.LastModifiedAt = "mallory", 0, t0+5
	e.update(t, func(tx store.Tx) error { return tx.UpdateNotificationRule(e.ctx, changed) })
	want := changed
	want.CreatedBy, want.CreatedAt = first.CreatedBy, first.CreatedAt
	if got, err := e.s.NotificationRule(e.ctx, "org-a", 1); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("after update = %+v, %v\nwant %+v", got, err, want)
	}
	missing := changed
	missing.Number = 7
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.UpdateNotificationRule(e.ctx, missing) })
	wantErr(t, "UpdateNotificationRule unknown", err, store.ErrNotFound)

	// A deleted rule is gone, and its number is never given again.
	e.update(t, func(tx store.Tx) error { return tx.DeleteNotificationRule(e.ctx, "org-a", 2, t0+6) })
	_, err = e.s.NotificationRule(e.ctx, "org-a", 2)
	wantErr(t, "NotificationRule deleted", err, store.ErrNotFound)
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.DeleteNotificationRule(e.ctx, "org-a", 2, t0+7) })
	wantErr(t, "DeleteNotificationRule twice", err, store.ErrNotFound)
	err = e.s.Update(e.ctx, func(tx store.Tx) error { return tx.UpdateNotificationRule(e.ctx, rule("org-a", "r-2", "back", t0)) })
	wantErr(t, "UpdateNotificationRule of a deleted rule", err, store.ErrNotFound)
	if n := e.insertRule(t, rule("org-a", "r-4", "third", t0+8)); n != 3 {
		t.Fatalf("the rule after a deleted one got number %d, want 3", n)
	}
	list, err = e.s.NotificationRules(e.ctx, "org-a")
	must(t, "NotificationRules", err)
	checkIDs(t, "NotificationRules after delete", list, ruleID, "r-1", "r-4")
}

func ruleID(r store.NotificationRule) string { return r.ID }

// relay takes every pending trigger, in the order the relay hands them over.
func (e *env) relay(t *testing.T) []store.Trigger {
	t.Helper()
	var got []store.Trigger
	for {
		n, err := e.s.RelayTriggers(e.ctx, 2, func(_ context.Context, trs []store.Trigger) error {
			got = append(got, trs...)
			return nil
		})
		must(t, "RelayTriggers", err)
		if n == 0 {
			return got
		}
	}
}

func outboxTrigger(id, env string, at float64) store.Trigger {
	return store.Trigger{ID: id, OrgID: "org-a", EnvID: env, At: at, Payload: []byte(`{"id":"` + id + `"}`)}
}

// traceMetadata is what a traced trigger's message carries besides the relay's keys.
var traceMetadata = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}

func testTriggerOutbox(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	if got := e.relay(t); len(got) != 0 {
		t.Fatalf("an empty outbox relayed %+v", got)
	}
	var ids []string
	e.update(t, func(tx store.Tx) error {
		var batch []store.Trigger
		for i := range 5 {
			id := fmt.Sprint("tr-", i)
			ids = append(ids, id)
			tr := outboxTrigger(id, "env-1", t0+float64(i))
			if i == 1 { // one carries message metadata (a trace context), the others none
				tr.Metadata = traceMetadata
			}
			batch = append(batch, tr)
		}
		return tx.EnqueueTriggers(e.ctx, batch)
	})
	// The same trigger enqueued again (its change applied twice) stays one row.
	e.update(t, func(tx store.Tx) error {
		return tx.EnqueueTriggers(e.ctx, []store.Trigger{outboxTrigger("tr-0", "env-1", t0)})
	})
	// A rolled-back change leaves no trigger.
	boom := errors.New("boom")
	err := e.s.Update(e.ctx, func(tx store.Tx) error {
		if err := tx.EnqueueTriggers(e.ctx, []store.Trigger{outboxTrigger("tr-lost", "env-1", t0)}); err != nil {
			return err
		}
		return boom
	})
	wantErr(t, "Update", err, boom)

	// A failed publish leaves everything pending.
	_, err = e.s.RelayTriggers(e.ctx, 10, func(context.Context, []store.Trigger) error { return boom })
	wantErr(t, "RelayTriggers with a failing publish", err, boom)

	got := e.relay(t)
	checkIDs(t, "relayed", got, triggerID, ids...)
	for i, tr := range got {
		if tr.OrgID != "org-a" || tr.EnvID != "env-1" || tr.At != t0+float64(i) || string(tr.Payload) != `{"id":"`+tr.ID+`"}` {
			t.Errorf("relayed %+v", tr)
		}
		var wantMetadata map[string]string
		if i == 1 {
			wantMetadata = traceMetadata
		}
		if !maps.Equal(tr.Metadata, wantMetadata) {
			t.Errorf("trigger %s relayed with metadata %v", tr.ID, tr.Metadata)
		}
		if i > 0 && tr.Seq <= got[i-1].Seq {
			t.Errorf("seq %d after %d: not in outbox order", tr.Seq, got[i-1].Seq)
		}
	}
	if again := e.relay(t); len(again) != 0 {
		t.Fatalf("sent triggers were relayed again: %+v", again)
	}

	// One relay at a time: a relay started while another publishes gets nothing.
	e.update(t, func(tx store.Tx) error {
		return tx.EnqueueTriggers(e.ctx, []store.Trigger{outboxTrigger("tr-9", "env-2", t0)})
	})
	var inner int
	n, err := e.s.RelayTriggers(e.ctx, 10, func(ctx context.Context, _ []store.Trigger) error {
		var err error
		inner, err = e.s.RelayTriggers(ctx, 10, func(context.Context, []store.Trigger) error {
			t.Error("a second relay ran while the first one was publishing")
			return nil
		})
		return err
	})
	if err != nil || n != 1 || inner != 0 {
		t.Errorf("nested relay: outer %d, inner %d, %v", n, inner, err)
	}

	pruned, err := e.s.PruneTriggers(e.ctx, 0)
	if err != nil || pruned != 0 {
		t.Errorf("PruneTriggers before anything was sent = %d, %v", pruned, err)
	}
	e.update(t, func(tx store.Tx) error {
		return tx.EnqueueTriggers(e.ctx, []store.Trigger{outboxTrigger("tr-10", "env-2", t0)})
	})
	pruned, err = e.s.PruneTriggers(e.ctx, 1e12)
	if err != nil || pruned != 6 {
		t.Errorf("PruneTriggers = %d, %v; want the 6 sent triggers", pruned, err)
	}
	checkIDs(t, "pending after prune", e.relay(t), triggerID, "tr-10")
}

func triggerID(tr store.Trigger) string { return tr.ID }

// testComplianceTriggers: whatever code writes an environment's state, a change to a decided
// state enqueues one compliance trigger, and keeping the state enqueues none.
func testComplianceTriggers(t *testing.T, e *env) {
	e.org(t, "org-a", "acme")
	envRow := store.Environment{ID: "env-1", OrgID: "org-a", Name: "prod", Type: "K8S", Tags: map[string]string{},
		CreatedAt: t0, LastModifiedAt: t0}
	e.update(t, func(tx store.Tx) error {
		_, err := tx.UpsertEnvironment(e.ctx, envRow)
		return err
	})
	setState := func(state *bool) {
		t.Helper()
		e.update(t, func(tx store.Tx) error {
			cur, err := tx.EnvironmentByID(e.ctx, "org-a", "env-1")
			if err != nil {
				return err
			}
			cur.State = state
			return tx.UpdateEnvironment(e.ctx, cur)
		})
	}
	yes, no := true, false
	for _, s := range []*bool{nil, &no, &no, &yes, &yes, nil, &yes, &no} {
		setState(s)
	}
	var fired []string
	for _, tr := range e.relay(t) {
		ct, err := contract.UnmarshalTrigger(tr.Payload)
		if err != nil {
			t.Fatalf("outbox payload %s: %v", tr.Payload, err)
		}
		if ct.ID != tr.ID || ct.OrgID != "org-a" || ct.EnvID != "env-1" || tr.EnvID != "env-1" ||
			ct.Environment.Name != "prod" || ct.Environment.Type != "K8S" || ct.Environment.Compliant == nil || ct.At <= 0 {
			t.Errorf("compliance trigger %+v (row %+v)", ct, tr)
		}
		fired = append(fired, ct.Trigger)
	}
	// nil -> false fires; false again does not; true fires; true again and a return to nil do
	// not; nil -> true fires (it differs from nil), then false fires.
	want := []string{contract.TriggerNonCompliantEnv, contract.TriggerCompliantEnv, contract.TriggerCompliantEnv,
		contract.TriggerNonCompliantEnv}
	if !reflect.DeepEqual(fired, want) {
		t.Fatalf("compliance triggers %q, want %q", fired, want)
	}
}
