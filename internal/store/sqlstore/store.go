package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/walcheckpoint"
)

// Store is a store.Store on SQLite or PostgreSQL.
type Store struct {
	d      dialect
	w      *sql.DB // writes (one connection on SQLite)
	r      *sql.DB // reads
	wstmts *stmtCache
	rstmts *stmtCache
	sent   atomic.Int64
	// relayMu keeps this process's relays of the trigger outbox one at a time.
	relayMu sync.Mutex
	// dsn and channel are PostgreSQL's: where to listen for announced changes, and the
	// notification channel of this schema (see changes.go). Empty on SQLite.
	dsn, channel string
	// ckpt checkpoints SQLite's log through ckptDB, its own connection (nil on PostgreSQL).
	ckpt   *walcheckpoint.Checkpointer
	ckptDB *sql.DB
	// trailCounts keeps the totals of trail lists between reads.
	trailCounts *trailCounts
	// trailPages keeps where deep pages of flows' trail lists start.
	trailPages *trailPages
	// scratch lends writes buffers for what a statement takes and the store does not keep.
	scratch bufPool
}

// Statements is how many statements (round trips) the store has sent so far.
func (s *Store) Statements() int64 { return s.sent.Load() }

var _ store.Store = (*Store)(nil)

// Close releases the connections.
func (s *Store) Close() error {
	var err error
	if s.ckpt != nil {
		s.ckpt.Stop()
	}
	if s.ckptDB != nil {
		err = s.ckptDB.Close()
	}
	s.wstmts.close()
	if s.rstmts != s.wstmts {
		s.rstmts.close()
	}
	err = errors.Join(err, s.w.Close())
	if s.r != s.w {
		err = errors.Join(err, s.r.Close())
	}
	return err
}

// Ping reports whether the store answers a read: a round trip on PostgreSQL, a read of the
// database file on SQLite. /ready asks it (through ingest.Pinger).
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, `SELECT 1 FROM orgs LIMIT 1`).Scan(&one); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlstore: ping: %w", err)
	}
	return nil
}

func (s *Store) reader() reads {
	return reads{d: s.d, q: querier{stmts: s.rstmts, count: &s.sent}, counts: s.trailCounts, pages: s.trailPages}
}

// Update runs fn in one transaction.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: begin: %w", err)
	}
	t := &txn{reads: reads{d: s.d, q: querier{stmts: s.wstmts, tx: tx, count: &s.sent}}, channel: s.channel, scratch: &s.scratch}
	committed := false
	// Rolls back when fn fails or panics; a panic must not leave the transaction open, which on
	// SQLite would hold the only writer connection for good.
	defer func() {
		if !committed {
			_ = tx.Rollback()
			for _, f := range t.onRollback {
				f()
			}
		}
	}()
	if err := fn(t); err != nil {
		if isLockTimeout(err) {
			return fmt.Errorf("%w: %w", store.ErrBusy, err)
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: commit: %w", err)
	}
	committed = true
	if t.noticed {
		// Its error is not the transaction's, which committed. The notices stay, read as marks
		// (RunningChanges), and the next expansion, of any transaction, takes them.
		_ = s.expandNotices(ctx)
	}
	for _, f := range t.onCommit {
		f()
	}
	s.wstmts.preparePending(ctx)
	return nil
}

// DirtyTrails lists trails awaiting evaluation.
func (s *Store) DirtyTrails(ctx context.Context) ([]string, error) {
	return s.dirtyTrails(ctx, `SELECT trail_id FROM dirty_trails`)
}

// DirtyTrailsBefore lists trails whose dirt generation is older than generation.
func (s *Store) DirtyTrailsBefore(ctx context.Context, generation int64) ([]string, error) {
	return s.dirtyTrails(ctx, s.d.rebind(`SELECT trail_id FROM dirty_trails WHERE generation < ?`), generation)
}

