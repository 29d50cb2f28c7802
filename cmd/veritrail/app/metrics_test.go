package app

import (
	"context"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/veritrail/veritrail/ingest/limits"
	"github.com/veritrail/veritrail/internal/contract"
)

// scraped are the values of one scrape of every tier, by series: the metric name and its
// labels as name{a="x",b="y"} (labels sorted, as the exposition writes them).
type scraped map[string]float64

// scrape reads /metrics of every tier of e, summed over the tiers.
func scrape(t *testing.T, e env) scraped {
	t.Helper()
	all := scraped{}
	for tierName, base := range e.tiers {
		resp, err := http.Get(base + metricsPath)
		if err != nil {
			t.Fatalf("scrape %s: %v", tierName, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("parse the scrape of %s: %v", tierName, err)
		}
		if families["go_goroutines"] == nil || families["process_cpu_seconds_total"] == nil {
			t.Fatalf("%s: no Go runtime or process metrics", tierName)
		}
		for name, f := range families {
			for _, m := range f.GetMetric() {
				all[series(name, m)] += value(m)
			}
		}
	}
	return all
}

func series(name string, m *dto.Metric) string {
	var labels []string
	for _, l := range m.GetLabel() {
		labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
	}
	return name + "{" + strings.Join(labels, ",") + "}"
}

// value is a counter's or gauge's value, or a histogram's count of observations.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// TestMetricsCountAnEndToEndRun: after a report that fires two rules (one receiver accepts,
// one refuses for good), each mode's /metrics moved by exactly what happened: the report's
// request, the evidence messages published and applied, the template evaluated, one delivery
// and one dead letter with the SDK's reason.
func TestMetricsCountAnEndToEndRun(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		notifyFixture(t, k)
		hook, gone := newReceiver(t), newReceiver(t)
		gone.status.Store(http.StatusNotFound)
		createRule(t, k, map[string]any{"name": "ok", "environments": []string{"prod"}, "triggers": []string{"ON_STARTED_ARTIFACT"},
			"targets": []map[string]any{{"type": "WEBHOOK", "webhook": hook.url}}})
		createRule(t, k, map[string]any{"name": "refused", "environments": []string{"prod"}, "triggers": []string{"ON_STARTED_ARTIFACT"},
			"targets": []map[string]any{{"type": "WEBHOOK", "webhook": gone.url}}})
		published := `veritrail_bus_messages_published_total{topic="` + contract.TopicEvidence + `"}`
		applied := `veritrail_evaluator_messages_applied_total{}`
		// Everything before the report applied, so that the differences below are the report's.
		eventually(t, "the fixture applied", func() bool {
			s := scrape(t, e)
			return s[published] > 0 && s[applied] == s[published]
		})
		before := scrape(t, e)

		reportProd(t, k, k8sItem("web-1", map[string]string{"web": fpWeb}, 100))
		next(t, hook.got, "the delivery")
		eventually(t, "a dead letter", func() bool {
			return len(k.get(notificationsPath+"/2/dead_letters").want(t, http.StatusOK).Array(t)) == 1
		})
		// The receiver saw the delivery before notify settled it: wait for the counts to get there
		// (they only grow), then check they went no further.
		delivered := `veritrail_notify_deliveries_total{notifier="webhook",outcome="delivered",reason=""}`
		deadLetters := `veritrail_notify_dead_letters_total{notifier="webhook"}`
		var after scraped
		eventually(t, "the report applied and its deliveries settled", func() bool {
			after = scrape(t, e)
			return after[applied] == after[published] && after[published] > before[published] &&
				after[delivered] > before[delivered] && after[deadLetters] > before[deadLetters]
		})

		delta := func(series string) float64 { return after[series] - before[series] }
		want := map[string]float64{
			`veritrail_http_requests_total{operation="reportSnapshot",status_class="2xx"}`:           1,
			`veritrail_http_request_duration_seconds{operation="reportSnapshot",status_class="2xx"}`: 1,
			published: 1,
			applied:   1,
			`veritrail_notify_deliveries_total{notifier="webhook",outcome="delivered",reason=""}`:               1,
			`veritrail_notify_deliveries_total{notifier="webhook",outcome="failed",reason="client_error"}`:      1,
			`veritrail_notify_deliveries_total{notifier="webhook",outcome="dead_letter",reason="client_error"}`: 1,
			`veritrail_notify_dead_letters_total{notifier="webhook"}`:                                           1,
		}
		for s, n := range want {
			if d := delta(s); d != n {
				t.Errorf("%s moved by %v, want %v", s, d, n)
			}
		}
		// The trigger the evaluator wrote went through the bus to notify.
		if d := delta(`veritrail_bus_messages_published_total{topic="` + contract.TopicTriggers + `"}`); d < 1 {
			t.Errorf("triggers published moved by %v, want at least 1", d)
		}
		if after[`veritrail_evaluator_policy_evaluations_total{kind="flow_template"}`] < 1 {
			t.Errorf("no flow template evaluation counted")
		}
		if after[`veritrail_http_request_body_bytes_total{}`] <= before[`veritrail_http_request_body_bytes_total{}`] {
			t.Errorf("request body bytes did not move")
		}
		if _, distributed := e.tiers["evaluate"]; distributed {
			// The evaluators' lag per partition of the evidence topic (4 here) falls to 0 once
			// their positions are recorded.
			eventually(t, "the lag of every partition at 0", func() bool {
				parts, lag := 0, 0.0
				for s, v := range scrape(t, e) {
					if strings.HasPrefix(s, "veritrail_evaluator_consumer_lag_messages{") {
						parts++
						lag += v
					}
				}
				return parts == 4 && lag == 0
			})
		} else if _, ok := after["veritrail_evaluator_backlog_messages{}"]; !ok {
			t.Error("no backlog gauge")
		}
		for s := range after {
			if strings.Contains(s, testOrg) || strings.Contains(s, fpWeb) {
				t.Errorf("a series is labelled with an organization or fingerprint: %s", s)
			}
		}
	})
}

