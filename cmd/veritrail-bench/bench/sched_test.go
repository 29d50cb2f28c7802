package bench

import (
	"math"
	"testing"
)

func TestLatencyOf(t *testing.T) {
	buckets := []float64{0, 0.001, 0.002, 0.004, math.Inf(1)}
	for _, c := range []struct {
		name          string
		counts        []uint64
		p50, p90, p99 float64
	}{
		{"all in the first bucket", []uint64{10, 0, 0, 0}, 1, 1, 1},
		{"a tail", []uint64{50, 40, 9, 1}, 1, 2, 4},
		{"the last bucket is open: its lower bound", []uint64{0, 0, 0, 5}, 4, 4, 4},
	} {
		got := latencyOf(c.counts, buckets)
		if got.P50ms != c.p50 || got.P90ms != c.p90 || got.P99ms != c.p99 {
			t.Errorf("%s: %+v; want p50 %v, p90 %v, p99 %v ms", c.name, got, c.p50, c.p90, c.p99)
		}
	}
	if got := latencyOf([]uint64{0, 0, 0, 0}, buckets); got.Count != 0 || got.P99ms != 0 {
		t.Errorf("no observation: %+v", got)
	}
}

func TestMarkSchedCounts(t *testing.T) {
	m := markSched()
	done := make(chan struct{})
	for range 100 {
		go func() { done <- struct{}{} }()
		<-done
	}
	if got := m.since(); got.Count == 0 {
		t.Errorf("no scheduling latency observed across 100 goroutines: %+v", got)
	}
}
