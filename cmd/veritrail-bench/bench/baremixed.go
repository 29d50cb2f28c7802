package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// BareMixed is the mixed phase run on the baselines alone: readers of the bare GET while
// writers send the bare multipart handler, in the same server, half of what it takes back to
// back. It measures what the machine and the frameworks leave readers beside a write load at
// half capacity before Veritrail does any work: the ceiling of the product's mixed ratio.
type BareMixed struct {
	// WriteCapacity is the bare multipart rate with MixedWriters writers back to back, no reader.
	WriteCapacity float64 `json:"write_capacity_per_second"`
	// HalfRate, HalfCPU and HalfCores are the writers at half of WriteCapacity with no reader:
	// accepted a second, this process's CPU each (load generator included), cores busy.
	HalfRate  float64 `json:"half_writes_per_second"`
	HalfCPU   float64 `json:"half_cpu_us_per_request"`
	HalfCores float64 `json:"half_cores_busy"`
	// CapacityCPU is the CPU each while measuring WriteCapacity.
	CapacityCPU float64 `json:"capacity_cpu_us_per_request"`
	// Readers is the bare GET beside the writers at half; Ratio is its rate over the bare GET
	// alone (AssertResult.Bare).
	Readers Phase   `json:"bare_get_mixed"`
	Ratio   float64 `json:"mixed_over_bare"`
}

// runBareMixed measures BareMixed with writers writers and cfg's readers, and its ratio to
// alone, the bare GET's rate with no writer. getURLs spreads the reads over a server's URLs.
func runBareMixed(ctx context.Context, cfg Config, writers int, alone float64, getURLs func(base string) func(int) string) (BareMixed, error) {
	var res BareMixed
	addr, stop, err := serveBare(func(api huma.API) {
		registerBareGet(api)
		registerBareMultipart(api)
	})
	if err != nil {
		return res, err
	}
	defer stop()
	body, contentType, err := attestationBody(cfg.PayloadBytes)
	if err != nil {
		return res, err
	}
	base := "http://" + addr
	wclient, rclient := newClient(writers), newClient(cfg.Concurrency)
	defer wclient.CloseIdleConnections()
	defer rclient.CloseIdleConnections()
	write := &target{client: wclient, url: trailURLs(base, "bench", "bench", cfg.Trails), contentType: contentType,
		body: body, want: http.StatusCreated}
	read := &target{client: rclient, method: http.MethodGet, url: getURLs(base), contentType: "application/json; charset=utf-8",
		want: http.StatusOK}

	hammer(ctx, write, writers, cfg.Warmup, nil)
	capacity := hammer(ctx, write, writers, cfg.Duration, nil)
	if capacity.OK == 0 {
		return res, fmt.Errorf("bench: the bare multipart answered no request: %s", capacity.FirstErr)
	}
	res.WriteCapacity, res.CapacityCPU = capacity.PerSecond, capacity.CPUPerOK
	every := time.Duration(float64(writers) * float64(time.Second) / (res.WriteCapacity / 2))

	// The writers at half alone, then again with the readers beside them.
	pace(ctx, write, writers, every, cfg.Warmup)
	win := startCPUWindow()
	n, err := pace(ctx, write, writers, every, cfg.Duration)
	if err != nil {
		return res, err
	}
	var el time.Duration
	res.HalfCPU, res.HalfCores, el = win.per(n)
	res.HalfRate = float64(n) / el.Seconds()

	wctx, cancel := context.WithCancel(ctx)
	var werr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, werr = pace(wctx, write, writers, every, cfg.Warmup+cfg.Duration+time.Minute)
	}()
	hammer(ctx, read, cfg.Concurrency, cfg.Warmup, nil)
	res.Readers = hammer(ctx, read, cfg.Concurrency, cfg.Duration, nil)
	cancel()
	<-done
	if werr != nil {
		return res, werr
	}
	if res.Readers.OK == 0 {
		return res, fmt.Errorf("bench: the bare GET beside the writers answered no request: %s", res.Readers.FirstErr)
	}
	if alone > 0 {
		res.Ratio = res.Readers.PerSecond / alone
	}
	return res, ctx.Err()
}

// pace runs writers workers for d, each sending one request every tick of its own ticker, as
// the product's mixed-phase writers do, and answers how many were answered as expected. A
// cancelled ctx ends it early without an error; a failed request is one.
func pace(ctx context.Context, t *target, writers int, every, d time.Duration) (int64, error) {
	var ok atomic.Int64
	var mu sync.Mutex
	var first error
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for i := w; ; i += writers {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if _, err := t.do(ctx, w, i); err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						if first == nil {
							first = err
						}
						mu.Unlock()
					}
					return
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if first != nil {
		return ok.Load(), fmt.Errorf("bench: a bare writer: %w", first)
	}
	return ok.Load(), nil
}
