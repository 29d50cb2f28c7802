package consistency

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// Evaluated treats a trail as an ID "trail@generation" made visible by show.
func (f *fakeVisibility) Evaluated(_ context.Context, gens map[string]int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for trail, gen := range gens {
		if !f.visible[trail+"@"+strconv.FormatInt(gen, 10)] {
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
	return NewTracker(v, 2*time.Second, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
}

// waitFor polls cond until it holds, failing the test after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTrackerWaitsForTheOrganization: a read waits for every write of its organization, whoever
// made it, and for nothing of another organization.
func TestTrackerWaitsForTheOrganization(t *testing.T) {
	v := &fakeVisibility{visible: map[string]bool{}}
	tr := newTestTracker(v)
	tr.Published("acme", "m1")
	if tr.Wait(context.Background(), "globex") { // nothing of globex in flight: no wait, no query
		t.Fatal("a read waited for another organization's writes")
	}
	done := make(chan bool)
	go func() { done <- tr.Wait(context.Background(), "acme") }()
	waitFor(t, "the read to wait", func() bool { return tr.Waiting() == 1 })
	select {
	case <-done:
		t.Fatal("the read did not wait for its organization's write")
	default:
	}
	v.show("m1")
	tr.Notify()
	if !<-done {
		t.Fatal("Wait reported nothing in flight")
	}
	if tr.Pending("acme") != 0 {
		t.Fatalf("pending %d after visibility", tr.Pending("acme"))
	}
}

// TestTrackerHurriesForWaitingReads: a read that waits for writes asks the bus to hurry them
// (once a wait); a read with nothing to wait for, of its organization or of its scopes, does not.
func TestTrackerHurriesForWaitingReads(t *testing.T) {
	v := &fakeVisibility{visible: map[string]bool{}}
	var hurried atomic.Int32
	tr := NewTracker(v, 2*time.Second, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)),
		func() { hurried.Add(1) })
	tr.Published("acme", "m1", "acme/trail-a")
	tr.Wait(context.Background(), "globex")
	tr.WaitScoped(context.Background(), "acme", []string{"acme/trail-b"})
	if n := hurried.Load(); n != 0 {
		t.Fatalf("hurried %d times for reads that wait for nothing", n)
	}
	done := make(chan bool)
	go func() { done <- tr.WaitScoped(context.Background(), "acme", []string{"acme/trail-a"}) }()
	waitFor(t, "the waiting read to hurry", func() bool { return hurried.Load() > 0 })
	v.show("m1")
	tr.Notify()
	if !<-done {
		t.Fatal("WaitScoped reported nothing in flight")
	}
	if n := hurried.Load(); n != 1 {
		t.Fatalf("hurried %d times for one waiting read, want 1", n)
	}
}

// TestTrackerWaitsForEvaluations: a trail left dirty by a previous process holds its
// organization's reads until it is evaluated at the generation given, with the messages around it.
func TestTrackerWaitsForEvaluations(t *testing.T) {
	v := &fakeVisibility{visible: map[string]bool{}}
	tr := newTestTracker(v)
	tr.Published("acme", "m1")
	tr.Unevaluated("acme", "tr-1", 7)
	tr.Published("acme", "m2")
	v.show("m1", "m2")
	if tr.settle(context.Background(), "acme", math.MaxUint64) {
		t.Fatal("settled with a trail not evaluated")
	}
	v.show("tr-1@7")
	if !tr.settle(context.Background(), "acme", math.MaxUint64) || tr.Pending("acme") != 0 {
		t.Fatalf("not settled once the trail was evaluated: %d pending", tr.Pending("acme"))
	}
}

// TestTrackerWaitsOnlyForEarlierWrites: a read waits for the writes published before it started,
// not for those published while it waits, so a steady stream of writes cannot starve it.
func TestTrackerWaitsOnlyForEarlierWrites(t *testing.T) {
	v := &fakeVisibility{visible: map[string]bool{}}
	tr := newTestTracker(v)
	tr.Published("acme", "before")
	done := make(chan struct{})
	go func() { tr.Wait(context.Background(), "acme"); close(done) }()
	waitFor(t, "the read to wait", func() bool { return tr.Waiting() == 1 })
	tr.Published("acme", "after") // never becomes visible
	v.show("before")
	tr.Notify()
	select {
	case <-done:
	case <-time.After(time.Second): // the wait's own bound is 2 s
		t.Fatal("the read waits for a write published after it started")
	}
	if n := tr.Pending("acme"); n != 1 {
		t.Fatalf("pending %d, want the later write", n)
	}
}

// concurrentVisibility blocks every Visible call until released and records how many ran at once.
type concurrentVisibility struct {
	fakeVisibility
	release chan struct{}
	mu      sync.Mutex
	now     int
	most    int
	calls   int
}

func (c *concurrentVisibility) Visible(ctx context.Context, ids []string) (bool, error) {
	c.mu.Lock()
	c.now++
	c.calls++
	c.most = max(c.most, c.now)
	c.mu.Unlock()
	<-c.release
	c.mu.Lock()
	c.now--
	c.mu.Unlock()
	return c.fakeVisibility.Visible(ctx, ids)
}

// TestTrackerAsksOncePerOrganization: many readers of one organization share one visibility
// query at a time instead of each asking the store.
func TestTrackerAsksOncePerOrganization(t *testing.T) {
	v := &concurrentVisibility{fakeVisibility: fakeVisibility{visible: map[string]bool{}}, release: make(chan struct{})}
	tr := newTestTracker(v)
	tr.Published("acme", "m1")
	const readers = 8
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() { tr.Wait(context.Background(), "acme") })
	}
	waitFor(t, "the readers to wait", func() bool { return tr.Waiting() == readers })
	v.show("m1")
	close(v.release)
	wg.Wait()
	if v.most != 1 {
		t.Fatalf("%d visibility queries ran at once for one organization", v.most)
	}
}

