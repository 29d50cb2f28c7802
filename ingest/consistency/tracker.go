// Package consistency gives reads the writes acknowledged before them (read after write, for
// every client of an organization): the Tracker remembers this process's publishes until the
// evaluator has made them visible and evaluated, and Peers extends that to the writes of other
// ingest processes through marks in the shared store and the bus's offsets. Ingest calls them
// around each publish and before each read.
package consistency

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"
)

// Visibility answers whether messages have been applied and evaluated (see store.Reader).
type Visibility interface {
	Visible(ctx context.Context, ids []string) (bool, error)
	Evaluated(ctx context.Context, generations map[string]int64) (bool, error)
}

// Tracker gives every client of an organization read-after-write: it remembers the messages
// published for each organization that the evaluator has not yet made visible, and a read by
// any key of the organization (or an anonymous reader of a public one) waits for those that
// were published before the read started. Later writes never hold a read back, and a read of
// an organization with nothing in flight costs one map lookup.
type Tracker struct {
	vis     Visibility
	maxWait time.Duration
	poll    time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	seq     uint64 // numbers every publish, across organizations
	orgs    map[string]*orgWrites
	seen    map[string]time.Time // organization -> when some of its writes were last found visible
	changed chan struct{}        // closed and replaced on every Notify and every progress
	waiting int                  // reads waiting now
}

// orgWrites is what one organization has in flight.
type orgWrites struct {
	pending  []pendingWrite // in publish order
	checking bool           // a goroutine is asking the store about them
}

// pendingWrite is a message ID, or a trail that must be evaluated at a dirt generation (its
// messages were applied by a process that stopped before evaluating it).
type pendingWrite struct {
	seq   uint64
	id    string
	trail string
	gen   int64
}

// NewTracker builds a tracker. maxWait bounds every wait (then the read proceeds, possibly
// stale, and a warning is logged); poll is how often the store is asked when nobody calls
// Notify (the distributed mode, where the evaluator runs elsewhere).
func NewTracker(vis Visibility, maxWait, poll time.Duration, log *slog.Logger) *Tracker {
	if poll <= 0 {
		poll = 5 * time.Millisecond
	}
	return &Tracker{vis: vis, maxWait: maxWait, poll: poll, log: log, orgs: map[string]*orgWrites{}, seen: map[string]time.Time{},
		changed: make(chan struct{})}
}

// Published records that message id was published for org; the caller answers its client
// after this returns, so every read that starts after the answer waits for id.
func (t *Tracker) Published(org, id string) { t.add(org, pendingWrite{id: id}) }

// Unevaluated records that org's trail must be evaluated at dirt generation gen before its
// reads are served: a process restarting learns so of messages its predecessor applied.
func (t *Tracker) Unevaluated(org, trail string, gen int64) {
	t.add(org, pendingWrite{trail: trail, gen: gen})
}

func (t *Tracker) add(org string, p pendingWrite) {
	t.mu.Lock()
	w := t.orgs[org]
	if w == nil {
		w = &orgWrites{}
		t.orgs[org] = w
	}
	t.seq++
	p.seq = t.seq
	w.pending = append(w.pending, p)
	n := len(w.pending)
	t.mu.Unlock()
	if n%pruneChunk == 0 {
		// An organization that writes and never reads: drop what is already visible.
		t.settle(context.Background(), org, math.MaxUint64)
	}
}

// Notify wakes waiters; the embedded evaluator calls it after each commit.
func (t *Tracker) Notify() {
	t.mu.Lock()
	t.broadcast()
	t.mu.Unlock()
}

// broadcast wakes every waiter. The caller holds mu.
func (t *Tracker) broadcast() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// WritesFresh reports whether org has writes not yet known to be visible, or had some found
// visible in the last d: the reads that must not be answered from anything kept from before.
func (t *Tracker) WritesFresh(org string, d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.seen[org]
	return t.orgs[org] != nil || (ok && time.Since(at) < d)
}

// Pending reports how many of org's messages are not yet known to be visible.
func (t *Tracker) Pending(org string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := t.orgs[org]; w != nil {
		return len(w.pending)
	}
	return 0
}

// Waiting reports how many reads are waiting for writes to become visible.
func (t *Tracker) Waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waiting
}

