package sqlstore_test

import (
	"context"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/deliverylog/logtest"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

func TestSQLiteDeliveryLog(t *testing.T) {
	logtest.Run(t, func(t *testing.T) logtest.Log {
		return openSQLite(t, filepath.Join(t.TempDir(), "veritrail.db"))
	})
}

func TestPostgresDeliveryLog(t *testing.T) {
	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultPostgres
	}
	admin := connectPostgres(t, dsn)
	logtest.Run(t, func(t *testing.T) logtest.Log {
		s, err := sqlstore.OpenPostgres(context.Background(), withSearchPath(dsn, createSchema(t, admin)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestRuleDeadLetters: the API's per-rule listing keeps to its rule and organization.
func TestRuleDeadLetters(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "veritrail.db"))
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, k := range []deliverylog.Key{{Org: "acme", Rule: 1, Target: "t", Event: "e1"}, {Org: "acme", Rule: 2, Target: "t", Event: "e1"},
		{Org: "other", Rule: 1, Target: "t", Event: "e1"}, {Org: "acme", Rule: 1, Target: "t", Event: "e2"}} {
		if _, err := s.Claim(ctx, deliverylog.Entry{Key: k, Notifier: "webhook"}, at, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkFailed(ctx, k, deliverylog.Failure{At: at, Attempts: 1, Reason: "client_error", Message: "404"}); err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Second)
	}
	dead, err := s.RuleDeadLetters(ctx, "acme", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || dead[0].Key.Event != "e2" || dead[1].Key.Event != "e1" || dead[0].Key.Rule != 1 || dead[1].Key.Org != "acme" {
		t.Fatalf("dead letters of acme's rule 1: %+v", dead)
	}
}

// TestRuleDeliveries: a rule's deliveries page latest first, pending ones (with their last
// failure) before the settled, delivered ones without the failure of an earlier attempt; other
// rules and organizations stay apart.
func TestRuleDeliveries(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "veritrail.db"))
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	claim := func(k deliverylog.Key) {
		t.Helper()
		if _, err := s.Claim(ctx, deliverylog.Entry{Key: k, Notifier: "webhook"}, at, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	key := func(org string, rule int64, event string) deliverylog.Key {
		return deliverylog.Key{Org: org, Rule: rule, Target: "t", Event: event}
	}
	// e1 delivered after a failed attempt, e2 given up on, e3 pending after a failed attempt.
	claim(key("acme", 1, "e1"))
	if err := s.RecordFailure(ctx, key("acme", 1, "e1"), deliverylog.Failure{At: at, Attempts: 1, Reason: "timeout"}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDelivered(ctx, key("acme", 1, "e1"), at.Add(time.Second), 2); err != nil {
		t.Fatal(err)
	}
	claim(key("acme", 1, "e2"))
	if err := s.MarkFailed(ctx, key("acme", 1, "e2"), deliverylog.Failure{At: at.Add(2 * time.Second), Attempts: 5, Reason: "client_error",
		Message: "404", Exhausted: true}); err != nil {
		t.Fatal(err)
	}
	claim(key("acme", 1, "e3"))
	if err := s.RecordFailure(ctx, key("acme", 1, "e3"), deliverylog.Failure{At: at.Add(3 * time.Second), Attempts: 1, Reason: "server_error"}); err != nil {
		t.Fatal(err)
	}
	claim(key("acme", 2, "e1"))
	claim(key("other", 1, "e1"))

	got, total, err := s.RuleDeliveries(ctx, "acme", 1, store.Page{Page: 1, PerPage: 2})
	if err != nil {
		t.Fatal(err)
	}
	if total != 3 || len(got) != 2 {
		t.Fatalf("first page: %d of %d, want 2 of 3", len(got), total)
	}
	if d := got[0]; d.Key.Event != "e3" || d.State != deliverylog.Pending || d.Reason != "server_error" || !d.At.Equal(at.Add(3*time.Second)) {
		t.Errorf("pending delivery: %+v", d)
	}
	if d := got[1]; d.Key.Event != "e2" || d.State != deliverylog.GivenUp || d.Reason != "client_error" || d.Message != "404" || d.Attempts != 5 {
		t.Errorf("given-up delivery: %+v", d)
	}
	got, _, err = s.RuleDeliveries(ctx, "acme", 1, store.Page{Page: 2, PerPage: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Key.Event != "e1" || got[0].State != deliverylog.Delivered || got[0].Reason != "" || got[0].Attempts != 2 ||
		!got[0].At.Equal(at.Add(time.Second)) {
		t.Errorf("second page: %+v", got)
	}
}
