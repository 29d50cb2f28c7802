package app

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWebUIPageTimes measures the web UI's two heaviest pages on the embedded mode: a trail
// with 200 attestations and an environment running 1,000 artifacts judged by a policy, each
// fetched VERITRAIL_WEB_BENCH times (signed in with a bearer key, one request at a time). It
// logs the 50th and 99th percentile of the answer times (the bound is 50 ms p99; the
// numbers are in docs/PERFORMANCE.md). It asserts no time: it runs only when asked.
//
//	VERITRAIL_WEB_BENCH=300 go test -run TestWebUIPageTimes -v ./cmd/veritrail/app
func TestWebUIPageTimes(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("VERITRAIL_WEB_BENCH"))
	if n <= 0 {
		t.Skip("set VERITRAIL_WEB_BENCH to the number of requests per page")
	}
	e := startEmbeddedWith(t, baseConfig())
	k := newKosli(t, e.base+"/api/v2", testToken)
	p := policyKit{t, k}
	p.flow("big")
	fp := fingerprint("aa")
	p.artifact("big", "t1", fp, "big:1")
	for i := range 200 {
		p.attest("big", "t1", "generic", fmt.Sprintf("check-%03d", i), fp, map[string]any{"is_compliant": i%7 != 0})
	}
	p.env("large")
	p.policy("large-policy", policySchema+"artifacts:\n  attestations:\n    - name: check-000\n      type: generic\n", http.StatusCreated)
	p.attach("large", "large-policy").want(t, http.StatusOK)
	running := make(map[string]string, 1000)
	for i := range 1000 {
		running[fmt.Sprintf("svc-%04d:1", i)] = fmt.Sprintf("%064x", i+1)
	}
	p.report("large", running)

	client := &http.Client{}
	for _, page := range []struct{ name, path, want string }{
		{"trail with 200 attestations", "/" + testOrg + "/flows/big/trails/t1", "check-199"},
		{"environment with 1,000 artifacts", "/" + testOrg + "/environments/large", "1000 artifacts"},
	} {
		times := make([]time.Duration, 0, n)
		size := 0
		for range n {
			req, err := http.NewRequest(http.MethodGet, e.base+page.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			times = append(times, time.Since(start))
			if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), page.want) {
				t.Fatalf("%s: %d, %v", page.path, resp.StatusCode, err)
			}
			size = len(body)
		}
		slices.Sort(times)
		pct := func(q float64) time.Duration { return times[min(len(times)-1, int(q*float64(len(times))))] }
		t.Logf("%s: %d requests, %d KB, p50 %v, p99 %v, max %v", page.name, n, size/1024,
			pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), times[len(times)-1].Round(10*time.Microsecond))
	}
}
