package consistency

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

// fakePeerStore keeps marks, positions and dirty trails in memory and counts the calls.
type fakePeerStore struct {
	mu        sync.Mutex
	marks     map[[2]string]float64 // (org, process) -> until
	positions map[int32]int64
	dirty     map[string]int64 // trail -> generation (all of org "acme")
	evaluated map[string]int64 // trail -> evaluated generation
	writes    int              // MarkInFlight calls
	looks     int              // InFlight calls
	asked     []map[string]int64
}

func newFakePeerStore() *fakePeerStore {
	return &fakePeerStore{marks: map[[2]string]float64{}, positions: map[int32]int64{}, dirty: map[string]int64{},
		evaluated: map[string]int64{}}
}

func (f *fakePeerStore) MarkInFlight(_ context.Context, org, process string, until float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	f.marks[[2]string{org, process}] = until
	return nil
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

func newTestPeers(st PeerStore, process string, ends func(context.Context) (map[int32]int64, error)) *Peers {
	p := NewPeers(PeersConfig{Process: process, Store: st, Topic: "evidence", EndOffsets: ends, Lease: time.Hour,
		Linger: 20 * time.Millisecond, Poll: time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	p.tracker = newTestTracker(&fakeVisibility{visible: map[string]bool{}})
	return p
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
	must(st.MarkInFlight(ctx, "acme", "b", 1e12))
	if p.Wait(ctx, "acme", deadline()) || endsAsked != 0 {
		t.Fatal("a read waited for its own process's mark")
	}

	must(st.MarkInFlight(ctx, "acme", "dead", unixSeconds(time.Now())-1)) // its lease ran out
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
	go func() { done <- p.Wait(ctx, "acme", deadline()) }()
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
	if start := time.Now(); !p.Wait(ctx, "acme", time.Now().Add(30*time.Millisecond)) || time.Since(start) > 5*time.Second {
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
