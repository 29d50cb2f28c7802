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
	hurry   func() // called as a read starts waiting; nil: none

	mu   sync.Mutex
	seq  uint64 // numbers every publish, across organizations
	orgs map[string]*orgWrites
	// seen records when writes were last found visible, by organization and scope (scope ""
	// for writes that name none), for ScopesFresh; pruned of entries older than seenHorizon.
	seen    map[seenKey]time.Time
	pruned  time.Time
	changed chan struct{} // closed and replaced on every Notify and every progress
	waiting int           // reads waiting now
}

type seenKey struct{ org, scope string }

// orgWrites is what one organization has in flight.
type orgWrites struct {
	pending  []pendingWrite // in publish order
	checking bool           // a goroutine is asking the store about them
	// unscoped counts the pending writes that name no scope (they may change anything of the
	// organization), scoped the others by scope key; writes found visible by a scoped wait are
	// no longer counted. A scoped read with nothing counted for it waits for nothing.
	unscoped int
	scoped   map[string]int
}

// pendingWrite is a message ID, or a trail that must be evaluated at a dirt generation (its
// messages were applied by a process that stopped before evaluating it).
type pendingWrite struct {
	seq    uint64
	id     string
	trail  string
	gen    int64
	scopes []string // what the write may change (see Published); none: anything of the organization
	// visible says a scoped wait found it visible: it stays in pending, in publish order, until
	// the oldest writes before it are settled, but no read waits for it.
	visible bool
}

// NewTracker builds a tracker. maxWait bounds every wait (then the read proceeds, possibly
// stale, and a warning is logged); poll is how often the store is asked when nobody calls
// Notify (the distributed mode, where the evaluator runs elsewhere). hurry, when not nil, is
// called each time a read starts waiting for writes: the embedded bus then hands the evaluator
// what it holds at once instead of letting it gather (sqlitebus Bus.Hurry). It must not block.
func NewTracker(vis Visibility, maxWait, poll time.Duration, log *slog.Logger, hurry func()) *Tracker {
	if poll <= 0 {
		poll = 5 * time.Millisecond
	}
	return &Tracker{vis: vis, maxWait: maxWait, poll: poll, log: log, hurry: hurry, orgs: map[string]*orgWrites{},
		seen: map[seenKey]time.Time{}, changed: make(chan struct{})}
}

// Published records that message id was published for org; the caller answers its client
// after this returns, so every read that starts after the answer waits for id. scopes name
// what the message may change (its trail's key, an artifact's fingerprint key, see
// contract.Envelope.Scopes): a read that depends only on other scopes of the organization
// (WaitScoped) does not wait for it. Without scopes it may change anything of the
// organization, and every read waits for it.
func (t *Tracker) Published(org, id string, scopes ...string) {
	t.add(org, pendingWrite{id: id, scopes: scopes})
}

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
	w.count(p, 1)
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

