package retrybackoff

import (
	"testing"
	"time"
)

// TestBounds: each wait lies within Jitter of the doubling sequence from initial, capped at
// max, and Reset starts the sequence again.
func TestBounds(t *testing.T) {
	const initial, max = 100 * time.Millisecond, 2 * time.Second
	b := New(initial, max)
	distinct := map[time.Duration]bool{}
	for round := range 50 {
		nominal := initial
		for i := range 8 {
			got := b.NextBackOff()
			lo, hi := time.Duration(float64(nominal)*(1-Jitter)), min(time.Duration(float64(nominal)*(1+Jitter))+1, max)
			if got < lo || got > hi {
				t.Fatalf("round %d, wait %d = %s, want within [%s, %s]", round, i, got, lo, hi)
			}
			distinct[got] = true
			nominal = min(2*nominal, max)
		}
		b.Reset()
	}
	if got := New(time.Hour, time.Second).NextBackOff(); got < 30*time.Minute || got > time.Hour {
		t.Fatalf("limit below initial: first wait %s, want within [30m, 1h]", got)
	}
	if len(distinct) < 100 {
		t.Fatalf("%d distinct waits in 400: the waits are not randomized", len(distinct))
	}
}
