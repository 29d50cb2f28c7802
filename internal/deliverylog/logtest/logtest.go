// Package logtest is the conformance suite of deliverylog.Log implementations: the in-memory one
// and the store's SQL one pass the same checks of the contracts documented on deliverylog.Log.
package logtest

import (
	"context"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/veritrail/veritrail/plugins/sdk"
)

// Log is what the suite tests: the delivery log and its outcome reader.
type Log interface {
	deliverylog.Log
	deliverylog.Outcomes
}

// base is the suite's clock origin; every time is explicit, nothing sleeps.
var base = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

// Run runs every check against a fresh log from newLog.
func Run(t *testing.T, newLog func(t *testing.T) Log) {
	t.Run("ClaimThenDeliver", func(t *testing.T) { claimThenDeliver(t, newLog(t)) })
	t.Run("ExpiredLeaseIsReclaimed", func(t *testing.T) { expiredLease(t, newLog(t)) })
	t.Run("DeadLetterIsKept", func(t *testing.T) { deadLetter(t, newLog(t)) })
	t.Run("SettledStaysSettled", func(t *testing.T) { settledStays(t, newLog(t)) })
	t.Run("OutcomesTellTheTruth", func(t *testing.T) { outcomes(t, newLog(t)) })
	t.Run("ConcurrentClaims", func(t *testing.T) { concurrentClaims(t, newLog(t)) })
}

func entry(org string, rule int64, target, event string) deliverylog.Entry {
	key := deliverylog.Key{Org: org, Rule: rule, Target: target, Event: event}
	return deliverylog.Entry{Key: key, Notifier: "webhook", Payload: sdk.Payload{
		SchemaVersion: sdk.SchemaVersion,
		DeliveryID:    key.DeliveryID(),
		Rule:          sdk.Rule{Org: org, Number: rule, Name: "rule"},
		Event: sdk.Event{ID: event, Trigger: sdk.OnStartedArtifact, OccurredAt: base,
			Environment: sdk.Environment{Name: "prod"},
			Artifact:    &sdk.Artifact{Name: "web", Fingerprint: "ab12", Provenance: []sdk.Provenance{{Flow: "f", Trail: "t"}}}},
	}}
}

