package consistency

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

// fakePeerStore keeps marks, positions and dirty trails in memory and counts the calls.
type fakePeerStore struct {
	mu          sync.Mutex
	marks       map[[2]string]float64  // (org, process) -> until
	scopes      map[[2]string][]string // (org, process) -> the scopes recorded under the mark
	positions   map[int32]int64
	dirty       map[string]int64 // trail -> generation (all of org "acme")
	evaluated   map[string]int64 // trail -> evaluated generation
	writes      int              // MarkInFlight calls
	looks       int              // InFlight calls
	scopeLooks  int              // InFlightScopes calls
	gate        chan struct{}    // when set, MarkInFlight waits for it
	clearGate   chan struct{}    // when set, ClearScopesInFlight waits for it
	clears      int              // ClearScopesInFlight calls
	scopeGate   chan struct{}    // when set, InFlightScopes waits for it (after it was called)
	scopesAsked [][]string       // the scopes of each InFlightScopes call, sorted
	asked       []map[string]int64
}

func newFakePeerStore() *fakePeerStore {
	return &fakePeerStore{marks: map[[2]string]float64{}, scopes: map[[2]string][]string{}, positions: map[int32]int64{},
		dirty: map[string]int64{}, evaluated: map[string]int64{}}
}

func (f *fakePeerStore) MarkInFlight(_ context.Context, org, process string, until float64, scopes []string) error {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	k := [2]string{org, process}
	f.marks[k] = until
	for _, sc := range scopes {
		if !slices.Contains(f.scopes[k], sc) {
			f.scopes[k] = append(f.scopes[k], sc)
		}
	}
	return nil
}

func (f *fakePeerStore) ClearScopesInFlight(_ context.Context, org, process string, scopes []string) error {
	f.mu.Lock()
	gate := f.clearGate
	f.clears++
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := [2]string{org, process}
	f.scopes[k] = slices.DeleteFunc(f.scopes[k], func(sc string) bool { return slices.Contains(scopes, sc) })
	return nil
}

func (f *fakePeerStore) InFlightScopes(_ context.Context, org string, scopes []string) ([]store.InFlightScope, error) {
	f.mu.Lock()
	gate := f.scopeGate
	f.scopeLooks++
	f.scopesAsked = append(f.scopesAsked, slices.Sorted(slices.Values(scopes)))
	defer func() {
		if gate != nil { // answered later, as of when it was asked, as a statement's snapshot is
			<-gate
		}
	}()
	defer f.mu.Unlock()
	var out []store.InFlightScope
	for k := range f.marks {
		if k[0] != org {
			continue
		}
		held := f.scopes[k]
		if len(held) == 0 {
			out = append(out, store.InFlightScope{Process: k[1], Every: true})
		}
		for _, sc := range held {
			if slices.Contains(scopes, sc) {
				out = append(out, store.InFlightScope{Process: k[1], Scope: sc})
			}
		}
	}
	return out, nil
}

// recorded returns the scopes recorded under process's mark of org, sorted.
func (f *fakePeerStore) recorded(org, process string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.scopes[[2]string{org, process}]))
}

func (f *fakePeerStore) RenewInFlight(_ context.Context, process string, until float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.marks {
		if k[1] == process {
			f.marks[k] = until
		}
	}
	return nil
}

func (f *fakePeerStore) ClearInFlight(_ context.Context, org, process string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.marks, [2]string{org, process})
	delete(f.scopes, [2]string{org, process})
	return nil
}

func (f *fakePeerStore) InFlight(_ context.Context, org string) ([]store.InFlightMark, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looks++
	var out []store.InFlightMark
	for k, until := range f.marks {
		if k[0] == org {
			out = append(out, store.InFlightMark{OrgID: org, Process: k[1], Until: until})
		}
	}
	return out, nil
}

