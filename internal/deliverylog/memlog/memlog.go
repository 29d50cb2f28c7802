// Package memlog is an in-memory deliverylog.Log and deliverylog.Outcomes for tests. It keeps nothing
// across restarts, so it gives none of the guarantees the notify tier needs in production:
// the store's SQL implementation does.
package memlog

import (
	"context"
	"fmt"
	"github.com/veritrail/veritrail/internal/deliverylog"
	"sort"
	"sync"
	"time"
)

type state int

const (
	claimed state = iota
	delivered
	failed
)

type entry struct {
	deliverylog.Entry
	state      state
	leaseUntil time.Time
	failure    deliverylog.Failure
}

type target struct {
	org    string
	rule   int64
	target string
}

// Log is the in-memory delivery log. The zero value is not usable; call New.
type Log struct {
	mu       sync.Mutex
	entries  map[deliverylog.Key]*entry
	outcomes map[target]*deliverylog.TargetOutcome
}

var (
	_ deliverylog.Log      = (*Log)(nil)
	_ deliverylog.Outcomes = (*Log)(nil)
)

// New returns an empty log.
func New() *Log {
	return &Log{entries: map[deliverylog.Key]*entry{}, outcomes: map[target]*deliverylog.TargetOutcome{}}
}

// Claim implements deliverylog.Log.
func (l *Log) Claim(_ context.Context, e deliverylog.Entry, now time.Time, lease time.Duration) (deliverylog.ClaimState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.entries[e.Key]
	if !ok {
		l.entries[e.Key] = &entry{Entry: e, state: claimed, leaseUntil: now.Add(lease)}
		return deliverylog.Claimed, nil
	}
	switch {
	case cur.state == delivered:
		return deliverylog.AlreadyDelivered, nil
	case cur.state == failed:
		return deliverylog.AlreadyFailed, nil
	case now.Before(cur.leaseUntil):
		return deliverylog.InFlight, nil
	}
	cur.leaseUntil = now.Add(lease)
	return deliverylog.Claimed, nil
}

// RecordFailure implements deliverylog.Log.
func (l *Log) RecordFailure(_ context.Context, key deliverylog.Key, f deliverylog.Failure) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.entries[key]; !ok {
		return fmt.Errorf("memlog: no delivery %s", key)
	}
	l.failure(key, f)
	return nil
}

// MarkDelivered implements deliverylog.Log.
func (l *Log) MarkDelivered(_ context.Context, key deliverylog.Key, at time.Time, _ int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[key]
	if !ok {
		return fmt.Errorf("memlog: no delivery %s", key)
	}
	if e.state != claimed {
		return nil
	}
	e.state = delivered
	o := l.outcome(key)
	if at.After(o.LastSuccessAt) {
		o.LastSuccessAt = at
	}
	return nil
}

// MarkFailed implements deliverylog.Log.
func (l *Log) MarkFailed(_ context.Context, key deliverylog.Key, f deliverylog.Failure) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[key]
	if !ok {
		return fmt.Errorf("memlog: no delivery %s", key)
	}
	if e.state != claimed {
		return nil
	}
	e.state, e.failure = failed, f
	l.failure(key, f)
	return nil
}

// ListDeadLetters implements deliverylog.Log.
func (l *Log) ListDeadLetters(_ context.Context, org string, limit int) ([]deliverylog.DeadLetter, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []deliverylog.DeadLetter
	for _, e := range l.entries {
		if e.state == failed && e.Key.Org == org {
			out = append(out, deliverylog.DeadLetter{Entry: e.Entry, Failure: e.failure})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.After(out[j].At)
		}
		return out[i].Key.String() < out[j].Key.String()
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// TargetOutcomes implements deliverylog.Outcomes.
func (l *Log) TargetOutcomes(_ context.Context, org string, rule int64) ([]deliverylog.TargetOutcome, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []deliverylog.TargetOutcome
	for k, o := range l.outcomes {
		if k.org == org && k.rule == rule {
			out = append(out, *o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out, nil
}

func (l *Log) outcome(key deliverylog.Key) *deliverylog.TargetOutcome {
	k := target{key.Org, key.Rule, key.Target}
	o, ok := l.outcomes[k]
	if !ok {
		o = &deliverylog.TargetOutcome{Target: key.Target}
		l.outcomes[k] = o
	}
	return o
}

func (l *Log) failure(key deliverylog.Key, f deliverylog.Failure) {
	o := l.outcome(key)
	if f.At.After(o.LastFailureAt) {
		o.LastFailureAt, o.LastFailureReason, o.LastFailureMessage = f.At, f.Reason, f.Message
	}
}
