package store

import "context"

// WebSession is a browser signed in to the web UI. The store holds hashes only: of the session
// token the browser's cookie carries (a stolen table row cannot be replayed as a cookie) and
// of the API key it signed in with (the same hash api_keys holds), so every page resolves the
// key afresh and a revoked key ends its sessions.
type WebSession struct {
	TokenHash []byte
	KeyHash   []byte
	CreatedAt float64
	ExpiresAt float64
}

// SessionStore keeps the web UI's sessions where every ingest process reads them: a browser
// signed in through one process is signed in on all of them. Ingest writes them directly, as it
// writes keys: a session must work on the very next request, and it is no evidence.
type SessionStore interface {
	CreateSession(ctx context.Context, s WebSession) error
	// SessionByHash is the session whose token hashes to tokenHash, ErrNotFound when there is
	// none or it expired at or before now.
	SessionByHash(ctx context.Context, tokenHash []byte, now float64) (WebSession, error)
	// DeleteSession ends a session; ending one that does not exist is no error.
	DeleteSession(ctx context.Context, tokenHash []byte) error
	// DeleteExpiredSessions removes the sessions expired at or before now and says how many.
	DeleteExpiredSessions(ctx context.Context, now float64) (int64, error)
}
