package sqlitebus

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Hub is the in-process meeting point of the publishers and subscribers of
// one or more SQLite files. For each file it
//
//   - wakes the subscribers of a topic when a publisher commits to it, so
//     in-process delivery does not wait for a poll;
//   - serialises this process's write transactions: SQLite has one writer at
//     a time, and waiting on a Go mutex is far cheaper than SQLite's busy
//     handler, which sleeps in steps of milliseconds;
//   - passes the delivery slot of a (consumer group, topic) between the
//     subscribers of that group, so they queue in memory instead of racing
//     for the lease row in the database.
//
// Files are told apart by the path SQLite reports for the *sql.DB, so
// publishers and subscribers on different *sql.DB handles of the same file
// cooperate too, as long as they share the Hub. Share one Hub within a
// process; Bus does this for what it creates. Without a shared Hub,
// messages still arrive, by polling. A Hub keeps a small entry for every
// *sql.DB and file it has seen.
type Hub struct {
	mu    sync.Mutex
	dbs   map[*sql.DB]*dbState
	files map[string]*fileState
}

// NewHub returns an empty Hub.
func NewHub() *Hub {
	return &Hub{
		dbs:   make(map[*sql.DB]*dbState),
		files: make(map[string]*fileState),
	}
}

func (h *Hub) state(db *sql.DB) (*dbState, error) {
	h.mu.Lock()
	st, ok := h.dbs[db]
	h.mu.Unlock()
	if ok {
		return st, nil
	}

	// Ask SQLite which file the handle is on, outside the lock.
	var (
		seq        int
		name, file string
	)
	if err := db.QueryRowContext(context.Background(), "PRAGMA database_list").Scan(&seq, &name, &file); err != nil {
		return nil, fmt.Errorf("sqlitebus: identify database file: %w", err)
	}
	path := file
	if file == "" {
		// A temporary or in-memory database is private to its handle.
		file = fmt.Sprintf("private:%p", db)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if st, ok := h.dbs[db]; ok {
		return st, nil
	}
	fs, ok := h.files[file]
	if !ok {
		fs = &fileState{
			path:    path,
			waiters: make(map[string]map[chan struct{}]struct{}),
			slots:   make(map[slotKey]chan struct{}),
		}
		h.files[file] = fs
	}
	st = &dbState{db: db, fileState: fs, pubFull: make(chan struct{}, 1), pubGap: time.Hour}
	h.dbs[db] = st
	return st, nil
}

type slotKey struct{ group, topic string }

// fileState is what the handles on one file share.
type fileState struct {
	path    string // of the database file; empty for a private database
	writeMu sync.Mutex

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	slots   map[slotKey]chan struct{}
}

// dbState is per *sql.DB: prepared statements belong to a handle.
type dbState struct {
	db *sql.DB
	*fileState

	schemaMu    sync.Mutex
	schemaReady bool
	q           statements // set by ready

	// Publish calls waiting for a group commit (see commitPublish).
	pubMu      sync.Mutex
	pubQueue   []*publishReq
	pubLeading bool
	// The leader's linger (see lead): the mean time between Publish calls,
	// when the last one came, and a wake-up for a lingering leader whose
	// group is full.
	pubGap       time.Duration
	pubLast      time.Time
	pubLingering bool
	pubFull      chan struct{}
	pubCommits   atomic.Int64 // group commits so far
	pubCalls     atomic.Int64 // Publish calls they held

	// jr, when set (by Bus before any publisher runs), takes the groups
	// instead of the table (Config.PublishJournal).
	jr *journal
	// lag, when set (by Bus), holds publishers back for a slow consumer (Config.MaxLag).
	lag *lagGate
}

// watch returns a channel that receives a value after each commit to topic
// (coalesced: a pending wake-up is not duplicated) and a function to stop.
func (st *fileState) watch(topic string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	st.mu.Lock()
	set, ok := st.waiters[topic]
	if !ok {
		set = make(map[chan struct{}]struct{})
		st.waiters[topic] = set
	}
	set[ch] = struct{}{}
	st.mu.Unlock()
	return ch, func() {
		st.mu.Lock()
		delete(set, ch)
		if len(set) == 0 {
			delete(st.waiters, topic)
		}
		st.mu.Unlock()
	}
}

func (st *fileState) notify(topic string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for ch := range st.waiters[topic] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// slot returns the one-token semaphore of (group, topic): send to take it,
// receive to give it back. Blocked senders are served in FIFO order.
func (st *fileState) slot(group, topic string) chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	k := slotKey{group, topic}
	ch, ok := st.slots[k]
	if !ok {
		ch = make(chan struct{}, 1)
		st.slots[k] = ch
	}
	return ch
}

// exec runs one write statement under the process write lock. A single
// statement is its own transaction, and SQLite retries its lock with the busy
// handler, so no explicit transaction is needed.
func (st *dbState) exec(query string, args ...any) (sql.Result, error) {
	st.writeMu.Lock()
	defer st.writeMu.Unlock()
	return st.db.ExecContext(context.Background(), query, args...)
}

// execStmt is exec for a prepared statement.
func (st *dbState) execStmt(stmt *sql.Stmt, args ...any) (sql.Result, error) {
	st.writeMu.Lock()
	defer st.writeMu.Unlock()
	return stmt.ExecContext(context.Background(), args...)
}

// probeWrite takes the database's write lock and gives it back at once, under the process
// write lock: whether a write could happen now.
func (st *dbState) probeWrite(ctx context.Context) error {
	st.writeMu.Lock()
	defer st.writeMu.Unlock()
	conn, err := st.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("get connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// tx runs fn in a BEGIN IMMEDIATE transaction under the process write lock.
// IMMEDIATE takes the write lock up front: a deferred transaction that reads
// first and writes later fails with SQLITE_BUSY, without waiting, when another
// process committed in between. The context is deliberately not cancellable:
// an interrupted COMMIT would leave the outcome unknown to the caller.
func (st *dbState) tx(fn func(ctx context.Context, conn *sql.Conn) error) (err error) {
	st.writeMu.Lock()
	defer st.writeMu.Unlock()
	ctx := context.Background()
	conn, err := st.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("get connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			// The error that matters is err; a failed ROLLBACK means SQLite
			// already rolled back.
			_, _ = conn.ExecContext(ctx, "ROLLBACK")
		}
	}()
	if err := fn(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
