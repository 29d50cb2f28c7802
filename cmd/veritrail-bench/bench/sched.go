package bench

import (
	"math"
	"runtime/metrics"
	"slices"
)

// SchedLatency is how long goroutines of this process waited to run once ready during a phase
// (runtime/metrics /sched/latencies:seconds), in milliseconds: a read's round trip is several
// such waits (client, server, handler, client), so when the cores are shared with ingest and the
// evaluator its tail is this queue's.
type SchedLatency struct {
	Count uint64  `json:"count"`
	P50ms float64 `json:"p50_ms"`
	P90ms float64 `json:"p90_ms"`
	P99ms float64 `json:"p99_ms"`
}

// schedMark is the scheduler's latency histogram at a moment; since measures from it.
type schedMark struct{ counts []uint64 }

const schedLatencies = "/sched/latencies:seconds"

func markSched() schedMark {
	s := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return schedMark{}
	}
	return schedMark{counts: slices.Clone(s[0].Value.Float64Histogram().Counts)}
}

// since is the latencies observed after m.
func (m schedMark) since() SchedLatency {
	s := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return SchedLatency{}
	}
	h := s[0].Value.Float64Histogram()
	delta := slices.Clone(h.Counts)
	for i := range min(len(delta), len(m.counts)) {
		delta[i] -= m.counts[i]
	}
	return latencyOf(delta, h.Buckets)
}

// latencyOf summarises a histogram of counts in buckets (len(buckets) = len(counts)+1, in
// seconds): each quantile is the upper bound of the bucket it falls in.
func latencyOf(counts []uint64, buckets []float64) SchedLatency {
	var out SchedLatency
	for _, c := range counts {
		out.Count += c
	}
	if out.Count == 0 {
		return out
	}
	quantile := func(q float64) float64 {
		want := uint64(math.Ceil(q * float64(out.Count)))
		var seen uint64
		for i, c := range counts {
			seen += c
			if seen >= want {
				upper := buckets[i+1]
				if math.IsInf(upper, 1) {
					upper = buckets[i]
				}
				return upper * 1000
			}
		}
		return math.NaN()
	}
	out.P50ms, out.P90ms, out.P99ms = quantile(0.5), quantile(0.9), quantile(0.99)
	return out
}
