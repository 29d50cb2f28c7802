package sqlitebus

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

func tempDBPath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "bus.db")
}

func mustPublisher(t testing.TB, b *Bus) *Publisher {
	t.Helper()
	p, err := b.Publisher()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustSubscriber(t testing.TB, b *Bus, group string) *Subscriber {
	t.Helper()
	s, err := b.Subscriber(group)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustSubscribe(t testing.TB, s message.Subscriber, topic string) <-chan *message.Message {
	t.Helper()
	ch, err := s.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// publishN publishes n messages, one Publish each, and returns their UUIDs
// in order.
func publishN(t testing.TB, p message.Publisher, topic string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = watermill.NewUUID()
		if err := p.Publish(topic, message.NewMessage(ids[i], []byte(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// receive takes the next message or fails the test after timeout.
func receive(t testing.TB, ch <-chan *message.Message, timeout time.Duration) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("channel closed")
		}
		return m
	case <-time.After(timeout):
		t.Fatalf("no message within %s", timeout)
		return nil
	}
}

// receiveAck receives and acks n messages and returns their UUIDs in order.
func receiveAck(t testing.TB, ch <-chan *message.Message, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for range n {
		m := receive(t, ch, 10*time.Second)
		ids = append(ids, m.UUID)
		m.Ack()
	}
	return ids
}

// expectNothing fails if a message arrives within d.
func expectNothing(t testing.TB, ch <-chan *message.Message, d time.Duration) {
	t.Helper()
	select {
	case m, ok := <-ch:
		if ok {
			t.Fatalf("unexpected message %s", m.UUID)
		}
	case <-time.After(d):
	}
}

func equalIDs(t testing.TB, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d: got %s, want %s", i, got[i], want[i])
		}
	}
}

type sqlConnCheck struct {
	conn       interface{ Close() error }
	sync       int
	journal    string
	busy       int
	checkpoint int
}

// checkConn reads the per-connection settings from a fresh pooled
// connection, which it keeps checked out so the next call gets another one.
func checkConn(t testing.TB, db *sql.DB) *sqlConnCheck {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &sqlConnCheck{conn: conn}
	if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&c.sync); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&c.journal); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&c.busy); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&c.checkpoint); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitMoved waits until the mover has put everything in b's journal into the table.
func waitMoved(t testing.TB, b *Bus) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.jr.pmu.Lock()
		left := b.jr.pendingBytes
		b.jr.pmu.Unlock()
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal: %d bytes still unmoved after 10s", left)
		}
		time.Sleep(time.Millisecond)
	}
}