func (f *fakePeerStore) ClearExpiredInFlight(_ context.Context, org, process string, before float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if k := [2]string{org, process}; f.marks[k] < before {
		delete(f.marks, k)
		delete(f.scopes, k)
	}
	return nil
}

func (f *fakePeerStore) Positions(context.Context, string) (map[int32]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.positions), nil
}

func (f *fakePeerStore) PendingEvaluations(context.Context, string) ([]store.DirtyTrail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.DirtyTrail
	for trail, gen := range f.dirty {
		out = append(out, store.DirtyTrail{TrailID: trail, OrgID: "acme", Generation: gen})
	}
	return out, nil
}

func (f *fakePeerStore) Evaluated(_ context.Context, gens map[string]int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, maps.Clone(gens))
	for trail, gen := range gens {
		if f.evaluated[trail] < gen {
			return false, nil
		}
	}
	return true, nil
}

func (f *fakePeerStore) set(do func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	do()
}

// calls reads a count under the lock.
func (f *fakePeerStore) calls(count func() int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return count()
}

func newTestPeers(st PeerStore, process string, ends func(context.Context) (map[int32]int64, error)) *Peers {
	p := NewPeers(PeersConfig{Process: process, Store: st, Topic: "evidence", EndOffsets: ends, Lease: time.Hour,
		Linger: 20 * time.Millisecond, ScopeLinger: 20 * time.Millisecond, Poll: time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	p.tracker = newTestTracker(&fakeVisibility{visible: map[string]bool{}})
	return p
}

// publish publishes a write of scopes of "acme" through p and answers it (done).
func publish(t *testing.T, p *Peers, scopes ...string) {
	t.Helper()
	done, err := p.Publishing(context.Background(), "acme", scopes...)
	if err != nil {
		t.Fatal(err)
	}
	done()
}

// publishing publishes scopes of "acme" in the background, as publish does; the channel gets its
// error once it is answered.
func publishing(p *Peers, scopes ...string) <-chan error {
	answered := make(chan error, 1)
	go func() {
		done, err := p.Publishing(context.Background(), "acme", scopes...)
		if err == nil {
			done()
		}
		answered <- err
	}()
	return answered
}

// runOut lets p's mark of "acme" run out (its lease, shortened here, passes without a renewal)
// and removes it with its scopes, as a reader that caught up with it would.
func runOut(t *testing.T, st *fakePeerStore, p *Peers) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < p.cfg.Lease {
		time.Sleep(time.Millisecond)
	}
	if err := st.ClearExpiredInFlight(context.Background(), "acme", p.cfg.Process, unixSeconds(time.Now())+1); err != nil {
		t.Fatal(err)
	}
}

// TestPeersMarkOncePerBusySpell: an organization is marked when its writes here go from none in
// flight to some, not at every write, and the mark goes once they are all visible.
func TestPeersMarkOncePerBusySpell(t *testing.T) {
	st := newFakePeerStore()
	p := newTestPeers(st, "a", nil)
	vis := p.tracker.vis.(*fakeVisibility)
	ctx := context.Background()
	for _, id := range []string{"m1", "m2", "m3"} {
		done, err := p.Publishing(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		p.tracker.Published("acme", id)
		done()
	}
	if st.writes != 1 {
		t.Fatalf("%d mark writes for three writes in one busy spell", st.writes)
	}
	if marks, _ := st.InFlight(ctx, "acme"); len(marks) != 1 || marks[0].Process != "a" {
		t.Fatalf("marks: %v", marks)
	}
	p.sweep(ctx) // the writes are not visible: the mark stays
	vis.show("m1", "m2", "m3")
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.sweep(ctx)
		if marks, _ := st.InFlight(ctx, "acme"); len(marks) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the mark stays after every write became visible")
		}
		time.Sleep(time.Millisecond)
	}
	done, err := p.Publishing(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	done()
	if st.writes != 2 {
		t.Fatalf("%d mark writes after a second busy spell, want 2", st.writes)
	}
}

// TestPeersRemarkWhenLeaseHalfGone: no write is acknowledged under a mark whose lease may have
// run out.
func TestPeersRemarkWhenLeaseHalfGone(t *testing.T) {
	st := newFakePeerStore()
	p := newTestPeers(st, "a", nil)
	p.cfg.Lease = 40 * time.Millisecond
	ctx := context.Background()
	done, _ := p.Publishing(ctx, "acme")
	done()
	start := time.Now()
	for time.Since(start) < p.cfg.Lease/2 {
		time.Sleep(time.Millisecond)
	}
	done, _ = p.Publishing(ctx, "acme")
	done()
	if st.writes != 2 {
		t.Fatalf("%d mark writes, want the mark written again past half its lease", st.writes)
	}
}

// TestPeersWait: a read waits for other processes' writes only when they have marks: then
// until the positions reach the bus's end and the organization's trails dirty at that moment are
// evaluated at their generations; a mark that ran out is removed once caught up.
func TestPeersWait(t *testing.T) {
	st := newFakePeerStore()
	endsAsked := 0
	ends := func(context.Context) (map[int32]int64, error) {
		endsAsked++
		return map[int32]int64{0: 10, 1: 4}, nil
	}
	p := newTestPeers(st, "b", ends)
	ctx := context.Background()
	deadline := func() time.Time { return time.Now().Add(10 * time.Second) }

	// Only this process's own mark: nothing to wait for elsewhere.
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.MarkInFlight(ctx, "acme", "b", 1e12, []string{""}))
	if waited(p.Wait(ctx, "acme", nil, deadline())) || endsAsked != 0 {
		t.Fatal("a read waited for its own process's mark")
	}

	must(st.MarkInFlight(ctx, "acme", "dead", unixSeconds(time.Now())-1, []string{""})) // its lease ran out
	// Process a writes: its 201 comes once the new mark has stood for markNotice, so that this
	// read, starting after it, does not use the look for marks taken above.
	a := newTestPeers(st, "a", nil)
	markDone, err := a.Publishing(ctx, "acme")
	must(err)
	markDone()
	st.set(func() {
		st.positions = map[int32]int64{0: 10, 1: 2}
		st.dirty = map[string]int64{"tr-1": 5}
	})
	done := make(chan bool)
	go func() { done <- waited(p.Wait(ctx, "acme", nil, deadline())) }()
	st.set(func() { st.positions[1] = 4 }) // the evaluator catches up with the bus
	waitFor(t, "the evaluation to be asked about", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.asked) > 0
	})
	st.set(func() {
		st.dirty["tr-1"] = 9 // dirtied again by a later write: the read still waits for 5 only
		st.evaluated["tr-1"] = 5
	})
	if !<-done {
		t.Fatal("Wait reported no other process in flight")
	}
	for _, gens := range st.asked {
		if !maps.Equal(gens, map[string]int64{"tr-1": 5}) {
			t.Fatalf("asked about evaluations %v, want the generations when the positions were reached", gens)
		}
	}
	marks, _ := st.InFlight(ctx, "acme")
	procs := map[string]bool{}
	for _, m := range marks {
		procs[m.Process] = true
	}
	if !procs["a"] || !procs["b"] || procs["dead"] {
		t.Fatalf("marks after catching up: %v (the expired one goes, the live ones stay)", marks)
	}

	// Bounded: positions that never arrive end the wait at the deadline.
	st.set(func() { st.positions = map[int32]int64{} })
	if start := time.Now(); !waited(p.Wait(ctx, "acme", nil, time.Now().Add(30*time.Millisecond))) || time.Since(start) > 5*time.Second {
		t.Fatal("a wait behind a stuck evaluator was not bounded")
	}
}

