package sqlstore

import (
	"context"
	"fmt"
	"time"
)

func (s *Store) ConcurrentWriters() bool { return s.d.name == postgresDialect.name }

// awaitPoll is how often AwaitTransactionsInFlight looks again.
const awaitPoll = 10 * time.Millisecond

// AwaitTransactionsInFlight takes, on PostgreSQL, a transaction ID of its own, above every ID
// assigned before (a transaction has one once it has written anything), and waits until the
// oldest transaction still running is above it. (A snapshot's xmax is no such bound: it is one
// past the latest transaction to end, and a transaction begun after that one is not below it.)
// The oldest running transaction is the server's, of every database, so an unrelated long
// transaction delays the wait; the caller bounds it with ctx.
func (s *Store) AwaitTransactionsInFlight(ctx context.Context) error {
	if !s.ConcurrentWriters() {
		return nil
	}
	var horizon string
	s.sent.Add(1)
	if err := s.w.QueryRowContext(ctx, `SELECT pg_current_xact_id()::text`).Scan(&horizon); err != nil {
		return fmt.Errorf("sqlstore: transaction horizon: %w", err)
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		var passed bool
		s.sent.Add(1)
		if err := s.w.QueryRowContext(ctx, s.d.rebind(`SELECT pg_snapshot_xmin(pg_current_snapshot()) > CAST(? AS xid8)`), horizon).Scan(&passed); err != nil {
			return fmt.Errorf("sqlstore: transactions in flight: %w", err)
		}
		if passed {
			return nil
		}
		t.Reset(awaitPoll)
	}
}