func (s *Store) dirtyTrails(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: dirty trails: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlstore: dirty trails: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// --- Admin

func (s *Store) exec(ctx context.Context, what, q string, args ...any) error {
	if _, err := s.w.ExecContext(ctx, s.d.rebind(q), args...); err != nil {
		if isUnique(err) {
			return fmt.Errorf("sqlstore: %s: %w", what, store.ErrConflict)
		}
		return fmt.Errorf("sqlstore: %s: %w", what, err)
	}
	return nil
}

func (s *Store) CreateOrg(ctx context.Context, o store.Org) error {
	return s.exec(ctx, "create org", `INSERT INTO orgs (id, name, public, created_at) VALUES (?, ?, ?, ?)`,
		o.ID, o.Name, b2i(o.Public), o.CreatedAt)
}

func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	return s.exec(ctx, "create user", `INSERT INTO users (id, name, display_name, created_at) VALUES (?, ?, ?, ?)`,
		u.ID, u.Name, u.DisplayName, u.CreatedAt)
}

func (s *Store) AddMember(ctx context.Context, userID, orgID string, role store.Role) error {
	return s.exec(ctx, "add member", `INSERT INTO memberships (user_id, org_id, role) VALUES (?, ?, ?)
		ON CONFLICT (user_id, org_id) DO UPDATE SET role = excluded.role`, userID, orgID, string(role))
}

// Reader methods on the Store delegate to the read pool.