// TestPeersShareLooks: reads share a look for marks that started less than markNotice before
// them; a later read looks again.
func TestPeersShareLooks(t *testing.T) {
	st := newFakePeerStore()
	p := newTestPeers(st, "b", nil)
	ctx := context.Background()
	readStart := time.Now()
	for range 3 {
		if _, err := p.lookMarks(ctx, "acme", readStart); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.lookMarks(ctx, "globex", readStart); err != nil {
		t.Fatal(err)
	}
	if st.looks != 2 {
		t.Fatalf("%d queries for three reads of one organization and one of another", st.looks)
	}
	if _, err := p.lookMarks(ctx, "acme", time.Now().Add(2*markNotice)); err != nil {
		t.Fatal(err)
	}
	if st.looks != 3 {
		t.Fatalf("a read markNotice after the look used it (%d queries)", st.looks)
	}
}

// TestPeersNewMarkWaitsNotice: a write under a new mark is answered no sooner than markNotice
// after the mark was made; under a standing mark, at once.
func TestPeersNewMarkWaitsNotice(t *testing.T) {
	p := newTestPeers(newFakePeerStore(), "a", nil)
	ctx := context.Background()
	start := time.Now()
	done, err := p.Publishing(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	done()
	if d := time.Since(start); d < markNotice {
		t.Fatalf("the first write under a new mark was answered after %v, before markNotice", d)
	}
	p.mu.Lock()
	noticed := p.marks["acme"].noticed
	p.mu.Unlock()
	done, err = p.Publishing(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	done()
	p.mu.Lock()
	again := p.marks["acme"].noticed
	p.mu.Unlock()
	if !again.Equal(noticed) {
		t.Fatal("a write under a standing mark made it new again")
	}
}

// TestPeersRecordScopes: a mark records the scopes of the writes under it, each once, in one
// store write with the mark or under the standing mark (no new notice); a scope whose writes are
// visible goes after Linger while the mark stays for a publish under way, and the mark goes with
// its scopes once every write is visible.
func TestPeersRecordScopes(t *testing.T) {
	st := newFakePeerStore()
	p := newTestPeers(st, "a", nil)
	vis := p.tracker.vis.(*fakeVisibility)
	ctx := context.Background()
	publishID := func(id string, scopes ...string) {
		t.Helper()
		done, err := p.Publishing(ctx, "acme", scopes...)
		if err != nil {
			t.Fatal(err)
		}
		p.tracker.Published("acme", id, scopes...)
		done()
	}
	recorded := func(want ...string) {
		t.Helper()
		if got := st.recorded("acme", "a"); !slices.Equal(got, want) {
			t.Fatalf("recorded scopes %q, want %q", got, want)
		}
	}
	publishID("m1", "t1", "fp1")
	publishID("m2", "t1")
	if st.writes != 1 {
		t.Fatalf("%d store writes for two writes of recorded scopes, want 1", st.writes)
	}
	recorded("fp1", "t1")
	p.mu.Lock()
	noticed := p.marks["acme"].noticed
	p.mu.Unlock()
	publishID("m3", "t2")
	if st.writes != 2 {
		t.Fatalf("%d store writes after a write of a new scope, want 2", st.writes)
	}
	recorded("fp1", "t1", "t2")
	p.mu.Lock()
	again := p.marks["acme"].noticed
	p.mu.Unlock()
	if !again.Equal(noticed) {
		t.Fatal("a new scope under a standing mark made the mark new again")
	}

	hold, err := p.Publishing(ctx, "acme", "t2") // a publish under way: the mark and t2 stay
	if err != nil {
		t.Fatal(err)
	}
	vis.show("m1", "m2", "m3")
	waitFor(t, "the visible scopes to go", func() bool {
		p.sweep(ctx)
		return slices.Equal(st.recorded("acme", "a"), []string{"t2"})
	})
	if marks, _ := st.InFlight(ctx, "acme"); len(marks) != 1 {
		t.Fatalf("marks %v while a publish is under way", marks)
	}
	hold()

	publishID("m4") // names no scope: recorded as ""
	recorded("", "t2")
	vis.show("m4")
	waitFor(t, "the mark to go", func() bool {
		p.sweep(ctx)
		marks, _ := st.InFlight(ctx, "acme")
		return len(marks) == 0
	})
	recorded()
	publishID("m5", "t1") // a new busy spell records its scopes again
	recorded("t1")
}

// TestPeersWaitScoped: a read of some scopes waits for another process only when its mark holds
// one of them or a write naming none; a read of the whole organization waits for any mark.
func TestPeersWaitScoped(t *testing.T) {
	st := newFakePeerStore()
	endsAsked := 0
	ends := func(context.Context) (map[int32]int64, error) {
		endsAsked++
		return map[int32]int64{0: 1}, nil
	}
	st.set(func() { st.positions = map[int32]int64{0: 1} }) // caught up: the waits end at once
	a, b := newTestPeers(st, "a", nil), newTestPeers(st, "b", ends)
	ctx := context.Background()
	deadline := func() time.Time { return time.Now().Add(10 * time.Second) }
	publish(t, a, "t1")
	if w, done := b.Wait(ctx, "acme", []string{"t2", "fp2"}, deadline()); w || done || endsAsked != 0 {
		t.Fatalf("a read of t2 with a write of t1 elsewhere: waited %v, done %v (want neither: it may learn t1)", w, done)
	}
	if !waited(b.Wait(ctx, "acme", []string{"t2", "t1"}, deadline())) || endsAsked != 1 {
		t.Fatal("a read of t1 did not wait for a write of t1 elsewhere")
	}
	if !waited(b.Wait(ctx, "acme", nil, deadline())) {
		t.Fatal("a read of the whole organization did not wait for a write elsewhere")
	}
	if w, done := b.Wait(ctx, "globex", []string{"t1"}, deadline()); w || !done {
		t.Fatalf("a read of another organization: waited %v, done %v", w, done)
	}
	if w, done := b.Wait(ctx, "acme", []string{"t1"}, deadline()); !w || !done {
		t.Fatalf("a read of t1 that caught up: waited %v, done %v", w, done)
	}
	publish(t, a) // a write naming no scope holds every read of the organization
	if !waited(b.Wait(ctx, "acme", []string{"t2"}, deadline())) || !waited(b.Wait(ctx, "acme", []string{}, deadline())) {
		t.Fatal("a scoped read did not wait for a write naming no scope elsewhere")
	}
}

// TestPeersRemarkAfterLeaseRanOut: a mark whose lease ran out (the process could not renew it)
// may have been removed with its scopes by a reader elsewhere: the next write makes it anew,
// with every scope it holds, and waits markNotice again.
func TestPeersRemarkAfterLeaseRanOut(t *testing.T) {
	st := newFakePeerStore()
	p := newTestPeers(st, "a", nil)
	p.cfg.Lease = 40 * time.Millisecond
	publish(t, p, "t1")
	runOut(t, st, p)
	begun := time.Now()
	publish(t, p, "t2")
	if got := st.recorded("acme", "a"); !slices.Equal(got, []string{"t1", "t2"}) {
		t.Fatalf("scopes recorded after the mark was made anew: %q", got)
	}
	if time.Since(begun) < markNotice {
		t.Fatal("a write under a mark made anew was answered before markNotice")
	}
}

// TestPeersRecordedScopesDoNotWait: a write whose scopes are recorded under a standing mark goes
// on while a store write for another write's new scope is under way.
func TestPeersRecordedScopesDoNotWait(t *testing.T) {
	st := newFakePeerStore()
	p := newTestPeers(st, "a", nil)
	publish(t, p, "t1")
	gate := make(chan struct{})
	st.set(func() { st.gate = gate })
	second := publishing(p, "t2") // a new scope: held at the store
	waitFor(t, "the new scope's store write to start", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.marks["acme"].op != nil
	})
	publish(t, p, "t1") // recorded: returns while t2's write is held
	close(gate)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if got := st.recorded("acme", "a"); !slices.Equal(got, []string{"t1", "t2"}) {
		t.Fatalf("recorded %q", got)
	}
}

// waited is Peers.Wait's first answer.
func waited(w, _ bool) bool { return w }

// TestPeersWriteDuringScopeRemoval: a write of a scope whose removal is under way waits for it
// and records the scope again before it is answered.
func TestPeersWriteDuringScopeRemoval(t *testing.T) {
	st := newFakePeerStore()
	p := newTestPeers(st, "a", nil)
	vis := p.tracker.vis.(*fakeVisibility)
	ctx := context.Background()
	done, err := p.Publishing(ctx, "acme", "t1")
	if err != nil {
		t.Fatal(err)
	}
	p.tracker.Published("acme", "m1", "t1")
	done()
	hold, err := p.Publishing(ctx, "acme", "t2") // keeps the mark: only t1 can go
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	vis.show("m1")
	gate := make(chan struct{})
	st.set(func() { st.clearGate = gate })
	removing := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		sm := p.marks["acme"].scopes["t1"]
		return sm != nil && sm.removing
	}
	cleared := func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.clears > 0
	}
	swept := make(chan struct{})
	go func() { // sweeps until one sweep has removed t1
		defer close(swept)
		for !cleared() {
			p.sweep(ctx)
			time.Sleep(time.Millisecond)
		}
	}()
	waitFor(t, "t1's removal to start", removing)
	answered := publishing(p, "t1")
	waitFor(t, "the write of t1 to start", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.marks["acme"].scopes["t1"].busy > 0
	})
	for range 100 {
		runtime.Gosched()
	}
	select {
	case err := <-answered:
		t.Fatalf("a write of t1 was answered (%v) while t1's removal was under way", err)
	default:
	}
	close(gate)
	<-swept
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if got := st.recorded("acme", "a"); !slices.Contains(got, "t1") {
		t.Fatalf("recorded %q after a write of t1 that followed its removal", got)
	}
}

