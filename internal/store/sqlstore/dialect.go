// Package sqlstore implements store.Store on database/sql for SQLite (modernc.org/sqlite, the
// embedded mode) and PostgreSQL (pgx, the distributed mode). The two differ only in DDL and
// placeholders, so one implementation with a small dialect keeps them from drifting apart.
package sqlstore

import (
	"slices"
	"strconv"
	"strings"
)

type dialect struct {
	name     string
	numbered bool   // $1, $2 ... instead of ?
	serial   string // auto-increment primary key column type
	blob     string
}

var (
	sqliteDialect   = dialect{name: "sqlite", serial: "INTEGER PRIMARY KEY AUTOINCREMENT", blob: "BLOB"}
	postgresDialect = dialect{name: "postgres", numbered: true, serial: "BIGSERIAL PRIMARY KEY", blob: "BYTEA"}
)

// rebind turns ? placeholders into the dialect's form. Queries in this package never contain
// a literal question mark.
func (d dialect) rebind(q string) string {
	if !d.numbered {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (d dialect) schema() []string {
	r := strings.NewReplacer("{{serial}}", d.serial, "{{blob}}", d.blob)
	all := slices.Concat(schemaStatements, policyStatements)
	out := make([]string, len(all))
	for i, s := range all {
		out[i] = r.Replace(s)
	}
	return out
}

// schemaStatements create the tables if missing. Booleans are INTEGER 0/1 and JSON is TEXT in
// both dialects so that scanning code is shared.
var schemaStatements = []string{
	`CREATE TABLE IF NOT EXISTS orgs (
		id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, public INTEGER NOT NULL DEFAULT 0, created_at DOUBLE PRECISION NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS users (
		id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, display_name TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS memberships (
		user_id TEXT NOT NULL, org_id TEXT NOT NULL, role TEXT NOT NULL, PRIMARY KEY (user_id, org_id))`,
	`CREATE TABLE IF NOT EXISTS api_keys (
		id TEXT PRIMARY KEY, hash {{blob}} NOT NULL UNIQUE, org_id TEXT NOT NULL DEFAULT '', user_id TEXT NOT NULL DEFAULT '',
		name TEXT NOT NULL, role TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, expires_at DOUBLE PRECISION NOT NULL DEFAULT 0,
		revoked INTEGER NOT NULL DEFAULT 0, service_account_id TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '')`,
	`CREATE TABLE IF NOT EXISTS service_accounts (
		id TEXT PRIMARY KEY, org_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL, privilege TEXT NOT NULL,
		created_by TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, last_modified_at DOUBLE PRECISION NOT NULL,
		UNIQUE (org_id, name))`,
	`CREATE TABLE IF NOT EXISTS audit_log (
		seq {{serial}}, id TEXT NOT NULL UNIQUE, org_id TEXT NOT NULL, key_id TEXT NOT NULL, actor TEXT NOT NULL,
		operation TEXT NOT NULL, target TEXT NOT NULL, outcome TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS audit_log_org ON audit_log (org_id, at)`,
	`CREATE TABLE IF NOT EXISTS templates (id TEXT PRIMARY KEY, content TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS flows (
		id TEXT PRIMARY KEY, org_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL, visibility TEXT NOT NULL,
		template_id TEXT NOT NULL, tags TEXT NOT NULL, repo_url TEXT NOT NULL DEFAULT '', archived INTEGER NOT NULL DEFAULT 0,
		created_at DOUBLE PRECISION NOT NULL, last_modified_at DOUBLE PRECISION NOT NULL, UNIQUE (org_id, name))`,
	`CREATE TABLE IF NOT EXISTS trails (
		id TEXT PRIMARY KEY, org_id TEXT NOT NULL, flow_id TEXT NOT NULL, name TEXT NOT NULL, doc TEXT NOT NULL,
		template_id TEXT NOT NULL, created_by TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
		last_modified_at DOUBLE PRECISION NOT NULL, state TEXT NOT NULL, compliance TEXT NOT NULL,
		evaluated_at DOUBLE PRECISION NOT NULL DEFAULT 0, UNIQUE (flow_id, name))`,
	`CREATE INDEX IF NOT EXISTS trails_org ON trails (org_id, created_at)`,
	`CREATE TABLE IF NOT EXISTS artifacts (
		seq {{serial}}, id TEXT NOT NULL UNIQUE, org_id TEXT NOT NULL, flow_id TEXT NOT NULL, trail_id TEXT NOT NULL,
		fingerprint TEXT NOT NULL, template_name TEXT NOT NULL, filename TEXT NOT NULL, git_commit TEXT NOT NULL,
		repo_name TEXT NOT NULL, report TEXT NOT NULL, reported_by TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
		state TEXT NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS artifacts_fp ON artifacts (org_id, fingerprint)`,
	`CREATE INDEX IF NOT EXISTS artifacts_commit ON artifacts (org_id, git_commit)`,
	`CREATE INDEX IF NOT EXISTS artifacts_trail ON artifacts (trail_id)`,
	`CREATE TABLE IF NOT EXISTS attestations (
		seq {{serial}}, id TEXT NOT NULL UNIQUE, org_id TEXT NOT NULL, flow_id TEXT NOT NULL, trail_id TEXT NOT NULL,
		name TEXT NOT NULL, type TEXT NOT NULL, is_compliant INTEGER NOT NULL, artifact_fingerprint TEXT NOT NULL,
		target_artifact TEXT NOT NULL, overrides_id TEXT NOT NULL, override_reason TEXT NOT NULL,
		evidence_sha256 TEXT NOT NULL, evidence_name TEXT NOT NULL, data TEXT NOT NULL, reported_by TEXT NOT NULL,
		created_at DOUBLE PRECISION NOT NULL)`,
	// Covers TrailAttestationFacts, which every trail evaluation runs: a trail's rows lie scattered
	// through the table, and reading them from the index alone saves a table lookup per row.
	`CREATE INDEX IF NOT EXISTS attestations_trail_facts ON attestations (trail_id, seq, id, name, type, is_compliant,
		artifact_fingerprint, target_artifact, overrides_id, created_at)`,
	`DROP INDEX IF EXISTS attestations_trail`,
	`CREATE INDEX IF NOT EXISTS attestations_org ON attestations (org_id, seq)`,
	`CREATE TABLE IF NOT EXISTS trail_events (
		seq {{serial}}, trail_id TEXT NOT NULL, doc TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS trail_events_trail ON trail_events (trail_id, seq)`,
	`CREATE TABLE IF NOT EXISTS custom_types (
		org_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL, archived INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (org_id, name))`,
	`CREATE TABLE IF NOT EXISTS custom_type_versions (
		org_id TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL, schema_json TEXT NOT NULL, rules TEXT NOT NULL,
		created_by TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (org_id, name, version))`,
	`CREATE TABLE IF NOT EXISTS controls (
		org_id TEXT NOT NULL, identifier TEXT NOT NULL, archived INTEGER NOT NULL DEFAULT 0, tags TEXT NOT NULL DEFAULT '{}',
		PRIMARY KEY (org_id, identifier))`,
	`CREATE TABLE IF NOT EXISTS control_versions (
		org_id TEXT NOT NULL, identifier TEXT NOT NULL, version INTEGER NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL,
		created_by TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (org_id, identifier, version))`,
	`CREATE TABLE IF NOT EXISTS environments (
		id TEXT PRIMARY KEY, org_id TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL, description TEXT NOT NULL,
		include_scaling INTEGER NOT NULL, require_provenance INTEGER NOT NULL, included TEXT NOT NULL, tags TEXT NOT NULL,
		archived INTEGER NOT NULL DEFAULT 0, created_at DOUBLE PRECISION NOT NULL, last_modified_at DOUBLE PRECISION NOT NULL,
		last_reported_at DOUBLE PRECISION NOT NULL DEFAULT 0, last_changed_at DOUBLE PRECISION NOT NULL DEFAULT 0,
		state INTEGER, UNIQUE (org_id, name))`,
	`CREATE TABLE IF NOT EXISTS env_members (logical_id TEXT NOT NULL, physical_id TEXT NOT NULL, PRIMARY KEY (logical_id, physical_id))`,
	`CREATE INDEX IF NOT EXISTS env_members_physical ON env_members (physical_id)`,
	`CREATE TABLE IF NOT EXISTS snapshots (
		env_id TEXT NOT NULL, idx INTEGER NOT NULL, timestamp DOUBLE PRECISION NOT NULL, type TEXT NOT NULL,
		compliant INTEGER, artifacts TEXT NOT NULL, PRIMARY KEY (env_id, idx))`,
	`CREATE TABLE IF NOT EXISTS snapshot_digests (env_id TEXT PRIMARY KEY, idx INTEGER NOT NULL, digest {{blob}})`,
	`CREATE TABLE IF NOT EXISTS env_events (
		seq {{serial}}, env_id TEXT NOT NULL, snapshot_index INTEGER NOT NULL, type TEXT NOT NULL, artifact_name TEXT NOT NULL,
		fingerprint TEXT NOT NULL, description TEXT NOT NULL, reported_at DOUBLE PRECISION NOT NULL, repo_names TEXT NOT NULL,
		doc TEXT NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS env_events_env ON env_events (env_id, seq)`,
	`CREATE INDEX IF NOT EXISTS env_events_fp ON env_events (fingerprint)`,
	`CREATE TABLE IF NOT EXISTS env_running (
		env_id TEXT NOT NULL, org_id TEXT NOT NULL, fingerprint TEXT NOT NULL, name TEXT NOT NULL,
		since DOUBLE PRECISION NOT NULL, PRIMARY KEY (env_id, fingerprint, name))`,
	`CREATE INDEX IF NOT EXISTS env_running_fp ON env_running (org_id, fingerprint)`,
	`CREATE TABLE IF NOT EXISTS allowlist (
		id TEXT PRIMARY KEY, env_id TEXT NOT NULL, fingerprint TEXT NOT NULL, artifact_name TEXT NOT NULL,
		description TEXT NOT NULL, allowed_by TEXT NOT NULL, timestamp DOUBLE PRECISION NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS allowlist_env ON allowlist (env_id)`,
	`CREATE TABLE IF NOT EXISTS approvals (
		id TEXT PRIMARY KEY, org_id TEXT NOT NULL, flow_id TEXT NOT NULL, number INTEGER NOT NULL, state TEXT NOT NULL,
		created_at DOUBLE PRECISION NOT NULL, doc TEXT NOT NULL, UNIQUE (flow_id, number))`,
	// generation is the trail's dirt generation right after the message was applied (0: it
	// touched no trail, or was applied by a build that did not record it): the message is
	// visible once an evaluation of that generation or a later one is saved.
	`CREATE TABLE IF NOT EXISTS applied_messages (
		id TEXT PRIMARY KEY, trail_id TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL, generation BIGINT NOT NULL DEFAULT 0)`,
	// evaluated is the latest generation whose evaluation was saved while the trail was dirtied
	// again meanwhile (the row outlived it), so that a reader waits for one evaluation, not for
	// a trail that a steady stream of writes never lets become clean.
	`CREATE TABLE IF NOT EXISTS dirty_trails (trail_id TEXT PRIMARY KEY, generation BIGINT NOT NULL,
		evaluated BIGINT NOT NULL DEFAULT 0)`,
	// Read after write across ingest processes (the distributed mode): how far the evaluator has
	// applied each partition of a bus topic (the next offset), and the ingest processes with
	// writes of an organization in flight, each until a lease time it renews.
	`CREATE TABLE IF NOT EXISTS bus_positions (
		topic TEXT NOT NULL, part INTEGER NOT NULL, next_offset BIGINT NOT NULL, PRIMARY KEY (topic, part))`,
	`CREATE TABLE IF NOT EXISTS writes_in_flight (
		org_id TEXT NOT NULL, process TEXT NOT NULL, until DOUBLE PRECISION NOT NULL, PRIMARY KEY (org_id, process))`,
	`CREATE INDEX IF NOT EXISTS writes_in_flight_process ON writes_in_flight (process)`,
	// Notification rules: numbers count up per organization; deleted rules keep theirs.
	`CREATE TABLE IF NOT EXISTS notification_rules (
		id TEXT PRIMARY KEY, org_id TEXT NOT NULL, number BIGINT NOT NULL, name TEXT NOT NULL, environments TEXT NOT NULL,
		triggers TEXT NOT NULL, targets TEXT NOT NULL, created_by TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
		last_modified_at DOUBLE PRECISION NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, UNIQUE (org_id, number))`,
	// The trigger outbox: written with the change a trigger derives from, relayed to the bus.
	`CREATE TABLE IF NOT EXISTS trigger_outbox (
		seq {{serial}}, id TEXT NOT NULL UNIQUE, org_id TEXT NOT NULL, env_id TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,
		payload TEXT NOT NULL, sent_at DOUBLE PRECISION NOT NULL DEFAULT 0)`,
	`CREATE INDEX IF NOT EXISTS trigger_outbox_pending ON trigger_outbox (sent_at, seq)`,
	// The notify tier's delivery log, keyed by (organization, rule, target, event): it
	// deduplicates deliveries and keeps dead letters. Times are Unix nanoseconds, 0 for never.
	`CREATE TABLE IF NOT EXISTS notify_deliveries (
		org TEXT NOT NULL, rule BIGINT NOT NULL, target TEXT NOT NULL, event TEXT NOT NULL, notifier TEXT NOT NULL,
		payload TEXT NOT NULL, state INTEGER NOT NULL, lease_until BIGINT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
		settled_at BIGINT NOT NULL DEFAULT 0, failed_at BIGINT NOT NULL DEFAULT 0, retryable INTEGER NOT NULL DEFAULT 0,
		reason TEXT NOT NULL DEFAULT '', message TEXT NOT NULL DEFAULT '', exhausted INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (org, rule, target, event))`,
	`CREATE INDEX IF NOT EXISTS notify_dead_letters ON notify_deliveries (org, state, failed_at)`,
	`CREATE TABLE IF NOT EXISTS notify_outcomes (
		org TEXT NOT NULL, rule BIGINT NOT NULL, target TEXT NOT NULL, last_success_at BIGINT NOT NULL DEFAULT 0,
		last_failure_at BIGINT NOT NULL DEFAULT 0, last_failure_reason TEXT NOT NULL DEFAULT '',
		last_failure_message TEXT NOT NULL DEFAULT '', PRIMARY KEY (org, rule, target))`,
	// Rejected messages (dead letters of the evidence topic), written in the transaction that
	// marks the message applied; the payload is kept as it came, for replays.
	`CREATE TABLE IF NOT EXISTS rejected_messages (
		seq {{serial}}, id TEXT NOT NULL UNIQUE, org_id TEXT NOT NULL, kind TEXT NOT NULL, partition_key TEXT NOT NULL,
		payload {{blob}} NOT NULL, reason TEXT NOT NULL, class TEXT NOT NULL, rejected_at DOUBLE PRECISION NOT NULL,
		state TEXT NOT NULL, requested_at DOUBLE PRECISION NOT NULL DEFAULT 0, replayed_at DOUBLE PRECISION NOT NULL DEFAULT 0)`,
	`CREATE INDEX IF NOT EXISTS rejected_messages_org ON rejected_messages (org_id, seq)`,
	`CREATE INDEX IF NOT EXISTS rejected_messages_state ON rejected_messages (state, seq)`,
}
