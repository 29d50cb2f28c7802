package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"text/tabwriter"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Observe is what metrics and tracing cost ingest alone (docs/PERFORMANCE.md). Ingest alone
// is measured on one prepared data directory with observability off, with metrics on, and with
// metrics and tracing on, one after the other in each round (A/B/C, A/B/C, ...), so that what
// the machine's neighbours do falls on all three alike.
type Observe struct {
	Settings Settings `json:"settings"`
	Rounds   int      `json:"rounds"`
	// Variants are the three settings, each with its runs in round order.
	Variants []ObserveVariant `json:"variants"`
}

// ObserveVariant is one setting of ingest's observability and its runs.
type ObserveVariant struct {
	Name    string  `json:"name"`
	Metrics bool    `json:"metrics"`
	Tracing bool    `json:"tracing"`
	Runs    []Phase `json:"runs"`
	// Median is the median rate of the runs, and VsOff that over the median with everything off.
	Median float64 `json:"median_ok_per_second"`
	VsOff  float64 `json:"median_over_off"`
	// CPUPerOK is the median CPU per accepted request (microseconds): less disturbed by the
	// machine's neighbours than the rate.
	CPUPerOK float64 `json:"median_cpu_us_per_ok"`
}

// observability is how ingest alone observes itself: the Prometheus metrics as the product
// registers them, and a tracer provider that samples every request and hands its spans to an
// exporter that discards them (through the batching processor an OTLP exporter runs behind).
type observability struct {
	metrics bool
	tracing trace.TracerProvider
}

// RunObserve measures Observe with cfg.Rounds rounds (default 3).
func RunObserve(ctx context.Context, cfg Config) (*Observe, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rounds := cfg.Rounds
	if rounds <= 0 {
		rounds = 3
	}
	body, contentType, err := attestationBody(cfg.PayloadBytes)
	if err != nil {
		return nil, fmt.Errorf("bench: build body: %w", err)
	}
	secret := "observe-" + benchOrg
	dir, err := preparedDir(ctx, cfg, "observe", secret)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	res := &Observe{Rounds: rounds, Settings: Settings{Duration: cfg.Duration.String(), Warmup: cfg.Warmup.String(),
		Concurrency: cfg.Concurrency, Trails: cfg.Trails, BodyBytes: len(body)},
		Variants: []ObserveVariant{{Name: "off"}, {Name: "metrics", Metrics: true}, {Name: "metrics+tracing", Metrics: true, Tracing: true}}}
	for round := range rounds {
		for i := range res.Variants {
			v := &res.Variants[i]
			o := observability{metrics: v.Metrics}
			var tp *sdktrace.TracerProvider
			if v.Tracing {
				tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				o.tracing = tp
			}
			runtime.GC() // each run from a clean heap: the previous run's garbage is not collected on its time
			addr, _, stop, err := startIngestAlone(ctx, dir, o)
			if err != nil {
				return nil, err
			}
			client := newClient(cfg.Concurrency)
			t := &target{client: client, url: trailURLs("http://"+addr, benchOrg, benchFlow, cfg.Trails), token: secret,
				contentType: contentType, body: body, want: 201}
			var accepted atomic.Int64
			hammer(ctx, t, cfg.Concurrency, cfg.Warmup, &accepted)
			p := hammer(ctx, t, cfg.Concurrency, cfg.Duration, &accepted)
			client.CloseIdleConnections()
			err = stop()
			if tp != nil {
				err = errors.Join(err, tp.Shutdown(ctx))
			}
			if err != nil {
				return nil, err
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			v.Runs = append(v.Runs, p)
			fmt.Fprintf(cfg.Progress, "bench: observability round %d/%d, %s: %.0f/s, %.0f us CPU per request\n",
				round+1, rounds, v.Name, p.PerSecond, p.CPUPerOK)
		}
	}
	for i := range res.Variants {
		v := &res.Variants[i]
		v.Median = median(v.Runs, func(p Phase) float64 { return p.PerSecond })
		v.CPUPerOK = median(v.Runs, func(p Phase) float64 { return p.CPUPerOK })
		if off := res.Variants[0].Median; off > 0 {
			v.VsOff = v.Median / off
		}
	}
	return res, nil
}

func median(runs []Phase, of func(Phase) float64) float64 {
	if len(runs) == 0 {
		return 0
	}
	xs := make([]float64, len(runs))
	for i, p := range runs {
		xs[i] = of(p)
	}
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

// WriteTable prints each setting's runs and medians.
func (r *Observe) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ingest alone, %d rounds of %s each (%d clients, %d-byte bodies)\n", r.Rounds, r.Settings.Duration,
		r.Settings.Concurrency, r.Settings.BodyBytes)
	fmt.Fprintln(tw, "setting\truns (ok/s)\tmedian ok/s\tvs off\tmedian CPU us/ok\tmedian p99 ms")
	for _, v := range r.Variants {
		runs := ""
		for i, p := range v.Runs {
			if i > 0 {
				runs += " "
			}
			runs += fmt.Sprintf("%.0f", p.PerSecond)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.3f\t%.0f\t%.2f\n", v.Name, runs, v.Median, v.VsOff, v.CPUPerOK,
			median(v.Runs, func(p Phase) float64 { return p.P99ms }))
	}
	return tw.Flush()
}
