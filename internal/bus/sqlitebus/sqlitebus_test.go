package sqlitebus

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

func TestOpenSettings(t *testing.T) {
	for _, tc := range []struct {
		sync Synchronous
		want int
	}{{"", 1}, {SynchronousNormal, 1}, {SynchronousFull, 2}} {
		db, err := OpenWith(tempDBPath(t), Config{Synchronous: tc.sync, BusyTimeout: 1234 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		// Several connections, because the settings must hold on each.
		conns := make([]*sqlConnCheck, 3)
		for i := range conns {
			conns[i] = checkConn(t, db)
		}
		for _, c := range conns {
			if c.sync != tc.want || c.journal != "wal" || c.busy != 1234 || c.checkpoint != 8192 {
				t.Errorf("synchronous %q: got synchronous=%d journal_mode=%s busy_timeout=%d wal_autocheckpoint=%d",
					tc.sync, c.sync, c.journal, c.busy, c.checkpoint)
			}
			_ = c.conn.Close()
		}
		_ = db.Close()
	}

	if _, err := OpenWith(tempDBPath(t), Config{Synchronous: "OFF"}); err == nil {
		t.Error("synchronous=OFF accepted")
	}
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro"} {
		if _, err := Open(p); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
}

func TestPublishBatchIsAtomicAndOrdered(t *testing.T) {
	b := newTestBus(t, tempDBPath(t))
	pub := mustPublisher(t, b)
	msgs := []*message.Message{
		message.NewMessage(watermill.NewUUID(), []byte("a")),
		message.NewMessage(watermill.NewUUID(), nil),
		message.NewMessage(watermill.NewUUID(), []byte("c")),
	}
	msgs[0].Metadata.Set("k", "v")
	if err := pub.Publish("t", msgs...); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("", message.NewMessage(watermill.NewUUID(), nil)); err == nil {
		t.Fatal("empty topic accepted")
	}

	// A batch whose last insert fails leaves nothing behind.
	if _, err := b.db.Exec(`CREATE TRIGGER poison BEFORE INSERT ON sqlitebus_messages
		WHEN NEW.uuid = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned'); END`); err != nil {
		t.Fatal(err)
	}
	err := pub.Publish("t", message.NewMessage(watermill.NewUUID(), []byte("lost")), message.NewMessage("poison", nil))
	if err == nil {
		t.Fatal("poisoned batch published")
	}
	var count int
	if err := b.db.QueryRow(`SELECT COUNT(*) FROM sqlitebus_messages`).Scan(&count); err != nil || count != len(msgs) {
		t.Fatalf("%d messages stored (err %v), want %d", count, err, len(msgs))
	}

	ch := mustSubscribe(t, mustSubscriber(t, b, ""), "t")
	for i, want := range msgs {
		got := receive(t, ch, 5*time.Second)
		if got.UUID != want.UUID || string(got.Payload) != string(want.Payload) {
			t.Fatalf("message %d: got %s %q, want %s %q", i, got.UUID, got.Payload, want.UUID, want.Payload)
		}
		if got.Metadata.Get("k") != want.Metadata.Get("k") {
			t.Fatalf("message %d: metadata %v, want %v", i, got.Metadata, want.Metadata)
		}
		got.Ack()
	}
}

// TestLargePublishKeepsOrder: one call with many messages stores them all in order, and a
// failure at its last message leaves none of them behind.
func TestLargePublishKeepsOrder(t *testing.T) {
	b := newTestBus(t, tempDBPath(t))
	pub := mustPublisher(t, b)
	n := 35
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(fmt.Sprintf("m%03d", i), []byte(fmt.Sprint(i)))
	}
	if err := pub.Publish("t", msgs...); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Exec(`CREATE TRIGGER poison BEFORE INSERT ON sqlitebus_messages
		WHEN NEW.uuid = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned'); END`); err != nil {
		t.Fatal(err)
	}
	poisoned := make([]*message.Message, n)
	for i := range poisoned {
		poisoned[i] = message.NewMessage(fmt.Sprintf("p%03d", i), nil)
	}
	poisoned[n-1] = message.NewMessage("poison", nil)
	if err := pub.Publish("t", poisoned...); err == nil {
		t.Fatal("a batch with a poisoned last message was published")
	}
	got := storedIDs(t, b)
	if len(got) != n {
		t.Fatalf("%d messages stored, want %d", len(got), n)
	}
	for i, id := range got {
		if id != msgs[i].UUID {
			t.Fatalf("message at offset %d is %s, want %s", i, id, msgs[i].UUID)
		}
	}
}

func TestConsumerGroupResumesAfterLastAck(t *testing.T) {
	path := tempDBPath(t)
	b := newTestBus(t, path)
	ids := publishN(t, mustPublisher(t, b), "evidence", 10)

	sub1 := mustSubscriber(t, b, "evaluate")
	ch := mustSubscribe(t, sub1, "evidence")
	equalIDs(t, receiveAck(t, ch, 4), ids[:4])
	inFlight := receive(t, ch, 5*time.Second) // never acked
	if inFlight.UUID != ids[4] {
		t.Fatalf("got %s, want %s", inFlight.UUID, ids[4])
	}
	if err := sub1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch; ok {
		t.Fatal("channel still open after Close")
	}

	// A new process: a new *sql.DB and Bus on the same file.
	b2 := newTestBus(t, path)
	ch2 := mustSubscribe(t, mustSubscriber(t, b2, "evaluate"), "evidence")
	equalIDs(t, receiveAck(t, ch2, 6), ids[4:])
	expectNothing(t, ch2, 50*time.Millisecond)

	// Another group is independent of "evaluate" and starts at the oldest.
	ch3 := mustSubscribe(t, mustSubscriber(t, b2, "notify"), "evidence")
	equalIDs(t, receiveAck(t, ch3, 10), ids)
}

func TestNackRedeliversSameMessage(t *testing.T) {
	for _, group := range []string{"", "g"} {
		t.Run("group="+group, func(t *testing.T) {
			b := newTestBus(t, tempDBPath(t))
			ids := publishN(t, mustPublisher(t, b), "t", 2)
			ch := mustSubscribe(t, mustSubscriber(t, b, group), "t")
			for range 3 {
				m := receive(t, ch, 5*time.Second)
				if m.UUID != ids[0] {
					t.Fatalf("got %s, want %s", m.UUID, ids[0])
				}
				m.Nack()
				select {
				case <-m.Context().Done():
				case <-time.After(time.Second):
					t.Fatal("message context not cancelled after Nack")
				}
			}
			equalIDs(t, receiveAck(t, ch, 2), ids)
		})
	}
}

func TestNoSecondMessageBeforeAck(t *testing.T) {
	for _, crossProcess := range []bool{false, true} {
		name := "same-bus"
		if crossProcess {
			name = "separate-buses"
		}
		t.Run(name, func(t *testing.T) {
			path := tempDBPath(t)
			b1 := newTestBus(t, path)
			b2 := b1
			if crossProcess {
				b2 = newTestBus(t, path)
			}
			ids := publishN(t, mustPublisher(t, b1), "t", 3)
			// Two subscribers of one group: while message 1 is in flight at
			// the first, the second gets nothing, neither message 1 nor 2.
			sub1 := mustSubscriber(t, b1, "g")
			ch1 := mustSubscribe(t, sub1, "t")
			m := receive(t, ch1, 5*time.Second)
			ch2 := mustSubscribe(t, mustSubscriber(t, b2, "g"), "t")
			expectNothing(t, ch1, 150*time.Millisecond)
			expectNothing(t, ch2, 150*time.Millisecond)
			m.Ack()
			var next *message.Message
			fromFirst := false
			select {
			case next = <-ch1:
				fromFirst = true
			case next = <-ch2:
			case <-time.After(5 * time.Second):
				t.Fatal("no delivery after Ack")
			}
			if m.UUID != ids[0] || next.UUID != ids[1] {
				t.Fatalf("got %s then %s, want %v", m.UUID, next.UUID, ids)
			}
			// Closing the first subscriber hands an unacked message to
			// the second at once instead of after the lease expired.
			if err := sub1.Close(); err != nil {
				t.Fatal(err)
			}
			want := ids[1:]
			if !fromFirst {
				next.Ack()
				want = ids[2:]
			}
			equalIDs(t, receiveAck(t, ch2, len(want)), want)
		})
	}
}

// TestCompetingSubscribers checks that subscribers of one group never both
// process a message and keep the order, both within one Bus (hub slot) and
// across Buses with their own *sql.DB, which is how two processes look to
// each other (database lease only).
func TestCompetingSubscribers(t *testing.T) {
	for _, crossProcess := range []bool{false, true} {
		name := "same-bus"
		if crossProcess {
			name = "separate-buses"
		}
		t.Run(name, func(t *testing.T) {
			path := tempDBPath(t)
			b1 := newTestBus(t, path)
			b2 := b1
			if crossProcess {
				// Poll often, so that b2 keeps trying to claim while b1
				// holds the lease.
				b2 = newTestBusWith(t, path, Config{PollInterval: time.Millisecond, CompactInterval: -1})
			}
			const n = 200
			ids := publishN(t, mustPublisher(t, b1), "t", n)

			var (
				mu      sync.Mutex
				order   []string
				perSub  [4]int
				wg      sync.WaitGroup
				done    = make(chan struct{})
				doneSet sync.Once
			)
			for i := range perSub {
				bus := b1
				if i%2 == 1 {
					bus = b2
				}
				ch := mustSubscribe(t, mustSubscriber(t, bus, "g"), "t")
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case m := <-ch:
							mu.Lock()
							order = append(order, m.UUID)
							perSub[i]++
							if len(order) >= n {
								doneSet.Do(func() { close(done) })
							}
							mu.Unlock()
							time.Sleep(200 * time.Microsecond) // "processing"
							m.Ack()
						case <-done:
							return
						}
					}
				}()
			}
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				mu.Lock()
				t.Fatalf("received %d of %d", len(order), n)
			}
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			equalIDs(t, order[:n], ids)
			if len(order) != n {
				t.Fatalf("%d deliveries for %d messages", len(order), n)
			}
			t.Logf("deliveries per subscriber: %v", perSub)
		})
	}
}

