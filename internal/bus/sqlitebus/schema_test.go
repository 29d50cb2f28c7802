package sqlitebus

import (
	"context"
	"testing"
	"time"
)

// TestSchemaFromBeforeVersions: a bus database made before versioned migrations (the same
// tables, no version table) is recorded at version 1 and its messages are still delivered.
func TestSchemaFromBeforeVersions(t *testing.T) {
	path := tempDBPath(t)
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range schema {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO sqlitebus_messages (topic, uuid, payload, metadata, created_at)
		VALUES ('t', 'u-old', X'6f6c64', '{}', 1)`); err != nil {
		t.Fatal(err)
	}
	b, err := New(db, Config{CompactInterval: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if v, err := migrations().Version(context.Background(), db); err != nil || v != 1 {
		t.Fatalf("version = %d, %v; want 1", v, err)
	}
	msgs := mustSubscribe(t, mustSubscriber(t, b, "g"), "t")
	m := receive(t, msgs, time.Minute)
	if m.UUID != "u-old" || string(m.Payload) != "old" {
		t.Fatalf("message = %s %q, want u-old \"old\"", m.UUID, m.Payload)
	}
	m.Ack()
}
