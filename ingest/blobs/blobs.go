// Package blobs keeps attachments (evidence files and templates) content-addressed outside
// the bus: ingest stores the bytes before it publishes, and the message carries only the
// SHA-256. The embedded mode keeps them in a directory; the distributed mode in PostgreSQL,
// which every ingest process can reach.
package blobs

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/veritrail/veritrail/internal/migrate"
)

// ErrNotFound is returned for an unknown digest.
var ErrNotFound = errors.New("blob not found")

// Store is a content-addressed blob store.
type Store interface {
	// Put stores b durably and returns its hex SHA-256.
	Put(ctx context.Context, b []byte) (string, error)
	Get(ctx context.Context, sha string) ([]byte, error)
}

// Digest is the hex SHA-256 of b.
func Digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Dir stores blobs as files named by digest, fsynced before Put returns.
type Dir struct{ root string }

// NewDir creates root if needed.
func NewDir(root string) (*Dir, error) {
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, fmt.Errorf("blobs: create %s: %w", root, err)
	}
	return &Dir{root: root}, nil
}

func (d *Dir) path(sha string) string { return filepath.Join(d.root, sha[:2], sha) }

func (d *Dir) Put(_ context.Context, b []byte) (string, error) {
	sha := Digest(b)
	dst := d.path(sha)
	if _, err := os.Stat(dst); err == nil {
		return sha, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return "", fmt.Errorf("blobs: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(dst), ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("blobs: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", fmt.Errorf("blobs: write %s: %w", sha, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("blobs: sync %s: %w", sha, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("blobs: close %s: %w", sha, err)
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return "", fmt.Errorf("blobs: store %s: %w", sha, err)
	}
	return sha, nil
}

func (d *Dir) Get(_ context.Context, sha string) ([]byte, error) {
	if len(sha) != 64 {
		return nil, ErrNotFound
	}
	b, err := os.ReadFile(d.path(sha))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("blobs: read %s: %w", sha, err)
	}
	return b, nil
}

// SQL stores blobs in a PostgreSQL table.
type SQL struct{ db *sql.DB }

// NewSQL brings the table to this build's version (package migrate, version table
// blobs_migrations). Processes starting together (two evaluators, ingest beside them) take
// turns under an advisory lock per schema; once the table is current, opening only reads.
func NewSQL(ctx context.Context, db *sql.DB) (*SQL, error) {
	if err := migrations().Apply(ctx, db); err != nil {
		return nil, fmt.Errorf("blobs: %w", err)
	}
	return &SQL{db: db}, nil
}

// migrations are the table's versions; a released one is never edited.
func migrations() migrate.Plan {
	return migrate.Plan{
		Postgres: true,
		Table:    "blobs_migrations",
		LockKey:  createLockKey,
		// Builds before versions created the same table: it is version 1 as it is.
		Baseline: func(ctx context.Context, tx migrate.Execer) (bool, error) {
			var exists bool
			err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
				WHERE schemaname = current_schema() AND tablename = 'blobs')`).Scan(&exists)
			return exists, err
		},
		Migrations: []migrate.Migration{
			{Version: 1, Name: "blobs", Up: migrate.Statements(`CREATE TABLE blobs (sha256 TEXT PRIMARY KEY, data BYTEA NOT NULL)`)},
		},
	}
}

// createLockKey is the advisory lock blobs takes to migrate its table, beside the schema's hash
// (the store's migrations use 74657275).
const createLockKey int32 = 74657276

func (s *SQL) Put(ctx context.Context, b []byte) (string, error) {
	sha := Digest(b)
	if _, err := s.db.ExecContext(ctx, `INSERT INTO blobs (sha256, data) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING`, sha, b); err != nil {
		return "", fmt.Errorf("blobs: put %s: %w", sha, err)
	}
	return sha, nil
}

func (s *SQL) Get(ctx context.Context, sha string) ([]byte, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, `SELECT data FROM blobs WHERE sha256 = $1`, sha).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("blobs: get %s: %w", sha, err)
	}
	return b, nil
}
