package sqlitebus

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

func journalReq(topic string, ids ...string) *publishReq {
	r := &publishReq{topic: topic}
	for _, id := range ids {
		r.msgs = append(r.msgs, message.NewMessage(id, []byte("payload of "+id)))
		r.metadata = append(r.metadata, []byte(`{"k":"`+id+`"}`))
	}
	return r
}

func mustRecord(t *testing.T, r *publishReq) []byte {
	t.Helper()
	b, err := appendRecord(nil, r, 42)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestJournalRecordRoundTrip(t *testing.T) {
	rec := mustRecord(t, journalReq("evidence", "a", "b", "c"))
	got, n, ok := readRecord(append(rec, "next"...))
	if !ok || n != len(rec) {
		t.Fatalf("readRecord = ok %v, n %d; want a %d-byte record", ok, n, len(rec))
	}
	if got.topic != "evidence" || got.created != 42 || len(got.msgs) != 3 {
		t.Fatalf("record = %+v", got)
	}
	for i, id := range []string{"a", "b", "c"} {
		m := got.msgs[i]
		if m.uuid != id || string(m.payload) != "payload of "+id || string(m.metadata) != `{"k":"`+id+`"}` {
			t.Errorf("message %d = %q %q %q", i, m.uuid, m.payload, m.metadata)
		}
	}
	empty := mustRecord(t, &publishReq{topic: "t", msgs: []*message.Message{message.NewMessage("e", nil)}, metadata: [][]byte{nil}})
	if got, _, ok := readRecord(empty); !ok || len(got.msgs[0].payload) != 0 {
		t.Errorf("empty payload: ok %v, %+v", ok, got)
	}
}

// What a crash can leave, a cut record, and any damaged byte are not read as a record.
func TestJournalRecordRejectsDamage(t *testing.T) {
	rec := mustRecord(t, journalReq("evidence", "a", "b"))
	for cut := range len(rec) {
		if _, _, ok := readRecord(rec[:cut]); ok {
			t.Errorf("a record cut to %d of %d bytes was read", cut, len(rec))
		}
	}
	for i := range rec {
		damaged := bytes.Clone(rec)
		damaged[i] ^= 0x40
		if _, _, ok := readRecord(damaged); ok {
			t.Errorf("a record with byte %d damaged was read", i)
		}
	}
	// A valid checksum over a body that does not parse (a count larger than the body).
	body := binary.AppendUvarint(nil, 1)
	body = appendString(body, "t")
	body = binary.AppendUvarint(body, 1000)
	forged := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
	forged = binary.LittleEndian.AppendUint32(forged, crc32.Checksum(body, castagnoli))
	if _, _, ok := readRecord(append(forged, body...)); ok {
		t.Error("a record whose count exceeds its body was read")
	}
}

// writeJournal writes a journal file of epoch holding records, plus tail.
func writeJournal(t *testing.T, path string, epoch uint64, tail []byte, reqs ...*publishReq) {
	t.Helper()
	b := []byte(journalMagic)
	b = binary.LittleEndian.AppendUint64(b, epoch)
	for _, r := range reqs {
		b = append(b, mustRecord(t, r)...)
	}
	if err := os.WriteFile(path, append(b, tail...), 0o600); err != nil {
		t.Fatal(err)
	}
}

func journalBus(t *testing.T, path string) *Bus {
	t.Helper()
	return newTestBusWith(t, path, Config{NackResendSleep: time.Millisecond, CompactInterval: -1, PublishJournal: true})
}

func storedIDs(t *testing.T, b *Bus) []string {
	t.Helper()
	rows, err := b.db.Query(`SELECT uuid FROM sqlitebus_messages ORDER BY "offset"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// openClosed opens a Bus on path, waits for its mover, and closes it, returning what
// the table holds.
func openClosed(t *testing.T, path string) []string {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b, err := New(db, Config{CompactInterval: -1, PublishJournal: true}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	waitMoved(t, b)
	ids := storedIDs(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// A journal left by a crash is moved into the table on open, exactly once: opening again
// moves nothing twice.
func TestJournalRecoveryMovesOnce(t *testing.T) {
	path := tempDBPath(t)
	writeJournal(t, path+journalSuffix, 1, nil, journalReq("evidence", "a", "b"), journalReq("other", "c"))
	for range 2 {
		equalIDs(t, openClosed(t, path), []string{"a", "b", "c"})
	}
	// And what is published after a recovery follows it.
	b := journalBus(t, path)
	pub := mustPublisher(t, b)
	if err := pub.Publish("evidence", message.NewMessage("d", nil)); err != nil {
		t.Fatal(err)
	}
	ch := mustSubscribe(t, mustSubscriber(t, b, "g"), "evidence")
	equalIDs(t, receiveAck(t, ch, 3), []string{"a", "b", "d"})
}

// The torn end of a crashed append is dropped, and the file is cut there, so that later
// appends are found by the next recovery.
func TestJournalRecoveryDropsTornTail(t *testing.T) {
	path := tempDBPath(t)
	torn := mustRecord(t, journalReq("evidence", "torn"))
	writeJournal(t, path+journalSuffix, 1, torn[:len(torn)-3], journalReq("evidence", "a"))

	b := journalBus(t, path)
	if err := mustPublisher(t, b).Publish("evidence", message.NewMessage("b", nil)); err != nil {
		t.Fatal(err)
	}
	waitMoved(t, b)
	equalIDs(t, storedIDs(t, b), []string{"a", "b"})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	equalIDs(t, openClosed(t, path), []string{"a", "b"})
}

// The epochs tell a rotated file (nothing of it moved) from one the table has partly moved,
// and a file that does not belong to the database stops the Bus instead of being replayed.
func TestJournalRecoveryEpochs(t *testing.T) {
	tests := []struct {
		name    string
		row     [2]int64 // epoch, moved; epoch 0: no row
		file    func(t *testing.T, path string)
		want    []string
		wantErr string
	}{
		{"no row: all of it", [2]int64{}, func(t *testing.T, p string) {
			writeJournal(t, p, 7, nil, journalReq("e", "a"), journalReq("e", "b"))
		}, []string{"a", "b"}, ""},
		{"same epoch: after the moved offset", [2]int64{3, journalHeader + int64(len(mustRecord(t, journalReq("e", "a"))))}, func(t *testing.T, p string) {
			writeJournal(t, p, 3, nil, journalReq("e", "a"), journalReq("e", "b"))
		}, []string{"b"}, ""},
		{"next epoch: rotated after the last move", [2]int64{3, 9999}, func(t *testing.T, p string) {
			writeJournal(t, p, 4, nil, journalReq("e", "a"))
		}, []string{"a"}, ""},
		{"cut while rotating", [2]int64{3, 9999}, func(t *testing.T, p string) {
			if err := os.WriteFile(p, []byte(journalMagic[:5]), 0o600); err != nil {
				t.Fatal(err)
			}
		}, nil, ""},
		{"an older epoch", [2]int64{5, journalHeader}, func(t *testing.T, p string) {
			writeJournal(t, p, 2, nil, journalReq("e", "a"))
		}, nil, "epoch 2 does not follow the bus's epoch 5"},
		{"moved past the end", [2]int64{3, 1 << 20}, func(t *testing.T, p string) {
			writeJournal(t, p, 3, nil, journalReq("e", "a"))
		}, nil, "bytes were moved"},
		{"not a journal", [2]int64{}, func(t *testing.T, p string) {
			if err := os.WriteFile(p, []byte(strings.Repeat("x", 64)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, nil, "bad magic"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tempDBPath(t)
			db, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if tc.row[0] != 0 {
				b, err := New(db, Config{CompactInterval: -1}, nil) // creates the schema
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.Exec(`INSERT INTO sqlitebus_journal (id, epoch, moved) VALUES (1, ?, ?)`, tc.row[0], tc.row[1]); err != nil {
					t.Fatal(err)
				}
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
			}
			tc.file(t, path+journalSuffix)
			b, err := New(db, Config{CompactInterval: -1, PublishJournal: true}, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), journalSuffix) {
					t.Fatalf("New: err = %v, want one naming the journal and saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			waitMoved(t, b)
			equalIDs(t, storedIDs(t, b), tc.want)
			// Appends after the recovery are moved too.
			if err := mustPublisher(t, b).Publish("e", message.NewMessage("after", nil)); err != nil {
				t.Fatal(err)
			}
			waitMoved(t, b)
			equalIDs(t, storedIDs(t, b), append(tc.want, "after"))
		})
	}
}

// A journal past its size is moved to the end and emptied under a new epoch, also under a
// steady stream of publishes that never leaves it idle; reopening after any number of
// rotations moves nothing twice and loses nothing.
func TestJournalRotates(t *testing.T) {
	path := tempDBPath(t)
	b := journalBus(t, path)
	b.jr.mu.Lock()
	b.jr.rotateAt = 2 << 10
	b.jr.mu.Unlock()
	var want []string
	for i := range 200 {
		want = append(want, fmt.Sprint("m", i))
	}
	// Four publishers, one topic each, without pauses.
	errs := make(chan error, 4)
	for w := range 4 {
		pub := mustPublisher(t, b)
		go func() {
			for _, id := range want {
				if err := pub.Publish(fmt.Sprint("evidence", w), message.NewMessage(id, bytes.Repeat([]byte{'x'}, 100))); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waitMoved(t, b)
	// The mover rotates once it sees the file full, after its last move.
	var epoch uint64
	var end int64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b.jr.mu.Lock()
		epoch, end = b.jr.epoch, b.jr.end
		b.jr.mu.Unlock()
		if end < b.jr.rotateAt || time.Now().After(deadline) {
			break
		}
	}
	// How many rotations depends on how appends and moves interleave; a few at least.
	if epoch < 3 {
		t.Errorf("epoch %d after 100 KB through a 2 KB journal; want several rotations", epoch)
	}
	if fi, err := os.Stat(path + journalSuffix); err != nil || fi.Size() != end || end >= 2<<10 {
		t.Errorf("journal file: %v, %v; want %d bytes, under the 2 KB rotation size", fi.Size(), err, end)
	}
	for w := range 4 {
		ch := mustSubscribe(t, mustSubscriber(t, b, "g"), fmt.Sprint("evidence", w))
		equalIDs(t, receiveAck(t, ch, len(want)), want)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openClosed(t, path); len(got) != 4*len(want) {
		t.Errorf("%d messages in the table after reopening, want %d", len(got), 4*len(want))
	}
}

// While the mover cannot write (here: the write lock is held), publishes go on until the
// journal holds maxPending unmoved bytes, then wait for room instead of growing it.
func TestJournalBoundsUnmovedBytes(t *testing.T) {
	b := journalBus(t, tempDBPath(t))
	b.jr.mu.Lock()
	b.jr.maxPending = 4 << 10
	b.jr.mu.Unlock()
	pub := mustPublisher(t, b)

	b.st.writeMu.Lock()
	published := make(chan int, 100)
	go func() {
		defer close(published)
		for i := range 100 {
			if err := pub.Publish("evidence", message.NewMessage(fmt.Sprint(i), bytes.Repeat([]byte{'x'}, 500))); err != nil {
				t.Error(err)
				return
			}
			published <- i
		}
	}()
	n := 0
	for stalled := false; !stalled; {
		select {
		case <-published:
			n++
		case <-time.After(200 * time.Millisecond):
			stalled = true
		}
	}
	if n == 0 || n > 12 {
		t.Errorf("%d publishes of 500 bytes returned with the mover stopped and 4 KB allowed", n)
	}
	b.st.writeMu.Unlock()
	for range published {
		n++
	}
	if n != 100 {
		t.Fatalf("%d of 100 publishes returned after the mover resumed", n)
	}
	waitMoved(t, b)
	if got := len(storedIDs(t, b)); got != 100 {
		t.Errorf("%d messages in the table, want 100", got)
	}
}

// A second Bus on the same database (another process, or here another handle) cannot take
// the journal: it publishes to the table directly, and both are delivered.
func TestJournalHeldElsewherePublishesDirectly(t *testing.T) {
	path := tempDBPath(t)
	first := journalBus(t, path)
	second := journalBus(t, path)
	if first.jr == nil || second.jr != nil {
		t.Fatalf("journals: first %v, second %v; want only the first", first.jr != nil, second.jr != nil)
	}
	if err := mustPublisher(t, first).Publish("evidence", message.NewMessage("j", nil)); err != nil {
		t.Fatal(err)
	}
	waitMoved(t, first)
	if err := mustPublisher(t, second).Publish("evidence", message.NewMessage("d", nil)); err != nil {
		t.Fatal(err)
	}
	ch := mustSubscribe(t, mustSubscriber(t, second, "g"), "evidence")
	equalIDs(t, receiveAck(t, ch, 2), []string{"j", "d"})
}

// FuzzReadRecord: whatever a damaged journal holds, reading it never panics, and what reads
// as a record encodes to a record that reads back the same.
func FuzzReadRecord(f *testing.F) {
	f.Add(mustRecordF(f, journalReq("evidence", "a", "b")))
	f.Add(mustRecordF(f, journalReq("t")))
	f.Add([]byte{4, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, n, ok := readRecord(b)
		if !ok {
			return
		}
		r := &publishReq{topic: rec.topic}
		for _, m := range rec.msgs {
			r.msgs = append(r.msgs, message.NewMessage(m.uuid, m.payload))
			r.metadata = append(r.metadata, m.metadata)
		}
		again, err := appendRecord(nil, r, rec.created)
		if err != nil {
			t.Fatal(err)
		}
		back, m, ok := readRecord(again)
		if !ok || m != len(again) || n > len(b) || back.topic != rec.topic || back.created != rec.created || len(back.msgs) != len(rec.msgs) {
			t.Fatalf("re-encoded record reads back as %+v (ok %v), want %+v", back, ok, rec)
		}
		for i := range rec.msgs {
			x, y := back.msgs[i], rec.msgs[i]
			if x.uuid != y.uuid || !bytes.Equal(x.metadata, y.metadata) || !bytes.Equal(x.payload, y.payload) {
				t.Fatalf("message %d reads back as %+v, want %+v", i, x, y)
			}
		}
	})
}

func mustRecordF(f *testing.F, r *publishReq) []byte {
	b, err := appendRecord(nil, r, 42)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