func claim(t *testing.T, l deliverylog.Log, e deliverylog.Entry, now time.Time, want deliverylog.ClaimState) {
	t.Helper()
	got, err := l.Claim(context.Background(), e, now, time.Minute)
	if err != nil {
		t.Fatalf("Claim %s: %v", e.Key, err)
	}
	if got != want {
		t.Fatalf("Claim %s at %s: %s, want %s", e.Key, now.Sub(base), got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func claimThenDeliver(t *testing.T, l Log) {
	ctx := context.Background()
	e := entry("acme", 1, "t1", "e1")
	claim(t, l, e, base, deliverylog.Claimed)
	claim(t, l, e, base.Add(time.Second), deliverylog.InFlight)
	// Other targets, rules and events are other deliveries.
	claim(t, l, entry("acme", 1, "t2", "e1"), base, deliverylog.Claimed)
	claim(t, l, entry("acme", 2, "t1", "e1"), base, deliverylog.Claimed)
	claim(t, l, entry("acme", 1, "t1", "e2"), base, deliverylog.Claimed)
	claim(t, l, entry("other", 1, "t1", "e1"), base, deliverylog.Claimed)

	must(t, l.MarkDelivered(ctx, e.Key, base.Add(2*time.Second), 1))
	claim(t, l, e, base.Add(3*time.Second), deliverylog.AlreadyDelivered)
	claim(t, l, e, base.Add(time.Hour), deliverylog.AlreadyDelivered) // a lease does not matter once settled
}

func expiredLease(t *testing.T, l Log) {
	ctx := context.Background()
	e := entry("acme", 1, "t1", "e1")
	claim(t, l, e, base, deliverylog.Claimed)
	claim(t, l, e, base.Add(59*time.Second), deliverylog.InFlight)
	changed := e
	changed.Notifier = "chat"
	claim(t, l, changed, base.Add(61*time.Second), deliverylog.Claimed) // the first worker died
	claim(t, l, e, base.Add(62*time.Second), deliverylog.InFlight)      // the lease was renewed

	must(t, l.MarkFailed(ctx, e.Key, deliverylog.Failure{At: base.Add(70 * time.Second), Attempts: 2, Reason: "client_error", Message: "404"}))
	dead, err := l.ListDeadLetters(ctx, "acme", 10)
	must(t, err)
	if len(dead) != 1 || dead[0].Notifier != "webhook" {
		t.Fatalf("dead letters %+v: a re-claim must keep the stored entry", dead)
	}
}

func deadLetter(t *testing.T, l Log) {
	ctx := context.Background()
	e := entry("acme", 1, "t1", "e1")
	claim(t, l, e, base, deliverylog.Claimed)
	must(t, l.RecordFailure(ctx, e.Key, deliverylog.Failure{At: base.Add(time.Second), Attempts: 1, Retryable: true, Reason: "server_error", Message: "503"}))
	claim(t, l, e, base.Add(2*time.Second), deliverylog.InFlight) // a failed attempt does not settle it
	final := deliverylog.Failure{At: base.Add(3 * time.Second), Attempts: 4, Retryable: true, Reason: "server_error",
		Message: "receiver answered 503", Exhausted: true}
	must(t, l.MarkFailed(ctx, e.Key, final))
	claim(t, l, e, base.Add(time.Hour), deliverylog.AlreadyFailed)

	// A second, older dead letter and one of another organization.
	older := entry("acme", 1, "t2", "e1")
	claim(t, l, older, base, deliverylog.Claimed)
	must(t, l.MarkFailed(ctx, older.Key, deliverylog.Failure{At: base.Add(time.Second), Attempts: 1, Reason: "client_error", Message: "404"}))
	foreign := entry("other", 1, "t1", "e1")
	claim(t, l, foreign, base, deliverylog.Claimed)
	must(t, l.MarkFailed(ctx, foreign.Key, deliverylog.Failure{At: base.Add(time.Second), Attempts: 1, Reason: "client_error", Message: "404"}))

	dead, err := l.ListDeadLetters(ctx, "acme", 10)
	must(t, err)
	if len(dead) != 2 {
		t.Fatalf("%d dead letters of acme, want 2: %+v", len(dead), dead)
	}
	if !reflect.DeepEqual(dead[0].Entry, e) {
		t.Errorf("dead letter entry\n%+v\nwant the claimed one\n%+v", dead[0].Entry, e)
	}
	got := dead[0].Failure
	if !got.At.Equal(final.At) || got.Attempts != final.Attempts || got.Reason != final.Reason ||
		got.Message != final.Message || !got.Exhausted || !got.Retryable {
		t.Errorf("dead letter failure %+v, want %+v", got, final)
	}
	if dead[1].Key != older.Key {
		t.Errorf("dead letters are not most recent first: %v then %v", dead[0].Key, dead[1].Key)
	}
	one, err := l.ListDeadLetters(ctx, "acme", 1)
	must(t, err)
	if len(one) != 1 || one[0].Key != e.Key {
		t.Errorf("limit 1 gave %+v", one)
	}
}

func settledStays(t *testing.T, l Log) {
	ctx := context.Background()
	e := entry("acme", 1, "t1", "e1")
	claim(t, l, e, base, deliverylog.Claimed)
	must(t, l.MarkDelivered(ctx, e.Key, base.Add(time.Second), 1))
	must(t, l.MarkDelivered(ctx, e.Key, base.Add(2*time.Second), 1))
	must(t, l.MarkFailed(ctx, e.Key, deliverylog.Failure{At: base.Add(3 * time.Second), Reason: "client_error"}))
	claim(t, l, e, base.Add(4*time.Second), deliverylog.AlreadyDelivered)
	dead, err := l.ListDeadLetters(ctx, "acme", 10)
	must(t, err)
	if len(dead) != 0 {
		t.Fatalf("a delivered delivery became a dead letter: %+v", dead)
	}
}

func outcome(t *testing.T, l Log, org string, rule int64, target string) deliverylog.TargetOutcome {
	t.Helper()
	all, err := l.TargetOutcomes(context.Background(), org, rule)
	must(t, err)
	for _, o := range all {
		if o.Target == target {
			return o
		}
	}
	t.Fatalf("no outcome for %s/%d/%s in %+v", org, rule, target, all)
	return deliverylog.TargetOutcome{}
}

func outcomes(t *testing.T, l Log) {
	ctx := context.Background()
	if all, err := l.TargetOutcomes(ctx, "acme", 1); err != nil || len(all) != 0 {
		t.Fatalf("outcomes before any attempt: %+v, %v", all, err)
	}
	a := entry("acme", 1, "t1", "e1")
	claim(t, l, a, base, deliverylog.Claimed)
	must(t, l.RecordFailure(ctx, a.Key, deliverylog.Failure{At: base.Add(10 * time.Second), Attempts: 1, Retryable: true, Reason: "server_error", Message: "503"}))
	o := outcome(t, l, "acme", 1, "t1")
	if !o.IsFailing() || !o.LastFailureAt.Equal(base.Add(10*time.Second)) || o.LastFailureReason != "server_error" || o.LastFailureMessage != "503" {
		t.Fatalf("after a failed attempt: %+v", o)
	}

	// A success of an older event, recorded late, does not hide the newer failure.
	b := entry("acme", 1, "t1", "e0")
	claim(t, l, b, base, deliverylog.Claimed)
	must(t, l.MarkDelivered(ctx, b.Key, base.Add(5*time.Second), 1))
	if o := outcome(t, l, "acme", 1, "t1"); !o.IsFailing() || !o.LastSuccessAt.Equal(base.Add(5*time.Second)) {
		t.Fatalf("after an older success: %+v", o)
	}

	must(t, l.MarkDelivered(ctx, a.Key, base.Add(20*time.Second), 2))
	o = outcome(t, l, "acme", 1, "t1")
	if o.IsFailing() || !o.LastSuccessAt.Equal(base.Add(20*time.Second)) || !o.LastFailureAt.Equal(base.Add(10*time.Second)) {
		t.Fatalf("after the retry succeeded: %+v", o)
	}

	// A second target that fails makes the rule fail, whatever the first says.
	c := entry("acme", 1, "t2", "e1")
	claim(t, l, c, base, deliverylog.Claimed)
	must(t, l.MarkFailed(ctx, c.Key, deliverylog.Failure{At: base.Add(15 * time.Second), Attempts: 1, Reason: "client_error", Message: "404"}))
	all, err := l.TargetOutcomes(ctx, "acme", 1)
	must(t, err)
	if len(all) != 2 || all[0].Target != "t1" || all[1].Target != "t2" {
		t.Fatalf("outcomes %+v, want t1 and t2 in order", all)
	}
	r := deliverylog.Summarize(all)
	if r.IsFailing == nil || !*r.IsFailing || !r.LastSuccessAt.Equal(base.Add(20*time.Second)) || !r.LastFailureAt.Equal(base.Add(15*time.Second)) {
		t.Fatalf("rule outcome %+v", r)
	}
	if other, err := l.TargetOutcomes(ctx, "acme", 2); err != nil || len(other) != 0 {
		t.Fatalf("rule 2 has outcomes %+v, %v", other, err)
	}
}

func concurrentClaims(t *testing.T, l Log) {
	e := entry("acme", 1, "t1", "e1")
	const workers = 16
	states := make([]deliverylog.ClaimState, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := l.Claim(context.Background(), e, base, time.Minute)
			if err != nil {
				t.Error(err)
			}
			states[i] = s
		}()
	}
	wg.Wait()
	won := 0
	for _, s := range states {
		if s == deliverylog.Claimed {
			won++
		} else if s != deliverylog.InFlight {
			t.Errorf("a concurrent claim answered %s", s)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent claims won, want exactly 1", won, workers)
	}
}
