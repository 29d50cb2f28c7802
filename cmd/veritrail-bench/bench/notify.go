package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"
)

// NotifyTargetP99 is the brief's target: a snapshot change reaches a webhook in under 250 ms
// (embedded), at the 99th percentile.
const NotifyTargetP99 = 250 * time.Millisecond

// notifyEnv is the environment of the notify phase.
const notifyEnv = "notify-bench"

// Latency summarizes durations.
type Latency struct {
	Count int     `json:"count"`
	P50ms float64 `json:"p50_ms"`
	P90ms float64 `json:"p90_ms"`
	P99ms float64 `json:"p99_ms"`
	Maxms float64 `json:"max_ms"`
}

func latency(d []time.Duration) Latency {
	s := slices.Clone(d)
	slices.Sort(s)
	l := Latency{Count: len(s), P50ms: ms(percentile(s, 0.50)), P90ms: ms(percentile(s, 0.90)), P99ms: ms(percentile(s, 0.99))}
	if len(s) > 0 {
		l.Maxms = ms(s[len(s)-1])
	}
	return l
}

// NotifySettings are the effective settings of a notify run.
type NotifySettings struct {
	Reports          int `json:"reports"`
	ReportItems      int `json:"report_items"`
	RunningArtifacts int `json:"running_artifacts"`
	BodyBytes        int `json:"body_bytes"`
}

// NotifyResult is what RunNotify measured.
type NotifyResult struct {
	Machine  Machine        `json:"machine"`
	Settings NotifySettings `json:"settings"`
	// Report is each snapshot report's own time, from sending it to its 201: the baseline of
	// the same run.
	Report Latency `json:"report_to_201"`
	// Notify is the time from a report's 201 to the webhook receiving the trigger it fired.
	Notify      Latency `json:"201_to_webhook"`
	TargetP99ms float64 `json:"target_p99_ms"`
	TargetMet   bool    `json:"target_met"`
	// ProductLog counts the warnings and errors the product logged during the measured reports.
	ProductLog []LogCount `json:"product_log,omitempty"`
}

// arrival is a webhook request: the snapshot index of its trigger and when it arrived.
type arrival struct {
	index int
	at    time.Time
}

