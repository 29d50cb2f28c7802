package evaluate

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

// startedRejudges are the artifacts snapshots started in environments with policies, to be
// judged again once the transactions beside those snapshots have ended, on a store whose
// writers run beside each other (PostgreSQL).
//
// A save of a trail's evaluation judges its artifacts again, in its own transaction, in every
// environment with policies where the running index says they run (afterTrails). A snapshot
// that starts an artifact beside that save is not in the index until it commits, so the save
// does not judge it there; and the snapshot may have judged it from the evidence before the
// save. Its verdict, which assert reads, would stay so until the environment's next changed
// snapshot. Judging the started artifacts again (afterTrails once more) after every
// transaction in flight at the snapshot's commit has ended reads the save's evidence.
// What is pending lives in memory: an evaluator that dies first leaves the verdict to the
// environment's next changed snapshot, which takes the artifact anew (settleMarks).
type startedRejudges struct {
	mu      sync.Mutex
	pending map[string]map[string]bool // organization -> fingerprints
	wake    chan struct{}
}

func newStartedRejudges() *startedRejudges {
	return &startedRejudges{pending: map[string]map[string]bool{}, wake: make(chan struct{}, 1)}
}

// add has fps of org judged again.
func (r *startedRejudges) add(org string, fps []string) {
	r.mu.Lock()
	if r.pending[org] == nil {
		r.pending[org] = map[string]bool{}
	}
	for _, fp := range fps {
		r.pending[org][fp] = true
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// take answers what is pending, by organization, and forgets it.
func (r *startedRejudges) take() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]string, len(r.pending))
	for org, fps := range r.pending {
		out[org] = slices.Sorted(maps.Keys(fps))
	}
	clear(r.pending)
	return out
}

// rejudgeAwait bounds the wait for the transactions in flight: a transaction open that long is
// not a save of an evaluation, and judging again without it is what can be done.
const rejudgeAwait = 30 * time.Second

// rejudgeRetry is the pause before judging again what a failed transaction did not.
const rejudgeRetry = 100 * time.Millisecond

// runRejudges judges the started artifacts again as they come, until ctx ends.
func (e *Evaluator) runRejudges(ctx context.Context, r *startedRejudges) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		fps := r.take()
		if len(fps) == 0 {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, rejudgeAwait)
		err := e.d.Store.AwaitTransactionsInFlight(wctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			e.d.Log.Warn("evaluate: waiting for the transactions beside a snapshot failed; judging its started artifacts again now", "err", err)
		}
		err = e.d.Store.Update(ctx, func(tx store.Tx) error {
			if err := tx.GiveWay(ctx); err != nil {
				return err
			}
			// As a save does: readers that keep answers about these artifacts drop them.
			if err := tx.Announce(ctx, nil, fps); err != nil {
				return err
			}
			return e.policies.afterTrails(ctx, tx, fps, e.now())
		})
		switch {
		case err == nil:
			e.notify(nil, fps)
		case ctx.Err() != nil:
			return
		default:
			if !errors.Is(err, store.ErrBusy) {
				e.d.Log.Warn("evaluate: judging started artifacts again failed; will retry", "err", err)
			}
			t := time.NewTimer(rejudgeRetry) // what comes meanwhile joins the retry
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			for org, list := range fps {
				r.add(org, list)
			}
		}
	}
}
