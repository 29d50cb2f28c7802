package consistency

import (
	"context"
	"sync"
	"time"
)

// sharedQuery runs one query for many waiters: each asks for an answer from a query that started
// after a time of its choosing, and gets the latest one if it did (waiting for it while it is
// under way), or else starts one that those asking after it share. Reads that would each ask
// the store or the bus at once ask once.
type sharedQuery[T any] struct {
	mu   sync.Mutex
	last *queryRound[T]
}

// queryRound is one run of the query.
type queryRound[T any] struct {
	start time.Time     // when it was sent (monotonic)
	done  chan struct{} // closed when it answered
	val   T
	err   error
}

// sharedQueryTimeout bounds a run: it does not end with the context of the waiter that started
// it, since others share it.
const sharedQueryTimeout = 10 * time.Second

// get returns a run that started after after.
func (q *sharedQuery[T]) get(ctx context.Context, after time.Time, run func(context.Context) (T, error)) (*queryRound[T], error) {
	q.mu.Lock()
	r := q.last
	if r == nil || !r.start.After(after) || (isClosed(r.done) && r.err != nil) {
		r = &queryRound[T]{start: time.Now(), done: make(chan struct{})}
		q.last = r
		q.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedQueryTimeout)
		r.val, r.err = run(rctx)
		cancel()
		close(r.done)
		return r, r.err
	}
	q.mu.Unlock()
	select {
	case <-r.done:
		return r, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// idle reports whether the latest run answered before since (or none ran): nobody used it lately.
func (q *sharedQuery[T]) idle(since time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.last == nil || (isClosed(q.last.done) && q.last.start.Before(since))
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