// TestTrackerPrunesInChunks: an organization that only writes keeps a bounded list and bounded
// queries, and makes progress as the oldest writes become visible.
func TestTrackerPrunesInChunks(t *testing.T) {
	v := &fakeVisibility{visible: map[string]bool{}}
	tr := newTestTracker(v)
	var ids []string
	for i := range 5 * pruneChunk {
		id := "m" + strconv.Itoa(i)
		ids = append(ids, id)
		tr.Published("ci", id)
	}
	v.show(ids[:3*pruneChunk]...)
	tr.Published("ci", "last")
	if tr.settle(context.Background(), "ci", math.MaxUint64) || tr.Pending("ci") != 2*pruneChunk+1 {
		t.Fatalf("pending %d, want %d after the visible prefix was pruned", tr.Pending("ci"), 2*pruneChunk+1)
	}
	if v.largest > pruneChunk {
		t.Fatalf("a visibility query asked for %d ids, over %d", v.largest, pruneChunk)
	}
}

func TestTrackerWaitIsBounded(t *testing.T) {
	tr := NewTracker(&fakeVisibility{visible: map[string]bool{}}, 50*time.Millisecond, time.Millisecond,
		slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	tr.Published("ci", "never")
	start := time.Now()
	tr.Wait(context.Background(), "ci")
	if d := time.Since(start); d > time.Second {
		t.Fatalf("wait took %v, bound is 50ms", d)
	}
}

// TestTrackerScopesFresh: writes count as fresh for the reads that wait for them while pending
// and for a while after they are found visible; not for reads of other scopes.
func TestTrackerScopesFresh(t *testing.T) {
	v := &fakeVisibility{visible: map[string]bool{}}
	tr := newTestTracker(v)
	trail, other := []string{"acme/trail-a"}, []string{"acme/trail-b"}
	if tr.ScopesFresh("acme", trail, time.Hour) {
		t.Fatal("an organization that never wrote has fresh writes")
	}
	tr.Published("acme", "m1", trail...)
	if !tr.ScopesFresh("acme", trail, 0) {
		t.Fatal("a pending write is not fresh")
	}
	if tr.ScopesFresh("acme", other, time.Hour) {
		t.Fatal("a pending write of another trail is fresh")
	}
	v.show("m1")
	tr.WaitScoped(context.Background(), "acme", trail)
	if !tr.ScopesFresh("acme", trail, time.Hour) {
		t.Fatal("a write just found visible is not fresh")
	}
	if tr.ScopesFresh("acme", trail, 0) || tr.ScopesFresh("acme", other, time.Hour) || tr.ScopesFresh("globex", trail, time.Hour) {
		t.Fatal("writes stay fresh past the window, or for another trail or organization")
	}
	tr.Published("acme", "m2") // names no scope: any read waits for it
	if !tr.ScopesFresh("acme", other, 0) {
		t.Fatal("a pending unscoped write is not fresh for every read")
	}
	v.show("m2")
	tr.Wait(context.Background(), "acme")
	if !tr.ScopesFresh("acme", other, time.Hour) {
		t.Fatal("an unscoped write just found visible is not fresh for every read")
	}
}

// TestTrackerWaitScoped: a scoped read waits for the writes of its scopes and for unscoped ones
// published before it, and not for writes of the organization's other scopes; what it found
// visible is no longer waited for, and the list is still settled in order.
func TestTrackerWaitScoped(t *testing.T) {
	v := &fakeVisibility{visible: map[string]bool{}}
	tr := newTestTracker(v)
	tr.Published("acme", "other-1", "acme/trail-b")
	if tr.WaitScoped(context.Background(), "acme", []string{"acme/trail-a"}) {
		t.Fatal("a read of trail-a waited for a write of trail-b")
	}
	tr.Published("acme", "mine", "acme/trail-a", "acme/fingerprint/f1")
	tr.Published("acme", "other-2", "acme/trail-b")
	done := make(chan bool)
	go func() { done <- tr.WaitScoped(context.Background(), "acme", []string{"acme/fingerprint/f1"}) }()
	waitFor(t, "the read to wait", func() bool { return tr.Waiting() == 1 })
	select {
	case <-done:
		t.Fatal("the read did not wait for a write of its fingerprint")
	default:
	}
	v.show("mine")
	tr.Notify()
	if !<-done {
		t.Fatal("the read reports it waited for nothing")
	}
	if tr.WaitScoped(context.Background(), "acme", []string{"acme/trail-a"}) {
		t.Fatal("a write found visible was waited for again")
	}
	if got := tr.Pending("acme"); got != 3 {
		t.Fatalf("%d writes pending, want 3 (a scoped read settles nothing out of order)", got)
	}

	tr.Published("acme", "policy") // names no scope
	go func() { done <- tr.WaitScoped(context.Background(), "acme", []string{"acme/trail-a"}) }()
	waitFor(t, "the read to wait for the unscoped write", func() bool { return tr.Waiting() == 1 })
	v.show("policy")
	tr.Notify()
	if !<-done {
		t.Fatal("the read reports it waited for nothing")
	}

	// A whole-organization read still waits for the others, and then the list is empty.
	go func() { done <- tr.Wait(context.Background(), "acme") }()
	waitFor(t, "the organization's read to wait", func() bool { return tr.Waiting() == 1 })
	v.show("other-1", "other-2")
	tr.Notify()
	<-done
	if got := tr.Pending("acme"); got != 0 {
		t.Fatalf("%d writes pending after every one is visible", got)
	}
	if w := tr.orgs["acme"]; w != nil {
		t.Fatalf("counts left behind: %+v", w)
	}
}

// TestTrackerBoundsAWriterThatNeverReads: with nothing becoming visible, an organization's list
// stays within maxPending, keeps the newest writes, and the loss is logged now and then, not at
// every prune.
func TestTrackerBoundsAWriterThatNeverReads(t *testing.T) {
	var logged bytes.Buffer
	tr := NewTracker(&fakeVisibility{visible: map[string]bool{}}, time.Second, time.Millisecond,
		slog.New(slog.NewTextHandler(&logged, nil)), nil)
	const writes = 2 * maxPending
	for i := range writes {
		tr.Published("ci", strconv.Itoa(i))
	}
	list := tr.orgs["ci"].pending
	if len(list) > maxPending || len(list) < keepPending {
		t.Fatalf("%d writes pending, want between %d and %d", len(list), keepPending, maxPending)
	}
	if last := list[len(list)-1]; last.id != strconv.Itoa(writes-1) {
		t.Fatalf("newest pending write %s, want %d", last.id, writes-1)
	}
	if n := strings.Count(logged.String(), "too many pending writes"); n == 0 || n > writes/(maxPending-keepPending)+1 {
		t.Fatalf("the loss was logged %d times for %d writes", n, writes)
	}
}

// hookVisibility runs hook once, at the first Visible call, before answering it (the hook may
// call Visible again).
type hookVisibility struct {
	*fakeVisibility
	hooked atomic.Bool
	hook   func()
}

func (h *hookVisibility) Visible(ctx context.Context, ids []string) (bool, error) {
	if !h.hooked.Swap(true) {
		h.hook()
	}
	return h.fakeVisibility.Visible(ctx, ids)
}

// TestTrackerScopedWaitAfterASettle: writes a scoped read found visible are no longer counted
// for their scope even when the oldest of them were settled and dropped while it asked.
func TestTrackerScopedWaitAfterASettle(t *testing.T) {
	f := &fakeVisibility{visible: map[string]bool{}}
	v := &hookVisibility{fakeVisibility: f}
	tr := newTestTracker(v)
	tr.Published("acme", "m0", "b")
	tr.Published("acme", "m1", "a")
	tr.Published("acme", "m2", "b") // never visible here
	tr.Published("acme", "m3", "a")
	f.show("m0", "m1", "m3")
	upTo := tr.orgs["acme"].pending[1].seq
	v.hook = func() { tr.settle(context.Background(), "acme", upTo) } // drops m0 and m1 meanwhile
	if !tr.WaitScoped(context.Background(), "acme", []string{"a"}) {
		t.Fatal("the read reports it waited for nothing")
	}
	if got := len(tr.orgs["acme"].pending); got != 2 {
		t.Fatalf("%d writes pending, want m2 and m3", got)
	}
	if tr.WaitScoped(context.Background(), "acme", []string{"a"}) {
		t.Fatal("m3, found visible, is still waited for")
	}
}
