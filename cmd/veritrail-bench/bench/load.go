package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Phase is the outcome of one measured load phase.
type Phase struct {
	Requests  int     `json:"requests"`
	OK        int     `json:"ok"`
	Errors    int     `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"ok_per_second"`
	P50ms     float64 `json:"p50_ms"`
	P90ms     float64 `json:"p90_ms"`
	P99ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	// CPUPerOK is the CPU time the whole process (load generator included) used during the
	// phase per accepted request, in microseconds, and Cores that time over the phase's: a
	// measure of work done that the machine's neighbours disturb less than rates (0 where the
	// system cannot tell).
	CPUPerOK float64 `json:"cpu_us_per_ok"`
	Cores    float64 `json:"cores"`
}

// target is what the workers send: the same body to a path chosen round-robin, or, when
// perWorker is set, what it chooses for each worker.
type target struct {
	client      *http.Client
	method      string // empty: POST
	url         func(i int) string
	token       string // empty: no Authorization header
	contentType string
	body        []byte
	want        int
	perWorker   workerLoad
}

// workerLoad gives each worker its own stream of requests (the snapshot phases: one
// environment per worker, whose next body depends on what was accepted before) and hears of
// every accepted one.
type workerLoad interface {
	next(w int) (url string, body []byte)
	accepted(w int, sent, answered time.Time)
}

// newClient keeps one connection per worker alive, so the phases measure request handling
// and not TCP handshakes.
func newClient(concurrency int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        concurrency,
			MaxIdleConnsPerHost: concurrency,
			MaxConnsPerHost:     concurrency,
			DisableCompression:  true,
			IdleConnTimeout:     time.Minute,
		},
	}
}

func (t *target) do(ctx context.Context, w, i int) (int, error) {
	method := t.method
	if method == "" {
		method = http.MethodPost
	}
	var url string
	body := t.body
	if t.perWorker != nil {
		url, body = t.perWorker.next(w)
	} else {
		url = t.url(i)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	// The headers the Kosli CLI sends, so both phases parse the same request.
	req.Header.Set("Content-Type", t.contentType)
	req.Header.Set("User-Agent", "Kosli/v2.38.0")
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != t.want {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return resp.StatusCode, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// hammer runs concurrency workers, each sending requests back to back until d has passed.
// A request in flight at the deadline completes and counts, and the window is measured until
// the last one returns, so the rate is requests over the time actually spent. ok is
// incremented on every expected answer (the evaluator phase reads it while the load runs).
func hammer(ctx context.Context, t *target, concurrency int, d time.Duration, ok *atomic.Int64) Phase {
	type worker struct {
		lat      []time.Duration
		errs     int
		firstErr error
	}
	ws := make([]worker, concurrency)
	win := startCPUWindow()
	deadline := win.began.Add(d)
	var wg sync.WaitGroup
	for w := range ws {
		wg.Go(func() {
			me := &ws[w]
			me.lat = make([]time.Duration, 0, 4096)
			for i := w; ctx.Err() == nil && time.Now().Before(deadline); i += concurrency {
				t0 := time.Now()
				_, err := t.do(ctx, w, i)
				el := time.Since(t0)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					me.errs++
					if me.firstErr == nil {
						me.firstErr = err
					}
					continue
				}
				me.lat = append(me.lat, el)
				if t.perWorker != nil {
					t.perWorker.accepted(w, t0, t0.Add(el))
				}
				if ok != nil {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	answered := 0
	for _, w := range ws {
		answered += len(w.lat)
	}
	var p Phase
	var elapsed time.Duration
	p.CPUPerOK, p.Cores, elapsed = win.per(int64(answered)) // before gathering the latencies, which is not the phase's work
	var lat []time.Duration
	for _, w := range ws {
		lat = append(lat, w.lat...)
		p.Errors += w.errs
		if w.firstErr != nil && p.FirstErr == "" {
			p.FirstErr = w.firstErr.Error()
		}
	}
	p.OK = len(lat)
	p.Requests = p.OK + p.Errors
	p.Seconds, p.PerSecond = elapsed.Seconds(), float64(p.OK)/elapsed.Seconds()
	slices.Sort(lat)
	p.P50ms = ms(percentile(lat, 0.50))
	p.P90ms = ms(percentile(lat, 0.90))
	p.P99ms = ms(percentile(lat, 0.99))
	if len(lat) > 0 {
		p.MaxMs = ms(lat[len(lat)-1])
	}
	return p
}

// cpuWindow marks the start of a measured window: this process's CPU (processCPU) and the time.
type cpuWindow struct {
	cpu0  time.Duration
	ok    bool
	began time.Time
}

func startCPUWindow() cpuWindow {
	cpu, ok := processCPU()
	return cpuWindow{cpu0: cpu, ok: ok, began: time.Now()}
}

// per ends the window: the CPU each of n items took in microseconds and the cores busy (both 0
// when the system cannot tell, or with no item), and the window's length.
func (w cpuWindow) per(n int64) (each, cores float64, el time.Duration) {
	el = time.Since(w.began)
	cpu1, ok := processCPU()
	if !w.ok || !ok || n <= 0 {
		return 0, 0, el
	}
	return float64((cpu1 - w.cpu0).Microseconds()) / float64(n), (cpu1 - w.cpu0).Seconds() / el.Seconds(), el
}

// percentile is the nearest-rank percentile of sorted latencies.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// attestationBody is a generic attestation as the Kosli CLI sends it: one data_json part
// without a filename and without a content type. user_data is padded so that the whole body
// is size bytes (or the smallest possible body when size is smaller than that).
func attestationBody(size int) (body []byte, contentType string, err error) {
	build := func(pad int) ([]byte, string, error) {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		// A fixed boundary keeps the size exact across builds (a random one is the same length,
		// but fixed makes the two phases' bodies byte-identical).
		if err := w.SetBoundary("veritrail-bench-boundary-0123456789abcdef"); err != nil {
			return nil, "", err
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="data_json"`)
		pw, err := w.CreatePart(h)
		if err != nil {
			return nil, "", err
		}
		// The repository as the CLI sends it from a GitHub Actions run (CLIENT-2.md section 9).
		fmt.Fprintf(pw, `{"attestation_name":"smoke","is_compliant":true,"origin_url":"https://ci.example.com/run/1",`+
			`"repo_info":{"id":"704133918","name":"acme/payments","url":"https://github.com/acme/payments","provider":"github"},`+
			`"user_data":{"pad":"%s"}}`, strings.Repeat("x", pad))
		if err := w.Close(); err != nil {
			return nil, "", err
		}
		return buf.Bytes(), w.FormDataContentType(), nil
	}
	body, contentType, err = build(0)
	if err != nil || len(body) >= size {
		return body, contentType, err
	}
	return build(size - len(body))
}
