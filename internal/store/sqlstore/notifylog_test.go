package sqlstore_test

import (
	"context"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/deliverylog/logtest"
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
