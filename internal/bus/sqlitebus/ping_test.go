package sqlitebus

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPing: a bus answers Ping while it takes publishes, fails it while another process holds
// its database's write lock (and answers again once it is given back), while its journal is
// broken, and once closed.
func TestPing(t *testing.T) {
	ctx := context.Background()
	path := tempDBPath(t)
	db, err := OpenWith(path, Config{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b, err := New(db, Config{PublishJournal: true, CompactInterval: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("Ping of an open bus: %v", err)
	}

	other, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(ctx); err == nil {
		t.Fatal("Ping passed while another process holds the write lock")
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("Ping once the lock is given back: %v", err)
	}

	b.jr.mu.Lock()
	b.jr.broken = errors.New("truncate: input/output error")
	b.jr.mu.Unlock()
	if err := b.Ping(ctx); err == nil {
		t.Fatal("Ping passed with a broken journal")
	}
	b.jr.mu.Lock()
	b.jr.broken = nil
	b.jr.mu.Unlock()

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ping of a closed bus: %v, want ErrClosed", err)
	}
}
