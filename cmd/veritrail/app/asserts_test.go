package app

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"
)

// TestAssertAnswersFollowEvidence checks that an assert answer never outlives the evidence it
// was computed from: the embedded mode answers repeated asserts from memory until the evaluator
// commits again. A second client, which wrote nothing, sees each change right after its 201
// (read after write holds for every key of the organization), as the writer does.
func TestAssertAnswersFollowEvidence(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		p := policyKit{t, e.k}
		p.flow("web")
		web := fingerprint("cafe")
		p.artifact("web", "t1", web, "web:1")
		p.env("prod")
		p.report("prod", map[string]string{"web:1": web})
		p.policy("tests", policySchema+"artifacts:\n  attestations:\n    - name: unit-tests\n      type: junit\n", http.StatusCreated)
		p.attach("prod", "tests").want(t, http.StatusOK)

		// The writer's read waits for its writes, so the reader starts from the same state.
		if res := p.assert(web, url.Values{"environment_name": {"prod"}}); res["compliant"] != false {
			t.Fatalf("the writer before the tests: %v", res)
		}
		reader := readerClient(t, e)
		path := "/asserts/" + testOrg + "/fingerprint/" + web + "?" + url.Values{"environment_name": {"prod"}}.Encode()
		first := reader.get(path).want(t, http.StatusOK)
		if res := first.JSON(t); res["compliant"] != false {
			t.Fatalf("before the tests: %v", res)
		}
		if again := reader.get(path).want(t, http.StatusOK); !bytes.Equal(again.Body, first.Body) ||
			again.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("the same question answered differently with nothing changed:\n%s\n%s (%s)", first.Body, again.Body,
				again.Header.Get("Content-Type"))
		}

		// sees checks the reader's answer right after a write: read after write holds for every
		// key of the organization.
		sees := func(what string, want func(map[string]any) bool) {
			t.Helper()
			if res := reader.get(path).want(t, http.StatusOK).JSON(t); !want(res) {
				t.Fatalf("%s: the reader gets %v", what, res)
			}
		}

		p.attest("web", "t1", "junit", "unit-tests", web, map[string]any{"junit_results": []map[string]any{{"name": "s", "failures": 0, "errors": 0}}})
		if res := p.assert(web, url.Values{"environment_name": {"prod"}}); res["compliant"] != true {
			t.Fatalf("the writer after its tests passed: %v", res)
		}
		sees("after the tests passed", func(res map[string]any) bool { return res["compliant"] == true })

		// The same artifact reported in a second trail: the flow-scope answer lists both.
		flowPath := "/asserts/" + testOrg + "/fingerprint/" + web
		if res := reader.get(flowPath).want(t, http.StatusOK).JSON(t); len(res["flows"].([]any)) != 1 {
			t.Fatalf("flow scope with one trail: %v", res)
		}
		p.artifact("web", "t2", web, "web:1")
		if res := reader.get(flowPath).want(t, http.StatusOK).JSON(t); len(res["flows"].([]any)) != 2 {
			t.Fatalf("after a second trail reported the artifact, the reader gets %v", res)
		}

		p.policy("tests", policySchema+"artifacts:\n  attestations:\n    - name: unit-tests\n      type: junit\n    - name: scan\n      type: snyk\n",
			http.StatusOK)
		sees("after a stricter policy version", func(res map[string]any) bool {
			evs, _ := res["policy_evaluations"].([]any)
			return res["compliant"] == false && len(evs) == 1 && evs[0].(map[string]any)["policy_version"] == float64(2)
		})

		p.report("prod", map[string]string{})
		sees("after the artifact stopped running", func(res map[string]any) bool {
			evs, _ := res["policy_evaluations"].([]any)
			return res["compliant"] == false && len(evs) == 1 // judged now against the attached policy
		})
		k := e.k
		k.send(http.MethodDelete, "/environments/"+testOrg+"/prod/policies", map[string]any{"policy_names": []string{"tests"}}).
			want(t, http.StatusOK)
		sees("after the policy was detached", func(res map[string]any) bool {
			// No policy requires anything: the environment's scope with no evaluations (CLIENT-2.md section 14).
			evs, listed := res["policy_evaluations"].([]any)
			return res["compliant"] == true && listed && len(evs) == 0 && res["scope"] == "environment"
		})
	})
}