// TestMetricsCountRefusalsAndWaits: a request over the API key's rate limit counts as a
// refusal of that scope (and as a 4xx of its operation), and a read right after a write waits
// for it and counts a read-your-writes wait while the evaluator is held.
func TestMetricsCountRefusalsAndWaits(t *testing.T) {
	clock := newTestClock()
	release := make(chan struct{})
	cfg := baseConfig()
	cfg.Now = clock.Now
	cfg.Ingest.Limits = limits.Limits{KeyRate: 1, KeyBurst: 3}
	cfg.holdEvaluator = release
	cfg.DataDir = t.TempDir()
	r, err := StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	e := env{tiers: map[string]string{"serve": "http://" + r.Addr}}
	k := newKosli(t, "http://"+r.Addr+"/api/v2", testToken)
	before := scrape(t, e)
	// One write, then a read of it while the evaluator is held: the read waits until released.
	k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "app", "description": ""},
		file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)
	read := make(chan reply, 1)
	go func() { read <- k.get("/flows/" + testOrg + "/app") }()
	eventually(t, "the read waiting", func() bool { return r.API.Tracker().Waiting() == 1 })
	close(release)
	(<-read).want(t, http.StatusOK)
	// The burst of 3 is spent (a write and a read); the next request is refused.
	k.get("/flows/"+testOrg+"/app").want(t, http.StatusOK)
	k.get("/flows/"+testOrg+"/app").want(t, http.StatusTooManyRequests)
	after := scrape(t, e)
	for s, n := range map[string]float64{
		`veritrail_ingest_refusals_total{scope="rate_key"}`:                     1,
		`veritrail_ingest_read_your_writes_waits_total{}`:                       1,
		`veritrail_ingest_read_your_writes_wait_duration_seconds{}`:             1,
		`veritrail_http_requests_total{operation="getFlow",status_class="4xx"}`: 1,
	} {
		if d := after[s] - before[s]; d != n {
			t.Errorf("%s moved by %v, want %v", s, d, n)
		}
	}
}
