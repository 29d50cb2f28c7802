package sqlstore_test

import (
	"context"
	"os"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// TestPostgresOneRelayAcrossProcesses: two evaluate processes on one database never relay at
// the same time (the storetest suite checks this within one process).
func TestPostgresOneRelayAcrossProcesses(t *testing.T) {
	dsn := os.Getenv("VERITRAIL_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultPostgres
	}
	dsn = withSearchPath(dsn, createSchema(t, connectPostgres(t, dsn)))
	ctx := context.Background()
	open := func() *sqlstore.Store {
		s, err := sqlstore.OpenPostgres(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	err := a.Update(ctx, func(tx store.Tx) error {
		return tx.EnqueueTriggers(ctx, []store.Trigger{{ID: "tr-1", OrgID: "org-a", EnvID: "env-1", At: 1, Payload: []byte(`{}`)}})
	})
	if err != nil {
		t.Fatal(err)
	}
	var other int
	n, err := a.RelayTriggers(ctx, 10, func(ctx context.Context, _ []store.Trigger) error {
		var err error
		other, err = b.RelayTriggers(ctx, 10, func(context.Context, []store.Trigger) error {
			t.Error("the second process relayed while the first was publishing")
			return nil
		})
		return err
	})
	if err != nil || n != 1 || other != 0 {
		t.Fatalf("first relay %d, second %d, %v", n, other, err)
	}
	// Once the first is done, the second relays what is pending (here: nothing).
	if n, err := b.RelayTriggers(ctx, 10, func(context.Context, []store.Trigger) error { return nil }); err != nil || n != 0 {
		t.Fatalf("second relay afterwards: %d, %v", n, err)
	}
}