func TestExpiredLeaseIsTakenOver(t *testing.T) {
	b := newTestBus(t, tempDBPath(t))
	ids := publishN(t, mustPublisher(t, b), "t", 1)
	sub := mustSubscriber(t, b, "g")
	if err := sub.SubscribeInitialize("t"); err != nil {
		t.Fatal(err)
	}
	// A process that died while message 1 was in flight.
	until := time.Now().Add(300 * time.Millisecond)
	if _, err := b.db.Exec(`UPDATE sqlitebus_offsets SET lease_owner = 'dead', lease_until = ?
		WHERE consumer_group = 'g' AND topic = 't'`, until.UnixNano()); err != nil {
		t.Fatal(err)
	}
	ch := mustSubscribe(t, sub, "t")
	m := receive(t, ch, 5*time.Second)
	if time.Now().Before(until) {
		t.Fatal("delivered while the lease of another subscriber was valid")
	}
	if m.UUID != ids[0] {
		t.Fatalf("got %s, want %s", m.UUID, ids[0])
	}
}

func TestPollingFindsMessagesOfOtherProcesses(t *testing.T) {
	path := tempDBPath(t)
	pubBus := newTestBus(t, path)
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// No shared Hub: only polling can find the messages.
	sub, err := NewSubscriber(db, SubscriberConfig{ConsumerGroup: "g", PollInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ch := mustSubscribe(t, sub, "t")
	ids := publishN(t, mustPublisher(t, pubBus), "t", 3)
	equalIDs(t, receiveAck(t, ch, 3), ids)
}

func TestCloseAndContext(t *testing.T) {
	b := newTestBus(t, tempDBPath(t))
	pub := mustPublisher(t, b)
	sub := mustSubscriber(t, b, "g")

	ctx, cancel := context.WithCancel(context.Background())
	chCtx, err := sub.Subscribe(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, pub, "a", 1)
	m := receive(t, chCtx, 5*time.Second)
	cancel()
	select {
	case _, ok := <-chCtx:
		if ok {
			t.Fatal("message after cancel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after context cancel")
	}
	select {
	case <-m.Context().Done():
	case <-time.After(time.Second):
		t.Fatal("message context not cancelled")
	}

	chClose := mustSubscribe(t, sub, "b")
	for range 2 {
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
		if err := pub.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := <-chClose; ok {
		t.Fatal("channel open after Close")
	}
	if _, err := sub.Subscribe(context.Background(), "b"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
	if err := pub.Publish("a", message.NewMessage(watermill.NewUUID(), nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}

	// Bus.Close closes what the bus created.
	sub2 := mustSubscriber(t, b, "")
	ch2 := mustSubscribe(t, sub2, "a")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch2; ok {
		t.Fatal("channel open after Bus.Close")
	}
	if _, err := b.Subscriber("x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Bus.Subscriber after Close: %v", err)
	}
}

func TestCompact(t *testing.T) {
	b := newTestBus(t, tempDBPath(t))
	b.cfg.Retention = time.Hour
	pub := mustPublisher(t, b)
	ctx := context.Background()

	idsA := publishN(t, pub, "a", 10)
	publishN(t, pub, "b", 10) // no group ever subscribes to b

	g1 := mustSubscriber(t, b, "g1")
	receiveAck(t, mustSubscribe(t, g1, "a"), 10)
	g2 := mustSubscriber(t, b, "g2")
	receiveAck(t, mustSubscribe(t, g2, "a"), 5)
	// Close stores the acks (an Ack racing with Close is kept).
	_ = g1.Close()
	_ = g2.Close()

	// Nothing is old enough yet.
	if n, err := b.Compact(ctx); err != nil || n != 0 {
		t.Fatalf("fresh messages: deleted %d, err %v", n, err)
	}

	if _, err := b.db.Exec(`UPDATE sqlitebus_messages SET created_at = ?`, time.Now().Add(-2*time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	freshA := publishN(t, pub, "a", 2)

	// a: the 5 messages both groups acked; b: all 10, nobody consumes b.
	n, err := b.Compact(ctx)
	if err != nil || n != 15 {
		t.Fatalf("deleted %d, err %v; want 15", n, err)
	}

	// g2 still gets everything it has not acked, the old ones included.
	g2 = mustSubscriber(t, b, "g2")
	equalIDs(t, receiveAck(t, mustSubscribe(t, g2, "a"), 7), append(append([]string{}, idsA[5:]...), freshA...))
	_ = g2.Close()

	// An independent consumer starts at the oldest retained message.
	equalIDs(t, receiveAck(t, mustSubscribe(t, mustSubscriber(t, b, ""), "a"), 7), append(append([]string{}, idsA[5:]...), freshA...))

	// Once every group is past them, the rest of the old messages go, and
	// offsets keep growing after the table was emptied (AUTOINCREMENT).
	if err := b.RemoveConsumerGroup(ctx, "g1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Exec(`UPDATE sqlitebus_messages SET created_at = ?`, time.Now().Add(-2*time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Compact(ctx); err != nil || n != 7 {
		t.Fatalf("deleted %d, err %v; want 7", n, err)
	}
	var count int
	if err := b.db.QueryRow(`SELECT COUNT(*) FROM sqlitebus_messages`).Scan(&count); err != nil || count != 0 {
		t.Fatalf("%d messages left, err %v", count, err)
	}
	later := publishN(t, pub, "a", 1)
	g2 = mustSubscriber(t, b, "g2")
	equalIDs(t, receiveAck(t, mustSubscribe(t, g2, "a"), 1), later)
}

func TestBackgroundCompaction(t *testing.T) {
	db, err := Open(tempDBPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b, err := New(db, Config{Retention: time.Nanosecond, CompactInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	publishN(t, mustPublisher(t, b), "t", 3)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var count int
		if err := db.QueryRow(`SELECT COUNT(*) FROM sqlitebus_messages`).Scan(&count); err != nil {
			t.Fatal(err)
		}
		if count == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages left", count)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInProcessWakeUp shows that in-process delivery does not depend on
// polling: the poll interval is an hour, on one *sql.DB and on two handles
// of the same file sharing a Hub.
func TestInProcessWakeUp(t *testing.T) {
	path := tempDBPath(t)
	db1, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db1.Close()
	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	hub := NewHub()
	pub, err := NewPublisher(db1, PublisherConfig{Hub: hub}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		db    *sql.DB
		group string
	}{{"same-db", db1, "g"}, {"same-file", db2, "g"}, {"same-file-independent", db2, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := NewSubscriber(tc.db, SubscriberConfig{ConsumerGroup: tc.group, PollInterval: time.Hour, Hub: hub}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			topic := "wake-" + tc.name
			ch := mustSubscribe(t, sub, topic)
			for range 3 {
				// Let the subscriber reach its wait first.
				time.Sleep(20 * time.Millisecond)
				ids := publishN(t, pub, topic, 1)
				equalIDs(t, receiveAck(t, ch, 1), ids)
			}
		})
	}
}

// TestWindow checks the MaxInFlight contract: up to MaxInFlight messages
// arrive before any ack, the next window is claimed when all of one is acked,
// the group's offset covers the acked prefix, a nack
// delivers the nacked message and the ones after it again, and a subscriber
// stopped mid-window leaves the unacked rest to the next one.
func TestWindow(t *testing.T) {
	path := tempDBPath(t)
	b := newTestBusWith(t, path, Config{NackResendSleep: time.Millisecond, CompactInterval: -1, MaxInFlight: 4})
	ids := publishN(t, mustPublisher(t, b), "evidence", 10)
	sub := mustSubscriber(t, b, "evaluate")
	ch := mustSubscribe(t, sub, "evidence")

	var window []*message.Message
	for range 4 {
		window = append(window, receive(t, ch, 5*time.Second))
	}
	equalIDs(t, uuids(window), ids[:4])
	expectNothing(t, ch, 50*time.Millisecond) // the window is full

	window[0].Ack()
	window[1].Ack()
	window[2].Nack()
	window[3].Nack()
	select {
	case <-window[3].Context().Done():
	case <-time.After(time.Second):
		t.Fatal("context of a message after the nacked one not cancelled")
	}
	// From the nacked message on, in order.
	again := []*message.Message{receive(t, ch, 5*time.Second), receive(t, ch, 5*time.Second)}
	equalIDs(t, uuids(again), ids[2:4])
	again[0].Ack()
	again[1].Ack()
	equalIDs(t, receiveAck(t, ch, 1), ids[4:5])

	// The window is ids[2:6]; the next one starts when all of it is acked.
	m5 := receive(t, ch, 5*time.Second)
	expectNothing(t, ch, 50*time.Millisecond)
	m5.Ack()
	// Stop with ids[6] acked and ids[7] in flight: a new process resumes at ids[7].
	m6, m7 := receive(t, ch, 5*time.Second), receive(t, ch, 5*time.Second)
	equalIDs(t, uuids([]*message.Message{m5, m6, m7}), ids[5:8])
	m6.Ack()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := newTestBusWith(t, path, Config{CompactInterval: -1, MaxInFlight: 4})
	ch2 := mustSubscribe(t, mustSubscriber(t, b2, "evaluate"), "evidence")
	equalIDs(t, receiveAck(t, ch2, 3), ids[7:])
	expectNothing(t, ch2, 50*time.Millisecond)
}

func uuids(msgs []*message.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.UUID
	}
	return out
}

// TestGroupCommit publishes from many goroutines at once, one of them a
// request that cannot be stored: it alone fails, every other Publish is
// stored with its messages together and in order, and the calls that queued
// behind a commit share the next one.
func TestGroupCommit(t *testing.T) {
	b := newTestBus(t, tempDBPath(t))
	pub := mustPublisher(t, b)
	if _, err := b.db.Exec(`CREATE TRIGGER poison BEFORE INSERT ON sqlitebus_messages
		WHEN NEW.uuid = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned'); END`); err != nil {
		t.Fatal(err)
	}
	const callers = 64
	errs := make([]error, callers)
	var wg sync.WaitGroup
	// Holding the write lock stands for a slow commit: the first caller
	// leads and waits for it with its own request, the others queue.
	pub.st.writeMu.Lock()
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 7 {
				errs[i] = pub.Publish("t", message.NewMessage(fmt.Sprintf("c%d-0", i), nil), message.NewMessage("poison", nil))
				return
			}
			errs[i] = pub.Publish("t", message.NewMessage(fmt.Sprintf("c%d-0", i), nil), message.NewMessage(fmt.Sprintf("c%d-1", i), nil))
		}()
	}
	// Every call is either in the leader's group (counted in pubCalls as it
	// began its commit) or queued behind it. The leader usually holds its own
	// call alone, but others may have joined before it took the queue.
	queued := 0
	for led := int64(0); int64(queued)+led < callers; time.Sleep(time.Millisecond) {
		pub.st.pubMu.Lock()
		queued = len(pub.st.pubQueue)
		pub.st.pubMu.Unlock()
		led = pub.st.pubCalls.Load()
	}
	pub.st.writeMu.Unlock()
	wg.Wait()
	for i, err := range errs {
		if (err != nil) != (i == 7) {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	ids := storedIDs(t, b)
	if len(ids) != 2*(callers-1) {
		t.Fatalf("%d messages stored, want %d", len(ids), 2*(callers-1))
	}
	for i := 0; i < len(ids); i += 2 { // each call's two messages are adjacent and in order
		caller := strings.TrimSuffix(ids[i], "-0")
		if ids[i+1] != caller+"-1" || caller == "c7" {
			t.Fatalf("messages %d and %d are %s and %s", i, i+1, ids[i], ids[i+1])
		}
	}
	// The leader's own, then the queued group (which failed and was retried
	// one request at a time). Counted by the bus rather than told apart by
	// created_at, which can show one: when the poisoned call leads, its group
	// stores nothing, and two commits may share a reading of the clock.
	want := int64(1) // the leader's group, and one more for all that queued
	if queued > 0 {
		want = 2
	}
	if st := b.PublishStats(); st.Commits != want || st.Calls != callers {
		t.Errorf("%d publishes (%d queued) committed in %d groups (%d calls counted), want %d", callers, queued, st.Commits, st.Calls, want)
	}
}
