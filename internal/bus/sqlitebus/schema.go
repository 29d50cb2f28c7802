package sqlitebus

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/veritrail/veritrail/internal/migrate"
)

// migrations are the bus's schema versions (package migrate), recorded in
// sqlitebus_migrations. A released one is never edited. Version 1 is the
// schema of the builds before versions; its statements create only what is
// missing, so on a database those builds made it records the version and
// completes the tables of an older one.
func migrations() migrate.Plan {
	return migrate.Plan{
		Table: "sqlitebus_migrations",
		Migrations: []migrate.Migration{
			{Version: 1, Name: "messages, offsets, journal", Up: migrate.Statements(schema...)},
		},
	}
}

// schema is version 1. The offset column is AUTOINCREMENT so that SQLite
// never reuses an offset, even after Compact deleted the newest rows: consumer
// groups store offsets, and a reused one would be skipped as already acked.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS sqlitebus_messages (
		"offset"   INTEGER PRIMARY KEY AUTOINCREMENT,
		topic      TEXT    NOT NULL,
		uuid       TEXT    NOT NULL,
		payload    BLOB    NOT NULL,
		metadata   TEXT    NOT NULL,
		created_at INTEGER NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS sqlitebus_messages_topic_offset
		ON sqlitebus_messages (topic, "offset")`,
	// acked_offset is the offset of the last acked message of the group
	// (0: none). lease_owner/lease_until claim the in-flight message.
	`CREATE TABLE IF NOT EXISTS sqlitebus_offsets (
		consumer_group TEXT    NOT NULL,
		topic          TEXT    NOT NULL,
		acked_offset   INTEGER NOT NULL DEFAULT 0,
		lease_owner    TEXT,
		lease_until    INTEGER,
		updated_at     INTEGER NOT NULL,
		PRIMARY KEY (consumer_group, topic)
	) WITHOUT ROWID`,
	// How far the publish journal (Config.PublishJournal) has been moved
	// into sqlitebus_messages; see journal.go.
	`CREATE TABLE IF NOT EXISTS sqlitebus_journal (
		id    INTEGER PRIMARY KEY CHECK (id = 1),
		epoch INTEGER NOT NULL,
		moved INTEGER NOT NULL
	)`,
}

// statements are the hot queries, prepared once per database and Hub:
// preparing costs about as much as executing these small statements. A
// *sql.Stmt is re-prepared by database/sql on each pooled connection it
// meets and is released when the *sql.DB is closed.
type statements struct {
	insert  *sql.Stmt // topic, uuid, payload, metadata, created_at
	fetch   *sql.Stmt // topic, after offset; independentBatch rows
	next    *sql.Stmt // consumer_group, topic -> offset row and next message
	claim   *sql.Stmt
	ack     *sql.Stmt
	renew   *sql.Stmt
	release *sql.Stmt
	journal *sql.Stmt // epoch, moved
}

func (q *statements) list() []struct {
	dst   **sql.Stmt
	query string
} {
	return []struct {
		dst   **sql.Stmt
		query string
	}{
		{&q.insert, `INSERT INTO sqlitebus_messages (topic, uuid, payload, metadata, created_at)
			VALUES (?, ?, ?, ?, ?)`},
		{&q.journal, `INSERT INTO sqlitebus_journal (id, epoch, moved) VALUES (1, ?1, ?2)
			ON CONFLICT (id) DO UPDATE SET epoch = ?1, moved = ?2`},
		// The LIMIT is a literal: SQLite recompiles a statement whenever a
		// parameter used as LIMIT is bound again.
		{&q.fetch, `SELECT "offset", uuid, payload, metadata FROM sqlitebus_messages
			WHERE topic = ? AND "offset" > ? ORDER BY "offset" LIMIT ` + strconv.Itoa(independentBatch)},
		// One round trip for the group's state and its next message; the
		// MIN is answered from the (topic, offset) index.
		{&q.next, `SELECT o.acked_offset, o.lease_owner, o.lease_until,
				m."offset", m.uuid, m.payload, m.metadata
			FROM sqlitebus_offsets o
			LEFT JOIN sqlitebus_messages m ON m."offset" = (
				SELECT MIN(n."offset") FROM sqlitebus_messages n
				WHERE n.topic = o.topic AND n."offset" > o.acked_offset)
			WHERE o.consumer_group = ? AND o.topic = ?`},
		// Compare-and-swap: the claim holds only if nobody acked or took
		// a valid lease since the row was read.
		{&q.claim, `UPDATE sqlitebus_offsets SET lease_owner = ?1, lease_until = ?2, updated_at = ?3
			WHERE consumer_group = ?4 AND topic = ?5 AND acked_offset = ?6
			AND (lease_owner IS NULL OR lease_owner = ?1 OR lease_until < ?3)`},
		{&q.ack, `UPDATE sqlitebus_offsets
			SET acked_offset = ?1, lease_owner = NULL, lease_until = NULL, updated_at = ?2
			WHERE consumer_group = ?3 AND topic = ?4 AND lease_owner = ?5`},
		{&q.renew, `UPDATE sqlitebus_offsets SET lease_until = ?1, updated_at = ?2
			WHERE consumer_group = ?3 AND topic = ?4 AND lease_owner = ?5`},
		{&q.release, `UPDATE sqlitebus_offsets SET lease_owner = NULL, lease_until = NULL
			WHERE consumer_group = ?1 AND topic = ?2 AND lease_owner = ?3`},
	}
}

// ready migrates the schema and prepares the statements, once per database
// and Hub. Processes that race here take turns on SQLite's write lock; a
// database already at the latest version is only read.
func (st *dbState) ready() error {
	st.schemaMu.Lock()
	defer st.schemaMu.Unlock()
	if st.schemaReady {
		return nil
	}
	st.writeMu.Lock() // the bus's writers of this process go one at a time
	err := migrations().Apply(context.Background(), st.db)
	st.writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("sqlitebus: migrate: %w", err)
	}
	var q statements
	list := q.list()
	for i, s := range list {
		stmt, err := st.db.Prepare(s.query)
		if err != nil {
			for _, prepared := range list[:i] {
				_ = (*prepared.dst).Close()
			}
			return fmt.Errorf("sqlitebus: prepare %q: %w", s.query, err)
		}
		*s.dst = stmt
	}
	st.q = q
	st.schemaReady = true
	return nil
}