// TestPeersWaitForMarksWithoutScopes: a mark that records no scope, made by a build before
// scopes were recorded (a rolling upgrade), holds every scoped read.
func TestPeersWaitForMarksWithoutScopes(t *testing.T) {
	st := newFakePeerStore()
	st.set(func() { st.positions = map[int32]int64{0: 1} })
	b := newTestPeers(st, "b", func(context.Context) (map[int32]int64, error) { return map[int32]int64{0: 1}, nil })
	ctx := context.Background()
	if err := st.MarkInFlight(ctx, "acme", "old", unixSeconds(time.Now().Add(time.Hour)), nil); err != nil {
		t.Fatal(err)
	}
	if w, done := b.Wait(ctx, "acme", []string{"t1"}, time.Now().Add(10*time.Second)); !w || !done {
		t.Fatalf("a read of t1 with an old build's mark elsewhere: waited %v, done %v", w, done)
	}
}

// TestPeersRenewDoesNotReviveARunOutMark: a renewal that lands after a mark's lease ran out (the
// renewals failed meanwhile, and a reader may have removed the row) does not count as renewing
// it: the next write makes the mark anew, with its scopes.
func TestPeersRenewDoesNotReviveARunOutMark(t *testing.T) {
	st := newFakePeerStore()
	p := newTestPeers(st, "a", nil)
	p.cfg.Lease = 40 * time.Millisecond
	publish(t, p, "t1")
	runOut(t, st, p)
	if err := p.renew(context.Background(), time.Now()); err != nil { // finds no row
		t.Fatal(err)
	}
	writes := st.writes
	publish(t, p, "t1")
	if st.writes != writes+1 {
		t.Fatal("a write after a renewal of a run-out mark was answered without making the mark anew")
	}
	if got := st.recorded("acme", "a"); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("recorded %q", got)
	}
}