// ScopesFresh reports whether a read of scopes of org must not be answered from anything kept
// from before: writes it waits for (of those scopes, or of none) are not yet known to be
// visible, or some were found visible in the last d (at most seenHorizon). Writes to the
// organization's other scopes do not count.
func (t *Tracker) ScopesFresh(org string, scopes []string, d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := t.orgs[org]; w != nil && w.counts(scopes) {
		return true
	}
	now := time.Now()
	if at, ok := t.seen[seenKey{org, ""}]; ok && now.Sub(at) < d {
		return true
	}
	for _, sc := range scopes {
		if at, ok := t.seen[seenKey{org, sc}]; ok && now.Sub(at) < d {
			return true
		}
	}
	return false
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

// PendingIn reports whether org has writes of scope (of none, for scope "") not yet known to
// be visible.
func (t *Tracker) PendingIn(org, scope string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.orgs[org]
	switch {
	case w == nil:
		return false
	case scope == "":
		return w.unscoped > 0
	}
	return w.scoped[scope] > 0
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
	return t.wait(ctx, org, nil, func(w *orgWrites) bool { return true },
		func(upTo uint64) bool { return t.settle(ctx, org, upTo) })
}

// WaitScoped is Wait for a read that depends only on scopes of org (see Published): it waits
// for the writes published before the call that name one of scopes or name none, and not for
// the organization's other writes. It reports whether any such write was in flight.
func (t *Tracker) WaitScoped(ctx context.Context, org string, scopes []string) bool {
	return t.wait(ctx, org, scopes, func(w *orgWrites) bool { return w.counts(scopes) },
		func(upTo uint64) bool { return t.settleScoped(ctx, org, scopes, upTo) })
}

// wait is Wait and WaitScoped: when org has writes in flight that concern the read, it calls
// settled with the last publish before the call until it reports them visible, waking at every
// Notify or progress and every poll, for at most maxWait.
func (t *Tracker) wait(ctx context.Context, org string, scopes []string, concerns func(*orgWrites) bool,
	settled func(upTo uint64) bool) bool {
	t.mu.Lock()
	w := t.orgs[org]
	if w == nil || !concerns(w) {
		t.mu.Unlock()
		return false
	}
	upTo := t.seq
	t.waiting++
	t.mu.Unlock()
	if t.hurry != nil {
		t.hurry()
	}
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
		if settled(upTo) {
			return true
		}
		poll.Reset(t.poll)
		select {
		case <-ctx.Done():
			return true
		case <-deadline.C:
			t.log.WarnContext(ctx, TimedOut+"; serving the read anyway", "org", org, "scopes", scopes,
				"pending", t.Pending(org), "wait", t.maxWait)
			return true
		case <-changed:
		case <-poll.C:
		}
	}
}

// settleScoped asks the store about org's writes up to upTo that a read of scopes waits for,
// marks them visible when they all are, and reports whether none is left. Unlike settle, many
// scoped reads may ask at once: each asks about its own few writes.
func (t *Tracker) settleScoped(ctx context.Context, org string, scopes []string, upTo uint64) bool {
	t.mu.Lock()
	w := t.orgs[org]
	if w == nil {
		t.mu.Unlock()
		return true
	}
	var q visibilityQuery
	var seqs []uint64
	for _, p := range w.pending {
		if p.seq > upTo {
			break
		}
		if p.visible || !p.in(scopes) {
			continue
		}
		seqs = append(seqs, p.seq)
		q.add(p)
	}
	t.mu.Unlock()
	if len(seqs) == 0 {
		return true
	}
	if !t.visible(ctx, q) {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if w = t.orgs[org]; w == nil {
		return true // settled meanwhile
	}
	now := time.Now()
	for i := range w.pending { // the writes asked about that are still pending, in seq order
		p := &w.pending[i]
		for len(seqs) > 0 && seqs[0] < p.seq {
			seqs = seqs[1:] // settled and dropped meanwhile
		}
		if len(seqs) == 0 {
			break
		}
		if p.seq != seqs[0] {
			continue
		}
		seqs = seqs[1:]
		if !p.visible {
			p.visible = true
			w.count(*p, -1)
			t.sawScopes(org, p.scopes, now)
		}
	}
	t.broadcast()
	return true
}

// in reports whether a read of scopes waits for the write: it names one of them, or none.
func (p pendingWrite) in(scopes []string) bool {
	if len(p.scopes) == 0 {
		return true
	}
	for _, s := range p.scopes {
		for _, r := range scopes {
			if s == r {
				return true
			}
		}
	}
	return false
}

// count adds d to the counts of p's scopes (or to the unscoped writes).
func (w *orgWrites) count(p pendingWrite, d int) {
	if len(p.scopes) == 0 {
		w.unscoped += d
		return
	}
	if w.scoped == nil {
		w.scoped = map[string]int{}
	}
	for _, s := range p.scopes {
		if n := w.scoped[s] + d; n > 0 {
			w.scoped[s] = n
		} else {
			delete(w.scoped, s)
		}
	}
}

// counts reports whether a read of scopes has anything to wait for.
func (w *orgWrites) counts(scopes []string) bool {
	if w.unscoped > 0 {
		return true
	}
	for _, s := range scopes {
		if w.scoped[s] > 0 {
			return true
		}
	}
	return false
}

// sawScopes records that writes of scopes (none: an unscoped one) of org were found visible at
// now. The caller holds mu.
func (t *Tracker) sawScopes(org string, scopes []string, now time.Time) {
	if now.Sub(t.pruned) > time.Second { // once a second: a busy organization touches many scopes
		t.pruned = now
		for k, at := range t.seen {
			if now.Sub(at) > seenHorizon {
				delete(t.seen, k)
			}
		}
	}
	if len(scopes) == 0 {
		t.seen[seenKey{org, ""}] = now
	}
	for _, s := range scopes {
		t.seen[seenKey{org, s}] = now
	}
}

// seenHorizon is how long Tracker.seen remembers: longer than any window ScopesFresh is asked
// about (answers.AnnouncementLag).
const seenHorizon = 10 * time.Second

// TimedOut begins the warning logged when a read-after-write wait times out and the read is
// served without the writes it waited for (the fault harness counts these lines).
const TimedOut = "read-after-write wait timed out"

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
			for _, p := range w.pending[:len(w.pending)-keepPending] {
				if !p.visible {
					w.count(p, -1)
				}
			}
			w.pending = append([]pendingWrite(nil), w.pending[len(w.pending)-keepPending:]...)
			if w.pending[0].seq > upTo {
				t.mu.Unlock()
				return true
			}
		}
		var q visibilityQuery
		n := 0
		for _, p := range w.pending[:min(len(w.pending), pruneChunk)] {
			if p.seq > upTo {
				break
			}
			n++
			if !p.visible { // not found so by a scoped read already
				q.add(p)
			}
		}
		w.checking = true
		t.mu.Unlock()

		ok := t.visible(ctx, q)
		t.mu.Lock()
		w.checking = false
		if ok {
			t.forget(org, w, n)
		}
		t.mu.Unlock()
		if !ok {
			return false
		}
	}
}