func (s *Store) OrgByName(ctx context.Context, name string) (store.Org, error) {
	return s.reader().OrgByName(ctx, name)
}
func (s *Store) OrgByID(ctx context.Context, id string) (store.Org, error) {
	return s.reader().OrgByID(ctx, id)
}
func (s *Store) KeyByHash(ctx context.Context, hash []byte) (store.APIKey, error) {
	return s.reader().KeyByHash(ctx, hash)
}
func (s *Store) UserByID(ctx context.Context, id string) (store.User, error) {
	return s.reader().UserByID(ctx, id)
}
func (s *Store) UserByName(ctx context.Context, name string) (store.User, error) {
	return s.reader().UserByName(ctx, name)
}
func (s *Store) MemberRole(ctx context.Context, userID, orgID string) (store.Role, error) {
	return s.reader().MemberRole(ctx, userID, orgID)
}
func (s *Store) UserOrgs(ctx context.Context, userID string) ([]store.Org, error) {
	return s.reader().UserOrgs(ctx, userID)
}
func (s *Store) FlowByName(ctx context.Context, orgID, name string) (store.Flow, error) {
	return s.reader().FlowByName(ctx, orgID, name)
}
func (s *Store) FlowByID(ctx context.Context, orgID, id string) (store.Flow, error) {
	return s.reader().FlowByID(ctx, orgID, id)
}
func (s *Store) ListFlows(ctx context.Context, orgID string, f store.FlowFilter) ([]store.Flow, int, error) {
	return s.reader().ListFlows(ctx, orgID, f)
}
func (s *Store) Template(ctx context.Context, id string) (string, error) {
	return s.reader().Template(ctx, id)
}
func (s *Store) TrailRef(ctx context.Context, orgID, flowName, trailName string) (store.TrailRef, error) {
	return s.reader().TrailRef(ctx, orgID, flowName, trailName)
}
func (s *Store) TrailID(ctx context.Context, flowID, name string) (string, error) {
	return s.reader().TrailID(ctx, flowID, name)
}
func (s *Store) TrailIDs(ctx context.Context, keys []store.TrailKey) (map[store.TrailKey]string, error) {
	return s.reader().TrailIDs(ctx, keys)
}
func (s *Store) TrailsToEvaluate(ctx context.Context, ids []string) (map[string]store.EvaluationStart, error) {
	return s.reader().TrailsToEvaluate(ctx, ids)
}
func (s *Store) TrailArtifactsByIDs(ctx context.Context, ids []string) (map[string][]store.Artifact, error) {
	return s.reader().TrailArtifactsByIDs(ctx, ids)
}
func (s *Store) TrailToEvaluate(ctx context.Context, id string) (int64, string, error) {
	return s.reader().TrailToEvaluate(ctx, id)
}
func (s *Store) TrailByName(ctx context.Context, flowID, name string) (store.Trail, error) {
	return s.reader().TrailByName(ctx, flowID, name)
}
func (s *Store) TrailByID(ctx context.Context, id string) (store.Trail, error) {
	return s.reader().TrailByID(ctx, id)
}
func (s *Store) ListTrails(ctx context.Context, orgID string, f store.TrailFilter) ([]store.Trail, int, error) {
	return s.reader().ListTrails(ctx, orgID, f)
}
func (s *Store) TrailEvents(ctx context.Context, trailID string) ([]store.TrailEvent, error) {
	return s.reader().TrailEvents(ctx, trailID)
}
func (s *Store) TrailArtifacts(ctx context.Context, trailID string) ([]store.Artifact, error) {
	return s.reader().TrailArtifacts(ctx, trailID)
}
func (s *Store) ArtifactsByPrefix(ctx context.Context, orgID, flowID, prefix string, limit int) ([]store.Artifact, error) {
	return s.reader().ArtifactsByPrefix(ctx, orgID, flowID, prefix, limit)
}
func (s *Store) ArtifactsByCommit(ctx context.Context, orgID, flowID, sha string) ([]store.Artifact, error) {
	return s.reader().ArtifactsByCommit(ctx, orgID, flowID, sha)
}
func (s *Store) ListArtifacts(ctx context.Context, orgID string, f store.ArtifactFilter) ([]store.Artifact, int, error) {
	return s.reader().ListArtifacts(ctx, orgID, f)
}
func (s *Store) TrailAttestations(ctx context.Context, trailID string) ([]store.Attestation, error) {
	return s.reader().TrailAttestations(ctx, trailID)
}
func (s *Store) TrailAttestationFacts(ctx context.Context, trailID string) ([]store.AttestationFact, error) {
	return s.reader().TrailAttestationFacts(ctx, trailID)
}
func (s *Store) AttestationByID(ctx context.Context, orgID, id string) (store.Attestation, error) {
	return s.reader().AttestationByID(ctx, orgID, id)
}
func (s *Store) ListAttestations(ctx context.Context, orgID string, p store.Page) ([]store.Attestation, int, error) {
	return s.reader().ListAttestations(ctx, orgID, p)
}
func (s *Store) Control(ctx context.Context, orgID, identifier string) (store.Control, error) {
	return s.reader().Control(ctx, orgID, identifier)
}
func (s *Store) ListControls(ctx context.Context, orgID string, f store.ControlFilter) ([]store.Control, int, error) {
	return s.reader().ListControls(ctx, orgID, f)
}
func (s *Store) CustomType(ctx context.Context, orgID, name string) (store.CustomType, error) {
	return s.reader().CustomType(ctx, orgID, name)
}
func (s *Store) ListCustomTypes(ctx context.Context, orgID string) ([]store.CustomType, error) {
	return s.reader().ListCustomTypes(ctx, orgID)
}
func (s *Store) DirtyGeneration(ctx context.Context, trailID string) (int64, error) {
	return s.reader().DirtyGeneration(ctx, trailID)
}
func (s *Store) Visible(ctx context.Context, ids []string) (bool, error) {
	return s.reader().Visible(ctx, ids)
}

func (s *Store) PendingEvaluations(ctx context.Context, orgID string) ([]store.DirtyTrail, error) {
	return s.reader().PendingEvaluations(ctx, orgID)
}

func (s *Store) Evaluated(ctx context.Context, generations map[string]int64) (bool, error) {
	return s.reader().Evaluated(ctx, generations)
}

// Environment reads delegate to the read pool too.

func (s *Store) FingerprintEvents(ctx context.Context, orgID, fingerprint string) ([]store.EnvEvent, error) {
	return s.reader().FingerprintEvents(ctx, orgID, fingerprint)
}