// Wait blocks until every message published for org before the call is visible, the bound
// passes, or ctx ends. It reports whether anything was in flight.
func (t *Tracker) Wait(ctx context.Context, org string) bool {
	t.mu.Lock()
	w := t.orgs[org]
	if w == nil {
		t.mu.Unlock()
		return false
	}
	upTo := t.seq
	t.waiting++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.waiting--
		t.mu.Unlock()
	}()
	deadline := time.NewTimer(t.maxWait)
	defer deadline.Stop()
	poll := time.NewTimer(t.poll)
	defer poll.Stop()
	for {
		t.mu.Lock()
		changed := t.changed
		t.mu.Unlock()
		if t.settle(ctx, org, upTo) {
			return true
		}
		poll.Reset(t.poll)
		select {
		case <-ctx.Done():
			return true
		case <-deadline.C:
			t.log.WarnContext(ctx, "read-after-write wait timed out; serving the read anyway", "org", org, "pending", t.Pending(org), "wait", t.maxWait)
			return true
		case <-changed:
		case <-poll.C:
		}
	}
}

// maxSeen is the size from which forget drops the old entries of Tracker.seen.
const maxSeen = 4096

// pruneChunk bounds the IDs of one visibility query (SQLite allows 32766 parameters).
const pruneChunk = 256

// maxPending bounds what is remembered per organization. An organization whose clients write
// far faster than the evaluator applies, and never read, loses the oldest entries: its later
// reads may then not wait for those writes. The list is cut back to keepPending, so that it is
// copied (and the loss logged) once every maxPending-keepPending writes rather than at every
// prune.
const (
	maxPending  = 100_000
	keepPending = maxPending * 3 / 4
)

// settle forgets org's messages up to sequence upTo that are visible, oldest first and a chunk
// at a time (messages are applied roughly in order), and reports whether none of those remain.
// One goroutine at a time asks the store about an organization; the others report false and
// are woken when it makes progress.
func (t *Tracker) settle(ctx context.Context, org string, upTo uint64) bool {
	for {
		t.mu.Lock()
		w := t.orgs[org]
		if w == nil || w.pending[0].seq > upTo {
			t.mu.Unlock()
			return true
		}
		if w.checking {
			t.mu.Unlock()
			return false
		}
		if len(w.pending) > maxPending {
			t.log.WarnContext(ctx, "read-after-write: too many pending writes for one organization; forgetting the oldest", "org", org,
				"dropped", len(w.pending)-keepPending)
			w.pending = append([]pendingWrite(nil), w.pending[len(w.pending)-keepPending:]...)
			if w.pending[0].seq > upTo {
				t.mu.Unlock()
				return true
			}
		}
		var ids []string
		var gens map[string]int64
		n := 0
		for _, p := range w.pending[:min(len(w.pending), pruneChunk)] {
			if p.seq > upTo {
				break
			}
			n++
			if p.trail == "" {
				ids = append(ids, p.id)
				continue
			}
			if gens == nil {
				gens = map[string]int64{}
			}
			gens[p.trail] = max(gens[p.trail], p.gen)
		}
		w.checking = true
		t.mu.Unlock()

		ok, err := t.vis.Visible(ctx, ids)
		if err == nil && ok && len(gens) > 0 {
			ok, err = t.vis.Evaluated(ctx, gens)
		}
		t.mu.Lock()
		w.checking = false
		if err == nil && ok {
			t.forget(org, w, n)
		}
		t.mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				t.log.Warn("read-after-write: visibility check failed", "err", err)
			}
			return false
		}
		if !ok {
			return false
		}
	}
}

// forget removes the first n pending messages of org, found visible, and wakes the waiters.
// Only the goroutine checking org removes messages, and publishes only append, so the checked
// ones are still the first n. The caller holds mu.
func (t *Tracker) forget(org string, w *orgWrites, n int) {
	now := time.Now()
	if len(t.seen) >= maxSeen { // organizations that wrote long ago need no entry
		for o, at := range t.seen {
			if now.Sub(at) > time.Minute {
				delete(t.seen, o)
			}
		}
	}
	t.seen[org] = now
	if n == len(w.pending) {
		delete(t.orgs, org)
	} else {
		clear(w.pending[:n]) // the array outlives them until the next append moves it
		w.pending = w.pending[n:]
	}
	t.broadcast()
}
