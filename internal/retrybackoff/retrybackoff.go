// Package retrybackoff is the wait between attempts that Veritrail's retry loops share (the
// batch and keyed consumers, the embedded bus's journal mover, the store's change listener,
// the trigger relay): cenkalti/backoff's exponential backoff, doubling from an initial wait,
// with ±50% jitter so that processes failing together (a database restarting) do not retry in
// step, and never longer than a maximum.
package retrybackoff

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Jitter is how far a wait may stray from the doubling sequence, as a fraction of it.
const Jitter = 0.5

// New returns waits that start at initial, double up to limit, each randomized by Jitter, and
// never exceed limit (the randomization would otherwise reach 1.5 limit). A limit below initial
// is taken as initial: the loops this replaced waited initial first whatever their maximum.
func New(initial, limit time.Duration) backoff.BackOff {
	limit = max(limit, initial)
	return &capped{
		b:     &backoff.ExponentialBackOff{InitialInterval: initial, RandomizationFactor: Jitter, Multiplier: 2, MaxInterval: limit},
		limit: limit,
	}
}

type capped struct {
	b     *backoff.ExponentialBackOff
	limit time.Duration
}

func (c *capped) NextBackOff() time.Duration { return min(c.b.NextBackOff(), c.limit) }

func (c *capped) Reset() { c.b.Reset() }
