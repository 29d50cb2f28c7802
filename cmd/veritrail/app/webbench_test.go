package app

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkWebPage times the web UI's heaviest pages on the embedded mode, signed in with a
// bearer key, one request at a time: a trail with 200 attestations, an environment running
// 1,000 artifacts (one pod each) judged by a policy, and that policy's page comparing its two
// versions as written and as compiled. Besides the mean (ns/op) it reports the 50th and 99th
// percentile of the answer times; the bound is 50 ms p99 (numbers in
// docs/PERFORMANCE.md).
//
//	go test -run x -bench WebPage -benchtime 300x ./cmd/veritrail/app
func BenchmarkWebPage(b *testing.B) {
	e := startEmbeddedWith(b, baseConfig())
	k := newKosli(b, e.base+"/api/v2", testToken)
	p := policyKit{b, k}
	p.flow("big")
	fp := fingerprint("aa")
	p.artifact("big", "t1", fp, "big:1")
	for i := range 200 {
		p.attest("big", "t1", "generic", fmt.Sprintf("check-%03d", i), fp, map[string]any{"is_compliant": i%7 != 0})
	}
	p.env("large")
	rule := policySchema + "artifacts:\n  attestations:\n    - name: check-000\n      type: generic\n"
	p.policy("large-policy", rule, http.StatusCreated)
	p.policy("large-policy", rule+"    - name: check-001\n      type: generic\n", http.StatusOK)
	p.attach("large", "large-policy").want(b, http.StatusOK)
	items := make([]map[string]any, 1000)
	for i := range items {
		items[i] = map[string]any{"digests": map[string]string{fmt.Sprintf("svc-%04d:1", i): fmt.Sprintf("%064x", i+1)},
			"creationTimestamp": 1700000000 + i, "podName": fmt.Sprintf("svc-%04d-7d9f", i), "namespace": "shop"}
	}
	k.send(http.MethodPut, "/environments/"+testOrg+"/large/report/server", map[string]any{"artifacts": items}).want(b, http.StatusCreated)

	client := &http.Client{}
	for _, page := range []struct{ name, path, want string }{
		{"trail-200-attestations", "/" + testOrg + "/flows/big/trails/t1", "check-199"},
		{"environment-1000-artifacts", "/" + testOrg + "/environments/large", "1000 artifacts"},
		{"policy-diff", "/" + testOrg + "/policies/large-policy?from=1&to=2", "The Rego it compiles to"},
	} {
		b.Run(page.name, func(b *testing.B) {
			var times []time.Duration
			size := 0
			for b.Loop() {
				req, err := http.NewRequest(http.MethodGet, e.base+page.path, nil)
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+testToken)
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				times = append(times, time.Since(start))
				if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), page.want) {
					b.Fatalf("%s: %d, %v", page.path, resp.StatusCode, err)
				}
				size = len(body)
			}
			slices.Sort(times)
			pct := func(q float64) float64 {
				return float64(times[min(len(times)-1, int(q*float64(len(times))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(size)/1024, "KB/page")
		})
	}
}