// visibilityQuery is what to ask the store about some pending writes: the IDs of messages, and
// the trails that must be evaluated at a generation.
type visibilityQuery struct {
	ids  []string
	gens map[string]int64
}

func (q *visibilityQuery) add(p pendingWrite) {
	if p.trail == "" {
		q.ids = append(q.ids, p.id)
		return
	}
	if q.gens == nil {
		q.gens = map[string]int64{}
	}
	q.gens[p.trail] = max(q.gens[p.trail], p.gen)
}

// visible asks the store whether every write of q is visible; a failure to ask is logged and
// answered as not yet.
func (t *Tracker) visible(ctx context.Context, q visibilityQuery) bool {
	ok, err := t.vis.Visible(ctx, q.ids)
	if err == nil && ok && len(q.gens) > 0 {
		ok, err = t.vis.Evaluated(ctx, q.gens)
	}
	if err != nil {
		if ctx.Err() == nil {
			t.log.Warn("read-after-write: visibility check failed", "err", err)
		}
		return false
	}
	return ok
}

// forget removes the first n pending messages of org, found visible, and wakes the waiters.
// Only the goroutine checking org removes messages, and publishes only append, so the checked
// ones are still the first n. The caller holds mu.
func (t *Tracker) forget(org string, w *orgWrites, n int) {
	now := time.Now()
	for _, p := range w.pending[:n] {
		if !p.visible {
			w.count(p, -1)
			t.sawScopes(org, p.scopes, now)
		}
	}
	if n == len(w.pending) {
		delete(t.orgs, org)
	} else {
		clear(w.pending[:n]) // the array outlives them until the next append moves it
		w.pending = w.pending[n:]
	}
	t.broadcast()
}
