// Package health tells whether a process's dependencies work: the checks behind /ready (the
// client contract's, in ingest) and /readyz (every tier's), and the answers of /livez and
// /readyz.
package health

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Pinger is a dependency that can tell whether it works now: nil while it does. The store and
// the bus adapters implement it; the composition root hands them to the tiers as Checks.
type Pinger interface {
	Ping(ctx context.Context) error
}

// PingFunc makes a function a Pinger.
type PingFunc func(ctx context.Context) error

// Ping calls f.
func (f PingFunc) Ping(ctx context.Context) error { return f(ctx) }

// Check is a dependency readiness answers for, by name ("store", "bus", "migrations").
type Check struct {
	Name string
	Pinger
}

// Failure is a check that failed and how. The error itself is logged, not answered: it may
// hold addresses.
type Failure struct {
	Check  string `json:"check"`
	Reason string `json:"reason"` // ReasonFailed, ReasonTimeout, ReasonCanceled
}

// Reasons of a Failure.
const (
	ReasonFailed   = "failed"   // the ping returned an error (logged when the check starts failing)
	ReasonTimeout  = "timeout"  // the ping did not answer within the timeout
	ReasonCanceled = "canceled" // the probe ended before the pings answered
)

// Checker answers readiness from the dependencies' pings. A result is kept for a while (keep),
// and concurrent probes share one round of pings, so that many probes a second cost the
// dependencies one ping each. A ping that does not answer within the timeout counts as
// failed, and no new ping of that dependency starts while it is still running: a hung
// dependency holds one goroutine, not one per probe.
type Checker struct {
	checks  []Check
	keep    time.Duration
	timeout time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	at      time.Time       // when failing was found
	failing []Failure       // the checks that failed then
	round   chan struct{}   // closed when the round of pings under way ends; nil when none
	busy    map[string]bool // checks whose last ping has not returned yet
	down    map[string]bool // checks that failed in the last round (for logging changes)
}

// NewChecker returns a Checker of checks that keeps a result for keep and gives each ping
// timeout.
func NewChecker(checks []Check, keep, timeout time.Duration, log *slog.Logger) *Checker {
	return &Checker{checks: checks, keep: keep, timeout: timeout, log: log, busy: map[string]bool{}, down: map[string]bool{}}
}

// Failing returns the dependencies that do not work, from a result at most keep old, or from a
// new round of pings.
func (r *Checker) Failing(ctx context.Context) []Failure {
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
		return []Failure{{Check: "checks", Reason: ReasonCanceled}}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failing
}

// ping runs one round: every check at once, each given r.timeout.
func (r *Checker) ping(round chan struct{}) {
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
	var failing []Failure
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.checks {
		err, answered := errs[c.Name]
		reason := ReasonFailed
		if !answered {
			err, reason = fmt.Errorf("no answer within %v", r.timeout), ReasonTimeout
		}
		if err != nil {
			failing = append(failing, Failure{Check: c.Name, Reason: reason})
		}
		switch {
		case err != nil && !r.down[c.Name]:
			r.log.Warn("not ready", "dependency", c.Name, "err", err)
		case err == nil && r.down[c.Name]:
			r.log.Info("ready again", "dependency", c.Name)
		}
		r.down[c.Name] = err != nil
	}
	r.failing, r.at, r.round = failing, time.Now(), nil
	close(round)
}