// startWebhookReceiver serves the webhook the rule posts to.
func startWebhookReceiver() (url string, got <-chan arrival, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, fmt.Errorf("bench: webhook receiver: %w", err)
	}
	ch := make(chan arrival, 4096)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		var p struct {
			Event struct {
				Snapshot *struct {
					Index int `json:"index"`
				} `json:"snapshot"`
			} `json:"event"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&p); err != nil || p.Event.Snapshot == nil {
			http.Error(w, "not a snapshot trigger", http.StatusBadRequest)
			return
		}
		ch <- arrival{index: p.Event.Snapshot.Index, at: at}
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/hook", ch, func() { _ = srv.Close() }, nil
}

// RunNotify measures how long a snapshot change takes to reach a webhook in the embedded
// product: one K8S environment, one rule on ON_STARTED_ARTIFACT with a webhook target, and
// reports sent one at a time, each rolling one deployment (one artifact starts). For each
// report it takes the time to the 201 and from the 201 to the webhook's receipt.
func RunNotify(ctx context.Context, cfg Config) (*NotifyResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	sets, running, err := k8sReports(cfg.SnapshotArtifacts)
	if err != nil {
		return nil, fmt.Errorf("bench: build reports: %w", err)
	}
	res := &NotifyResult{
		Machine: Machine{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
			OS: runtime.GOOS, Arch: runtime.GOARCH},
		Settings:    NotifySettings{Reports: cfg.NotifyReports, ReportItems: cfg.SnapshotArtifacts, RunningArtifacts: running, BodyBytes: len(sets[0])},
		TargetP99ms: ms(NotifyTargetP99),
	}
	hook, arrivals, stopHook, err := startWebhookReceiver()
	if err != nil {
		return nil, err
	}
	defer stopHook()
	pr, err := startProduct(ctx, Config{Concurrency: 1})
	if err != nil {
		return nil, err
	}
	defer pr.close()
	fmt.Fprintf(cfg.Progress, "bench: notify: embedded Veritrail on %s, K8S reports of %d pods (%d running artifacts), %d reports\n",
		pr.r.Addr, cfg.SnapshotArtifacts, running, cfg.NotifyReports)

	base, secret, client := pr.base+"/api/v2", pr.secret, pr.client
	body, _ := json.Marshal(map[string]any{"name": notifyEnv, "type": "K8S"})
	if err := callJSON(ctx, client, http.MethodPut, base+"/environments/"+benchOrg, secret, http.StatusCreated, body); err != nil {
		return nil, fmt.Errorf("bench: create environment: %w", err)
	}
	body, _ = json.Marshal(map[string]any{"name": "bench", "environments": []string{notifyEnv},
		"triggers": []string{"ON_STARTED_ARTIFACT"}, "targets": []map[string]any{{"type": "WEBHOOK", "webhook": hook, "secret": "bench"}}})
	if err := callJSON(ctx, client, http.MethodPost, base+"/organizations/"+benchOrg+"/environments_notifications", secret,
		http.StatusCreated, body); err != nil {
		return nil, fmt.Errorf("bench: create notification rule: %w", err)
	}
	reportURL := base + "/environments/" + benchOrg + "/" + notifyEnv + "/report/K8S"

	// The first report starts every artifact: wait for all of its triggers, then warm up.
	index := 0
	report := func(set []byte) (sent, answered time.Time, err error) {
		sent = time.Now()
		err = callJSON(ctx, client, http.MethodPut, reportURL, secret, http.StatusCreated, set)
		index++
		return sent, time.Now(), err
	}
	await := func(want, count int) (time.Time, error) {
		timeout := time.NewTimer(30 * time.Second)
		defer timeout.Stop()
		var last time.Time
		for count > 0 {
			select {
			case a := <-arrivals:
				if a.index == want {
					last = a.at
					count--
				}
			case <-timeout.C:
				return last, fmt.Errorf("bench: the webhook did not receive the triggers of snapshot %d within 30s", want)
			case <-ctx.Done():
				return last, ctx.Err()
			}
		}
		return last, nil
	}
	if _, _, err := report(sets[0]); err != nil {
		return nil, err
	}
	if _, err := await(index, running); err != nil {
		return nil, err
	}
	warmup := min(max(cfg.NotifyReports/10, 5), 50)
	for i := range warmup {
		if _, _, err := report(sets[(i+1)%2]); err != nil {
			return nil, err
		}
		if _, err := await(index, 1); err != nil {
			return nil, err
		}
	}

	pr.logs.reset()
	reportTimes := make([]time.Duration, 0, cfg.NotifyReports)
	notifyTimes := make([]time.Duration, 0, cfg.NotifyReports)
	for i := range cfg.NotifyReports {
		sent, answered, err := report(sets[(warmup+i+1)%2])
		if err != nil {
			return nil, err
		}
		at, err := await(index, 1)
		if err != nil {
			return nil, err
		}
		reportTimes = append(reportTimes, answered.Sub(sent))
		notifyTimes = append(notifyTimes, at.Sub(answered))
	}
	res.ProductLog = pr.logs.counts()
	res.Report, res.Notify = latency(reportTimes), latency(notifyTimes)
	res.TargetMet = res.Notify.Count > 0 && res.Notify.P99ms < res.TargetP99ms
	if res.Notify.Count == 0 {
		return res, errors.New("bench: no report was measured")
	}
	fmt.Fprintf(cfg.Progress, "bench: notify: 201 to webhook p50 %.1f ms, p99 %.1f ms\n", res.Notify.P50ms, res.Notify.P99ms)
	return res, nil
}

// WriteTable prints the notify result for people.
func (r *NotifyResult) WriteTable(w io.Writer) error {
	m, s := r.Machine, r.Settings
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %s %s/%s\n", m.NumCPU, m.GOMAXPROCS, m.GoVersion, m.OS, m.Arch)
	fmt.Fprintf(w, "reports: %d, one at a time, of %d pods (%d running artifacts, %d-byte bodies), each rolling one deployment;\n",
		s.Reports, s.ReportItems, s.RunningArtifacts, s.BodyBytes)
	fmt.Fprintf(w, "         a rule on ON_STARTED_ARTIFACT posts each start to a signed webhook on loopback\n\n")
	const row = "%-34s %8s %8s %8s %8s %6s\n"
	fmt.Fprintf(w, row, "", "p50 ms", "p90 ms", "p99 ms", "max ms", "n")
	for _, l := range []struct {
		name string
		Latency
	}{{"report sent to its 201 (baseline)", r.Report}, {"201 to the webhook's receipt", r.Notify}} {
		fmt.Fprintf(w, row, l.name, fmt.Sprintf("%.2f", l.P50ms), fmt.Sprintf("%.2f", l.P90ms), fmt.Sprintf("%.2f", l.P99ms),
			fmt.Sprintf("%.2f", l.Maxms), fmt.Sprint(l.Count))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	met := "yes"
	if !r.TargetMet {
		met = "NO"
	}
	fmt.Fprintf(tw, "p99 under %.0f ms\t%s\n", r.TargetP99ms, met)
	if err := tw.Flush(); err != nil {
		return err
	}
	writeProductLog(w, r.ProductLog)
	return nil
}
