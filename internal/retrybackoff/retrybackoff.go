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

// New returns waits that start at initial, double up to max, each randomized by Jitter, and
// never exceed max (the randomization would otherwise reach 1.5 max).
func New(initial, max time.Duration) backoff.BackOff {
	return &capped{
		b:   &backoff.ExponentialBackOff{InitialInterval: initial, RandomizationFactor: Jitter, Multiplier: 2, MaxInterval: max},
		max: max,
	}
}

type capped struct {
	b   *backoff.ExponentialBackOff
	max time.Duration
}

func (c *capped) NextBackOff() time.Duration { return min(c.b.NextBackOff(), c.max) }

func (c *capped) Reset() { c.b.Reset() }