func (s *Store) TrailsByIDs(ctx context.Context, ids []string) ([]store.Trail, error) {
	return s.reader().TrailsByIDs(ctx, ids)
}

func (s *Store) EnvironmentByName(ctx context.Context, orgID, name string) (store.Environment, error) {
	return s.reader().EnvironmentByName(ctx, orgID, name)
}

func (s *Store) EnvironmentByID(ctx context.Context, orgID, id string) (store.Environment, error) {
	return s.reader().EnvironmentByID(ctx, orgID, id)
}

func (s *Store) ListEnvironments(ctx context.Context, orgID string, p store.Page) ([]store.Environment, int, error) {
	return s.reader().ListEnvironments(ctx, orgID, p)
}

func (s *Store) LogicalEnvironments(ctx context.Context, envID string) ([]store.Environment, error) {
	return s.reader().LogicalEnvironments(ctx, envID)
}

func (s *Store) LatestSnapshotDigest(ctx context.Context, envID string) (int, []byte, error) {
	return s.reader().LatestSnapshotDigest(ctx, envID)
}
func (s *Store) LatestSnapshot(ctx context.Context, envID string) (store.Snapshot, error) {
	return s.reader().LatestSnapshot(ctx, envID)
}

func (s *Store) SnapshotByIndex(ctx context.Context, envID string, index int) (store.Snapshot, error) {
	return s.reader().SnapshotByIndex(ctx, envID, index)
}

func (s *Store) SnapshotTimestamps(ctx context.Context, envID string) ([]float64, error) {
	return s.reader().SnapshotTimestamps(ctx, envID)
}

func (s *Store) ListSnapshots(ctx context.Context, envID string, fromIndex, toIndex int) ([]store.Snapshot, error) {
	return s.reader().ListSnapshots(ctx, envID, fromIndex, toIndex)
}

func (s *Store) EnvEvents(ctx context.Context, envID string, f store.EventFilter) ([]store.EnvEvent, int, error) {
	return s.reader().EnvEvents(ctx, envID, f)
}

func (s *Store) RunningIn(ctx context.Context, orgID, fingerprint string) ([]store.Running, error) {
	return s.reader().RunningIn(ctx, orgID, fingerprint)
}

func (s *Store) ArtifactsByFingerprints(ctx context.Context, orgID string, fingerprints []string) ([]store.Artifact, error) {
	return s.reader().ArtifactsByFingerprints(ctx, orgID, fingerprints)
}

func (s *Store) Allowlist(ctx context.Context, envID string) ([]store.AllowlistEntry, error) {
	return s.reader().Allowlist(ctx, envID)
}

func (s *Store) SearchArtifacts(ctx context.Context, orgID, prefix string, limit int) ([]store.Artifact, error) {
	return s.reader().SearchArtifacts(ctx, orgID, prefix, limit)
}

// --- helpers

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isUnique(err error) bool {
	msg := err.Error()
	// SQLite: "UNIQUE constraint failed"; PostgreSQL: SQLSTATE 23505.
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "23505")
}

// isLockTimeout reports PostgreSQL's lock_not_available (SQLSTATE 55P03), what a statement of a
// transaction that gives way fails with.
func isLockTimeout(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "55P03"
}

func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlstore: %s: %w", what, store.ErrNotFound)
	}
	return fmt.Errorf("sqlstore: %s: %w", what, err)
}

func nullJSON(b json.RawMessage) string {
	if len(b) == 0 {
		return ""
	}
	return string(b)
}

func placeholders(n int) string {
	if n == 0 {
		return "NULL"
	}
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func pageClause(p store.Page) string {
	if p.PerPage <= 0 {
		return ""
	}
	page := max(p.Page, 1)
	return fmt.Sprintf(" LIMIT %d OFFSET %d", p.PerPage, (page-1)*p.PerPage)
}

// DB is the underlying write pool, for adapters that share the database (the blob store).
func (s *Store) DB() *sql.DB { return s.w }
