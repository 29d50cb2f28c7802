package walcheckpoint

import (
	"context"
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
	c, err := Start(db, 5*time.Millisecond, func(err error) { t.Errorf("checkpoint: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	// Commits keep coming while the checkpointer runs beside them: none may fail or wait for it.
	pad := []byte(strings.Repeat("x", 3000))
	for i := range 300 {
		if _, err := db.Exec(`INSERT INTO t (v) VALUES (?)`, pad); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
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

func TestStopReleasesTheConnection(t *testing.T) {
	db, _ := openWAL(t)
	db.SetMaxOpenConns(1)
	c, err := Start(db, time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	c.Stop()
	c.Stop() // idempotent
	if c.Stats().Runs == 0 {
		t.Error("no checkpoint ran before Stop")
	}
	// With one connection allowed, this only succeeds if Stop gave the checkpointer's back.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, `INSERT INTO t (v) VALUES (x'00')`); err != nil {
		t.Fatalf("insert after Stop: %v", err)
	}
}
