package walcheckpoint

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// openWAL opens a WAL database whose commits never checkpoint by themselves, so that only the
// Checkpointer can move the log into the database file.
func openWAL(t *testing.T) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	return db, path
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestCheckpointsWhileWritersCommit(t *testing.T) {
	db, path := openWAL(t)
	before := fileSize(t, path)
	c := Start(db, 5*time.Millisecond, func(err error) { t.Errorf("checkpoint: %v", err) })
	defer c.Stop()

	// Commits keep coming while the checkpointer runs beside them: none may fail or wait for it.
	pad := []byte(strings.Repeat("x", 3000))
	for i := range 300 {
		if _, err := db.Exec(`INSERT INTO t (v) VALUES (?)`, pad); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	// A bound for a checkpointer that never catches up, far above what a busy machine takes.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s := c.Stats()
		if s.Log > 0 && s.Backfilled == s.Log {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log was not checkpointed: %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// 300 rows of 3 KB are in the database file itself now, not only in the log.
	if after := fileSize(t, path); after < before+300*3000 {
		t.Errorf("database file %d bytes after the checkpoints, want at least %d", after, before+300*3000)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 300 {
		t.Fatalf("rows = %d, %v; want 300", n, err)
	}
}

// TestSharesAPoolOfOne: the checkpointer borrows a connection per checkpoint, so writers of a
// database limited to one connection keep going while it runs, and Stop ends it.
func TestSharesAPoolOfOne(t *testing.T) {
	db, _ := openWAL(t)
	db.SetMaxOpenConns(1)
	c := Start(db, time.Millisecond, nil)
	// No deadline: a writer kept from the pool's connection would hang, and the test's timeout
	// would say so; a deadline would also fail a writer that a busy machine merely slowed.
	ctx := t.Context()
	for i := range 50 {
		if _, err := db.ExecContext(ctx, `INSERT INTO t (v) VALUES (x'00')`); err != nil {
			t.Fatalf("insert %d beside the checkpointer: %v", i, err)
		}
		time.Sleep(100 * time.Microsecond)
	}
	// On a busy machine the inserts can all be done before the first tick is served: wait for a
	// checkpoint rather than assume one ran meanwhile.
	for c.Stats().Runs == 0 {
		if _, err := db.ExecContext(ctx, `INSERT INTO t (v) VALUES (x'00')`); err != nil {
			t.Fatalf("insert while waiting for a checkpoint: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	c.Stop()
	c.Stop() // idempotent
	s := c.Stats()
	if s.Runs == 0 || s.Errors != 0 {
		t.Errorf("stats %+v: want checkpoints run, none failed", s)
	}
	runs := s.Runs
	time.Sleep(20 * time.Millisecond)
	if after := c.Stats().Runs; after != runs {
		t.Errorf("%d checkpoints ran after Stop", after-runs)
	}
}
