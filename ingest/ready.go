package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Pinger is a dependency that can tell whether it works now: nil while it does. The store and
// the bus adapters implement it; the composition root hands them to ingest as ReadyChecks.
type Pinger interface {
	Ping(ctx context.Context) error
}

// ReadyCheck is a dependency /ready answers for, by name ("store", "bus").
type ReadyCheck struct {
	Name string
	Pinger
}

// readiness answers /ready from the dependencies' pings. A result is kept for a while
// (Config.ReadyCache), and concurrent probes share one round of pings, so that many probes a
// second cost the dependencies one ping each. A ping that does not answer within
// Config.ReadyTimeout counts as failed, and no new ping of that dependency starts while it
// is still running: a hung dependency holds one goroutine, not one per probe.
type readiness struct {
	checks  []ReadyCheck
	keep    time.Duration
	timeout time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	at      time.Time       // when failing was found
	failing []string        // names of the checks that failed then
	round   chan struct{}   // closed when the round of pings under way ends; nil when none
	busy    map[string]bool // checks whose last ping has not returned yet
	down    map[string]bool // checks that failed in the last round (for logging changes)
}

func newReadiness(checks []ReadyCheck, keep, timeout time.Duration, log *slog.Logger) *readiness {
	return &readiness{checks: checks, keep: keep, timeout: timeout, log: log, busy: map[string]bool{}, down: map[string]bool{}}
}

// failingChecks returns the names of the dependencies that do not work, from a result at most
// keep old, or from a new round of pings.
func (r *readiness) failingChecks(ctx context.Context) []string {
	r.mu.Lock()
	if !r.at.IsZero() && time.Since(r.at) < r.keep {
		f := r.failing
		r.mu.Unlock()
		return f
	}
	if r.round == nil {
		r.round = make(chan struct{})
		go r.ping(r.round)
	}
	round := r.round
	r.mu.Unlock()
	select {
	case <-round:
	case <-ctx.Done():
		return []string{"checks"} // the prober gave up before the pings answered
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failing
}

// ping runs one round: every check at once, each given r.timeout.
func (r *readiness) ping(round chan struct{}) {
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(r.checks))
	started := 0
	r.mu.Lock()
	for _, c := range r.checks {
		if r.busy[c.Name] {
			continue // still in the ping of an earlier round; counted as failing below
		}
		r.busy[c.Name] = true
		started++
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
			defer cancel()
			err := c.Ping(ctx)
			r.mu.Lock()
			r.busy[c.Name] = false
			r.mu.Unlock()
			results <- result{c.Name, err}
		}()
	}
	r.mu.Unlock()

	errs := make(map[string]error, len(r.checks))
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
collect:
	for range started {
		select {
		case res := <-results:
			errs[res.name] = res.err
		case <-timer.C:
			break collect
		}
	}
	var failing []string
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.checks {
		err, answered := errs[c.Name]
		if !answered {
			err = fmt.Errorf("no answer within %v", r.timeout)
		}
		if err != nil {
			failing = append(failing, c.Name)
		}
		switch {
		case err != nil && !r.down[c.Name]:
			r.log.Warn("ingest: not ready", "dependency", c.Name, "err", err)
		case err == nil && r.down[c.Name]:
			r.log.Info("ingest: ready again", "dependency", c.Name)
		}
		r.down[c.Name] = err != nil
	}
	r.failing, r.at, r.round = failing, time.Now(), nil
	close(round)
}

// serveReady answers 200 OK while every dependency works, else 503 naming those that do not,
// with Retry-After; plain text either way, as before there were checks.
func (a *API) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if failing := a.ready.failingChecks(r.Context()); len(failing) > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryUnavailable))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "Not ready: %s unavailable", strings.Join(failing, ", "))
		return
	}
	_, _ = w.Write([]byte("OK"))
}

// serveLive answers 200 while the process serves HTTP at all: an orchestrator restarts a
// process that fails it, and only stops sending traffic to one that fails /ready.
func serveLive(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("OK"))
}
