package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/veritrail/veritrail/internal/migrate"
	"github.com/veritrail/veritrail/internal/store"
)

// webSessionsTable is migration 7's table: the web UI's sessions, by the hash of their token.
const webSessionsTable = `CREATE TABLE IF NOT EXISTS web_sessions (
	token_hash {{blob}} PRIMARY KEY, key_hash {{blob}} NOT NULL,
	created_at DOUBLE PRECISION NOT NULL, expires_at DOUBLE PRECISION NOT NULL)`

// webSessions is migration 7: the table, and the index the clean-up of expired sessions reads.
func (d dialect) webSessions() func(context.Context, migrate.Execer) error {
	r := strings.NewReplacer("{{blob}}", d.blob)
	return migrate.Statements(r.Replace(webSessionsTable),
		`CREATE INDEX IF NOT EXISTS web_sessions_expiry ON web_sessions (expires_at)`)
}

func (s *Store) CreateSession(ctx context.Context, w store.WebSession) error {
	return s.exec(ctx, "create web session",
		`INSERT INTO web_sessions (token_hash, key_hash, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		w.TokenHash, w.KeyHash, w.CreatedAt, w.ExpiresAt)
}

func (s *Store) SessionByHash(ctx context.Context, tokenHash []byte, now float64) (store.WebSession, error) {
	w := store.WebSession{TokenHash: tokenHash}
	err := s.r.QueryRowContext(ctx, s.d.rebind(
		`SELECT key_hash, created_at, expires_at FROM web_sessions WHERE token_hash = ? AND expires_at > ?`), tokenHash, now).
		Scan(&w.KeyHash, &w.CreatedAt, &w.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return store.WebSession{}, fmt.Errorf("sqlstore: web session: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.WebSession{}, fmt.Errorf("sqlstore: web session: %w", err)
	}
	return w, nil
}

func (s *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	return s.exec(ctx, "delete web session", `DELETE FROM web_sessions WHERE token_hash = ?`, tokenHash)
}

func (s *Store) DeleteExpiredSessions(ctx context.Context, now float64) (int64, error) {
	res, err := s.w.ExecContext(ctx, s.d.rebind(`DELETE FROM web_sessions WHERE expires_at <= ?`), now)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: delete expired web sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlstore: delete expired web sessions: %w", err)
	}
	return n, nil
}
