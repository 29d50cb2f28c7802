package ingest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeVisibility marks IDs visible on demand and records the size of each query.
type fakeVisibility struct {
	mu      sync.Mutex
	visible map[string]bool
	largest int
}

func (f *fakeVisibility) Visible(_ context.Context, ids []string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.largest = max(f.largest, len(ids))
	for _, id := range ids {
		if !f.visible[id] {
			return false, nil
		}
	}
	return true, nil
}

func (f *fakeVisibility) show(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		f.visible[id] = true
	}
}

func newTestTracker(v Visibility) *Tracker {
	return NewTracker(v, 2*time.Second, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func TestTrackerWaitsForOwnWritesOnly(t *testing.T) {
	v := &fakeVisibility{visible: map[string]bool{}}
	tr := newTestTracker(v)
	tr.Published("alice", "m1")
	start := time.Now()
	tr.Wait(context.Background(), "bob") // bob has nothing pending
	if time.Since(start) > 100*time.Millisecond {
		t.Fatal("a key waited for another key's writes")
	}
	done := make(chan struct{})
	go func() { tr.Wait(context.Background(), "alice"); close(done) }()
	select {
	case <-done:
		t.Fatal("alice's read did not wait for her write")
	case <-time.After(50 * time.Millisecond):
	}
	v.show("m1")
	tr.Notify()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("alice's read still waits after her write became visible")
	}
	if tr.Pending("alice") != 0 {
		t.Fatalf("pending %d after visibility", tr.Pending("alice"))
	}
}

// TestTrackerPrunesInChunks: a key that only writes keeps a bounded list and bounded queries,
// and makes progress as the oldest writes become visible.
func TestTrackerPrunesInChunks(t *testing.T) {
	v := &fakeVisibility{visible: map[string]bool{}}
	tr := newTestTracker(v)
	var ids []string
	for i := range 5 * pruneChunk {
		id := "m" + string(rune('a'+i%26)) + time.Duration(i).String()
		ids = append(ids, id)
		tr.Published("ci", id)
	}
	v.show(ids[:3*pruneChunk]...)
	tr.Published("ci", "last")
	if !tr.prune(context.Background(), "ci") && tr.Pending("ci") != 2*pruneChunk+1 {
		t.Fatalf("pending %d, want %d after the visible prefix was pruned", tr.Pending("ci"), 2*pruneChunk+1)
	}
	if v.largest > pruneChunk {
		t.Fatalf("a visibility query asked for %d ids, over %d", v.largest, pruneChunk)
	}
}

func TestTrackerWaitIsBounded(t *testing.T) {
	tr := NewTracker(&fakeVisibility{visible: map[string]bool{}}, 50*time.Millisecond, time.Millisecond,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	tr.Published("ci", "never")
	start := time.Now()
	tr.Wait(context.Background(), "ci")
	if d := time.Since(start); d > time.Second {
		t.Fatalf("wait took %v, bound is 50ms", d)
	}
}

// TestTrackerWritesFresh: a key's writes count as fresh while pending and for a while after they are found visible.
func TestTrackerWritesFresh(t *testing.T) {
	v := &fakeVisibility{visible: map[string]bool{}}
	tr := newTestTracker(v)
	if tr.WritesFresh("alice", time.Hour) {
		t.Fatal("a key that never wrote has fresh writes")
	}
	tr.Published("alice", "m1")
	if !tr.WritesFresh("alice", 0) {
		t.Fatal("a pending write is not fresh")
	}
	v.show("m1")
	tr.Wait(context.Background(), "alice")
	if !tr.WritesFresh("alice", time.Hour) {
		t.Fatal("a write just found visible is not fresh")
	}
	if tr.WritesFresh("alice", 0) || tr.WritesFresh("bob", time.Hour) {
		t.Fatal("writes stay fresh past the window, or for another key")
	}
}

// TestTrackerBoundsAWriterThatNeverReads: with nothing becoming visible, a key's list stays within
// maxPending, keeps the newest writes, and the loss is logged now and then, not at every prune.
func TestTrackerBoundsAWriterThatNeverReads(t *testing.T) {
	var logged bytes.Buffer
	tr := NewTracker(&fakeVisibility{visible: map[string]bool{}}, time.Second, time.Millisecond,
		slog.New(slog.NewTextHandler(&logged, nil)))
	const writes = 2 * maxPending
	for i := range writes {
		tr.Published("ci", strconv.Itoa(i))
	}
	list := tr.pending["ci"]
	if len(list) > maxPending || len(list) < keepPending {
		t.Fatalf("%d writes pending, want between %d and %d", len(list), keepPending, maxPending)
	}
	if last := list[len(list)-1]; last != strconv.Itoa(writes-1) {
		t.Fatalf("newest pending write %s, want %d", last, writes-1)
	}
	if n := strings.Count(logged.String(), "too many pending writes"); n == 0 || n > writes/(maxPending-keepPending)+1 {
		t.Fatalf("the loss was logged %d times for %d writes", n, writes)
	}
}
