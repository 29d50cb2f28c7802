package consistency

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/veritrail/veritrail/internal/store"
)

// scopeAsks asks the store which scopes other processes hold for the reads of one organization,
// one query for the reads that arrive while another is under way: they join the next query,
// which asks for the union of their scopes and is sent when the one under way answers. So every
// read still gets its answer from a query sent after the read started (it sees every scope
// recorded before a write was answered, with no notice period for new scopes), and a busy
// process sends one query at a time per organization instead of one per read.
type scopeAsks struct {
	mu     sync.Mutex
	asking bool        // a query is under way
	next   *scopeRound // the query the reads arriving now join; nil until one does
}

// scopeRound is one query and the reads that share it.
type scopeRound struct {
	scopes map[string]struct{} // the union of its reads' scopes; fixed once sent
	done   chan struct{}       // closed when it answered
	held   []store.InFlightScope
	err    error
}

// ask returns what the store answered for a query, sent after the call, that asked at least for
// scopes. run asks the store; it gets a context of its own, since the query is shared.
func (a *scopeAsks) ask(ctx context.Context, scopes []string, run func(context.Context, []string) ([]store.InFlightScope, error)) ([]store.InFlightScope, error) {
	a.mu.Lock()
	r := a.next
	if r == nil {
		r = &scopeRound{scopes: make(map[string]struct{}, len(scopes)), done: make(chan struct{})}
		a.next = r
	}
	for _, sc := range scopes {
		r.scopes[sc] = struct{}{}
	}
	send := !a.asking
	if send {
		a.asking, a.next = true, nil
	}
	a.mu.Unlock()
	if send {
		// This read sends its own round; the rounds that gather meanwhile go on without it.
		a.send(ctx, r, run)
		if r := a.following(); r != nil {
			go a.sendAll(ctx, r, run)
		}
	}
	select {
	case <-r.done:
		return r.held, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// send runs round r's query and wakes its reads.
func (a *scopeAsks) send(ctx context.Context, r *scopeRound, run func(context.Context, []string) ([]store.InFlightScope, error)) {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedQueryTimeout)
	r.held, r.err = run(qctx, slices.Collect(maps.Keys(r.scopes)))
	cancel()
	close(r.done)
}

// following takes the round gathered while one was under way, or says none is asking any more.
func (a *scopeAsks) following() *scopeRound {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.next
	a.next = nil
	a.asking = r != nil
	return r
}

// sendAll sends r and then each round that gathers while the one before is under way.
func (a *scopeAsks) sendAll(ctx context.Context, r *scopeRound, run func(context.Context, []string) ([]store.InFlightScope, error)) {
	for ; r != nil; r = a.following() {
		a.send(ctx, r, run)
	}
}
