package sqlstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/veritrail/veritrail/internal/retrybackoff"
)

// Changes announced by the evaluator reach the ingest processes through PostgreSQL's
// LISTEN/NOTIFY: a notification sent in a transaction is delivered when, and only if, it
// commits, so a listener never hears of a change it could not read yet, and never misses one
// that committed while it stayed connected. Each schema (one Veritrail installation) has its own
// channel.

// listenIdle is how long the listener waits for a notification before it checks its connection
// with a ping that must answer within listenPing: so a connection lost without a word is noticed
// in about 15 seconds, and kept answers stop being used.
const (
	listenIdle = 10 * time.Second
	listenPing = 5 * time.Second
)

// maxAnnouncement keeps a notification under PostgreSQL's 8,000-byte payload limit; a larger
// announcement names the organizations of its artifacts instead.
const maxAnnouncement = 7000

// announcement is the payload: organizations where anything may have changed, and artifacts
// (organization ID -> fingerprints) whose evidence was evaluated.
type announcement struct {
	Orgs      []string            `json:"o,omitempty"`
	Artifacts map[string][]string `json:"a,omitempty"`
}

func changesChannel(schema string) string {
	sum := sha256.Sum256([]byte(schema))
	return "veritrail_changes_" + hex.EncodeToString(sum[:8]) // an identifier whatever the schema's name
}

// Announce tells listeners (ListenChanges) what the transaction changed, when it commits. On
// SQLite it does nothing: the embedded mode's evaluator tells the API in the same process.
func (t *txn) Announce(ctx context.Context, orgs []string, artifacts map[string][]string) error {
	if t.channel == "" || (len(orgs) == 0 && len(artifacts) == 0) {
		return nil
	}
	payload, err := json.Marshal(announcement{Orgs: orgs, Artifacts: artifacts})
	if err != nil {
		return fmt.Errorf("sqlstore: announce: %w", err)
	}
	if len(payload) > maxAnnouncement {
		a := announcement{Orgs: orgs}
		for org := range artifacts {
			a.Orgs = append(a.Orgs, org)
		}
		if payload, err = json.Marshal(a); err != nil {
			return fmt.Errorf("sqlstore: announce: %w", err)
		}
	}
	_, err = t.exec(ctx, "announce changes", `SELECT pg_notify(?, ?)`, t.channel, string(payload))
	return err
}

// ChangeListener hears the changes announced on a store (ListenChanges).
type ChangeListener interface {
	// Changed is one committed announcement (see store.Tx.Announce).
	Changed(orgs []string, artifacts map[string][]string)
	// Listening says whether announcements are heard from now on. Whatever changed while they
	// were not, nobody heard: a caller keeping answers must stop using them while false, and
	// forget them when it turns true.
	Listening(bool)
}

// ListenChanges passes every announcement committed on this PostgreSQL store to l until ctx
// ends, reconnecting with backoff when the connection is lost. It returns at once on SQLite,
// where nothing is announced.
func (s *Store) ListenChanges(ctx context.Context, l ChangeListener, log *slog.Logger) {
	if s.channel == "" {
		return
	}
	retry := retrybackoff.New(100*time.Millisecond, 10*time.Second)
	for ctx.Err() == nil {
		err := s.listen(ctx, l)
		l.Listening(false)
		if ctx.Err() != nil {
			return
		}
		wait := retry.NextBackOff()
		log.Warn("sqlstore: listening for changes failed; answers are read from the store until it listens again",
			"err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (s *Store) listen(ctx context.Context, l ChangeListener) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	l.Listening(true)
	for {
		wctx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && wctx.Err() != nil {
			// Quiet for a while: make sure the connection is still there (a connection dropped
			// halfway, by a NAT or a failover, would otherwise go unnoticed for many minutes,
			// while announcements are lost).
			pctx, cancel := context.WithTimeout(ctx, listenPing)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		var a announcement
		if err := json.Unmarshal([]byte(n.Payload), &a); err != nil {
			l.Listening(true) // not ours to read: assume anything changed
			continue
		}
		l.Changed(a.Orgs, a.Artifacts)
	}
}
