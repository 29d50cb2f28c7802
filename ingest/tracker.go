package ingest

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Visibility answers whether messages have been applied and evaluated.
type Visibility interface {
	Visible(ctx context.Context, ids []string) (bool, error)
}

// Tracker gives each API key read-your-writes: it remembers the messages a key published that
// the evaluator has not yet made visible, and lets that key's next request wait for them. A
// request from another client never waits for someone else's writes.
type Tracker struct {
	vis     Visibility
	maxWait time.Duration
	poll    time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	pending map[string][]string  // key ID -> message IDs
	seen    map[string]time.Time // key ID -> when some of its writes were last found visible
	changed chan struct{}        // closed and replaced on every Notify
}

// NewTracker builds a tracker. maxWait bounds every wait (then the read proceeds, possibly
// stale, and a warning is logged); poll is how often the store is asked when nobody calls
// Notify (the distributed mode, where the evaluator runs elsewhere).
func NewTracker(vis Visibility, maxWait, poll time.Duration, log *slog.Logger) *Tracker {
	if poll <= 0 {
		poll = 5 * time.Millisecond
	}
	return &Tracker{vis: vis, maxWait: maxWait, poll: poll, log: log, pending: map[string][]string{}, seen: map[string]time.Time{},
		changed: make(chan struct{})}
}

// Published records that key published message id.
func (t *Tracker) Published(key, id string) {
	t.mu.Lock()
	t.pending[key] = append(t.pending[key], id)
	n := len(t.pending[key])
	t.mu.Unlock()
	if n%pruneChunk == 0 {
		// A client that writes and never reads: drop what is already visible.
		t.prune(context.Background(), key)
	}
}

// Notify wakes waiters; the embedded evaluator calls it after each evaluation round.
func (t *Tracker) Notify() {
	t.mu.Lock()
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

// WritesFresh reports whether key has writes not yet known to be visible, or had some found
// visible in the last d: the reads that must not be answered from anything kept from before.
func (t *Tracker) WritesFresh(key string, d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.seen[key]
	return len(t.pending[key]) > 0 || (ok && time.Since(at) < d)
}

// Pending reports how many of key's messages are not yet known to be visible.
func (t *Tracker) Pending(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending[key])
}

// Wait blocks until every message key published is visible, the bound passes, or ctx ends.
func (t *Tracker) Wait(ctx context.Context, key string) {
	if t.Pending(key) == 0 {
		return
	}
	deadline := time.NewTimer(t.maxWait)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		changed := t.changed
		t.mu.Unlock()
		if t.prune(ctx, key) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			t.log.Warn("read-your-writes wait timed out; serving the read anyway", "key", key, "pending", t.Pending(key), "wait", t.maxWait)
			return
		case <-changed:
		case <-time.After(t.poll):
		}
	}
}

// maxSeen is the size from which forget drops the old entries of Tracker.seen.
const maxSeen = 4096

// pruneChunk bounds the IDs of one visibility query (SQLite allows 32766 parameters).
const pruneChunk = 256

// maxPending bounds what is remembered per key. A client that writes far faster than the
// evaluator applies, and never reads, loses the oldest entries: its later reads may then not
// wait for those writes. The list is cut back to keepPending, so that it is copied (and the
// loss logged) once every maxPending-keepPending writes rather than at every prune.
const (
	maxPending  = 100_000
	keepPending = maxPending * 3 / 4
)

// prune forgets key's messages that are visible, oldest first and a chunk at a time (messages
// are applied roughly in order), and reports whether none remain.
func (t *Tracker) prune(ctx context.Context, key string) bool {
	for {
		t.mu.Lock()
		list := t.pending[key]
		if len(list) > maxPending {
			t.log.Warn("read-your-writes: too many pending writes for one key; forgetting the oldest", "key", key, "dropped", len(list)-keepPending)
			list = append([]string(nil), list[len(list)-keepPending:]...)
			t.pending[key] = list
		}
		ids := append([]string(nil), list[:min(len(list), pruneChunk)]...)
		t.mu.Unlock()
		if len(ids) == 0 {
			return true
		}
		ok, err := t.vis.Visible(ctx, ids)
		if err != nil {
			t.log.Warn("read-your-writes: visibility check failed", "err", err)
			return false
		}
		if !ok {
			return false
		}
		if t.forget(key, ids) {
			return true
		}
	}
}

// forget removes exactly the checked IDs (another waiter of the same key may have removed some
// already, and more may have been published meanwhile) and reports whether none remain.
func (t *Tracker) forget(key string, ids []string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	checked := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		checked[id] = struct{}{}
	}
	now := time.Now()
	if len(t.seen) >= maxSeen { // keys that wrote long ago need no entry
		for k, at := range t.seen {
			if now.Sub(at) > time.Minute {
				delete(t.seen, k)
			}
		}
	}
	t.seen[key] = now
	rest := t.pending[key][:0:0]
	for _, id := range t.pending[key] {
		if _, ok := checked[id]; !ok {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		delete(t.pending, key)
		return true
	}
	t.pending[key] = rest
	return false
}
