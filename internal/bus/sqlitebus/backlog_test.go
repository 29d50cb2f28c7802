package sqlitebus

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// unacked lists what Unacked reports, once each, in order, with each message's "k" metadata.
func unacked(t *testing.T, b *Bus, group, topic string) (ids []string, k map[string]string) {
	t.Helper()
	k = map[string]string{}
	err := b.Unacked(context.Background(), group, topic, func(uuid string, md message.Metadata) error {
		if slices.Contains(ids, uuid) {
			t.Errorf("message %s reported twice", uuid)
		}
		ids = append(ids, uuid)
		k[uuid] = md.Get("k")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, k
}

// TestUnacked: the backlog of a consumer group is what it has not acked, wherever it is: in the
// table, or in a journal left by a crash and not moved yet.
func TestUnacked(t *testing.T) {
	path := tempDBPath(t)
	// A crash left two records in the journal, unmoved.
	writeJournal(t, path+journalSuffix, 1, nil, journalReq("evidence", "a", "b"), journalReq("other", "c"))
	b := journalBus(t, path)
	ids, k := unacked(t, b, "g", "evidence") // the mover may or may not have moved them yet
	equalIDs(t, ids, []string{"a", "b"})
	if k["a"] != "a" || k["b"] != "b" {
		t.Fatalf("metadata: %v", k)
	}

	pub := mustPublisher(t, b)
	for _, id := range []string{"d", "e"} {
		m := message.NewMessage(id, nil)
		m.Metadata.Set("k", id)
		if err := pub.Publish("evidence", m); err != nil {
			t.Fatal(err)
		}
	}
	ch := mustSubscribe(t, mustSubscriber(t, b, "g"), "evidence")
	equalIDs(t, receiveAck(t, ch, 2), []string{"a", "b"})
	waitAcked(t, b, "g", "evidence", 2)
	ids, k = unacked(t, b, "g", "evidence")
	equalIDs(t, ids, []string{"d", "e"})
	if k["d"] != "d" {
		t.Fatalf("metadata: %v", k)
	}
	ids, _ = unacked(t, b, "never-subscribed", "evidence")
	equalIDs(t, ids, []string{"a", "b", "d", "e"})
	ids, _ = unacked(t, b, "g", "other")
	equalIDs(t, ids, []string{"c"})
}

// waitAcked waits until group's acked offset on topic covers n messages of the table.
func waitAcked(t *testing.T, b *Bus, group, topic string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var acked int
		err := b.db.QueryRow(`SELECT COUNT(*) FROM sqlitebus_messages m JOIN sqlitebus_offsets o
			ON o.topic = m.topic AND o.consumer_group = ? WHERE m.topic = ? AND m."offset" <= o.acked_offset`, group, topic).Scan(&acked)
		if err == nil && acked >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s acked %d of %s (%v), want %d", group, acked, topic, err, n)
		}
		time.Sleep(time.Millisecond)
	}
}
