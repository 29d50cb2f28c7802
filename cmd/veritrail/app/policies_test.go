package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

const policySchema = "_schema: https://kosli.com/schemas/policy/environment/v1\n"

// policyKit drives the policy endpoints the way the Kosli CLI does.
type policyKit struct {
	t testing.TB
	k *kosli
}

func (p policyKit) flow(name string) {
	p.t.Helper()
	p.k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": name, "description": ""},
		file{"template_file", "t.yml", []byte("version: 1\n")}).want(p.t, http.StatusCreated)
}

// artifact begins a trail of flow and reports fp in it.
func (p policyKit) artifact(flow, trail, fp, filename string) {
	p.t.Helper()
	p.k.multipart(http.MethodPut, "/trails/"+testOrg+"/"+flow, "data_json", map[string]any{"name": trail}).want(p.t, http.StatusCreated)
	p.k.send(http.MethodPost, "/artifacts/"+testOrg+"/"+flow, map[string]any{"fingerprint": fp, "filename": filename,
		"build_url": "b", "commit_url": "c", "trail_name": trail}).want(p.t, http.StatusCreated)
}

// attest reports an attestation of kind on the artifact fp ("" for the trail) with the kind's own fields.
func (p policyKit) attest(flow, trail, kind, name, fp string, fields map[string]any) {
	p.t.Helper()
	body := map[string]any{"attestation_name": name, "user_data": map[string]any{}}
	if fp != "" {
		body["artifact_fingerprint"] = fp
	}
	for k, v := range fields {
		body[k] = v
	}
	p.k.multipart(http.MethodPost, "/attestations/"+testOrg+"/"+flow+"/trail/"+trail+"/"+kind, "data_json", body).
		want(p.t, http.StatusCreated)
}

// policy creates a policy or a version of it as `kosli create policy` does.
func (p policyKit) policy(name, content string, status int) reply {
	p.t.Helper()
	return p.k.multipart(http.MethodPut, "/policies/"+testOrg, "payload",
		map[string]any{"name": name, "description": "policy " + name, "comment": "v", "type": "env"},
		file{"policy_file", name + ".yml", []byte(content)}).want(p.t, status)
}

func (p policyKit) env(name string) {
	p.t.Helper()
	p.k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": name, "type": "server"}).want(p.t, http.StatusCreated)
}

func (p policyKit) report(env string, running map[string]string) {
	p.t.Helper()
	var items []map[string]any
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range running {
			if !yield(n) {
				return
			}
		}
	}) {
		items = append(items, map[string]any{"digests": map[string]string{name: running[name]}, "creationTimestamp": 1})
	}
	p.k.send(http.MethodPut, "/environments/"+testOrg+"/"+env+"/report/server", map[string]any{"artifacts": items}).want(p.t, http.StatusCreated)
}

func (p policyKit) attach(env string, names ...string) reply {
	p.t.Helper()
	return p.k.send(http.MethodPost, "/environments/"+testOrg+"/"+env+"/policies", map[string]any{"policy_names": names})
}

func (p policyKit) assert(fp string, query url.Values) map[string]any {
	p.t.Helper()
	path := "/asserts/" + testOrg + "/fingerprint/" + fp
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	return p.k.get(path).want(p.t, http.StatusOK).JSON(p.t)
}

// failing lists, per rule that is not satisfied, its resolutions' types (and for_control where given).
func failing(t *testing.T, evaluation any) []string {
	t.Helper()
	var out []string
	for _, r := range evaluation.(map[string]any)["rule_evaluations"].([]any) {
		rule := r.(map[string]any)
		if rule["satisfied"] == true {
			continue
		}
		for _, res := range rule["resolutions"].([]any) {
			rm := res.(map[string]any)
			s := fmt.Sprint(rm["type"])
			if ctl, ok := rm["context"].(map[string]any)["for_control"]; ok {
				s += ":" + fmt.Sprint(ctl)
			}
			out = append(out, s)
		}
	}
	return out
}

func fingerprint(prefix string) string { return prefix + strings.Repeat("0", 64-len(prefix)) }

// TestPolicyAsserts checks each kind of policy rule through assert, in environments that attach one policy each
// and run the same artifacts, in both modes.
func TestPolicyAsserts(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		p := policyKit{t, e.k}
		k := e.k
		k.send(http.MethodPost, "/controls/"+testOrg, map[string]any{"identifier": "change-approval", "name": "CAB"}).want(t, http.StatusCreated)
		p.flow("web")
		p.flow("api")
		k.send(http.MethodPatch, "/tags/"+testOrg+"/flow/web", map[string]any{"set_tags": map[string]string{"risk": "high"}}).want(t, 200)
		good, bad, pr := fingerprint("aaaaa1"), fingerprint("aaaaa2"), fingerprint("c1")
		agent, mystery, legacy := strings.Repeat("d", 64), strings.Repeat("e", 64), fingerprint("f1")
		junit := func(failures int) map[string]any {
			return map[string]any{"junit_results": []map[string]any{{"name": "suite", "failures": failures, "errors": 0, "total": 3}}}
		}
		p.artifact("web", "t-good", good, "web:1")
		p.attest("web", "t-good", "junit", "unit-tests", good, junit(0))
		p.attest("web", "t-good", "snyk", "container-scan", good, map[string]any{"snyk_results": map[string]any{"results": []any{}}})
		p.attest("web", "t-good", "generic", "scan", good, map[string]any{"is_compliant": true})
		p.attest("web", "t-good", "system", "release", good, map[string]any{"type_name": "decision", "control": "change-approval",
			"attestation_data": map[string]any{"is_compliant": true}})
		p.artifact("api", "t-bad", bad, "api:1")
		p.attest("api", "t-bad", "junit", "unit-tests", bad, junit(2))
		p.attest("api", "t-bad", "system", "release", bad, map[string]any{"type_name": "decision", "control": "change-approval",
			"attestation_data": map[string]any{"is_compliant": false}})
		p.artifact("api", "t-pr", pr, "pr:1")
		p.attest("api", "t-pr", "pull_request", "pr", "", map[string]any{"git_provider": "github", "pull_requests": []any{}})
		p.artifact("api", "t-legacy", legacy, "legacy:1")
		p.attest("api", "t-legacy", "generic", "lint", legacy, map[string]any{"is_compliant": false})

		policies := map[string]string{
			"provenance":       "artifacts:\n  provenance:\n    required: true\n    exceptions:\n      - if: ${{ matches(artifact.name, \"^datadog\") }}\n",
			"trail-compliance": "artifacts:\n  trail-compliance:\n    required: true\n",
			"named":            "artifacts:\n  attestations:\n    - name: unit-tests\n      type: junit\n",
			"any-snyk":         "artifacts:\n  attestations:\n    - name: \"*\"\n      type: snyk\n",
			"risky":            "artifacts:\n  attestations:\n    - name: scan\n      type: generic\n      if: ${{ flow.tags.risk == \"high\" }}\n",
			"pr-exists":        "artifacts:\n  attestations:\n    - name: pr\n      type: pull_request\n      must_be_compliant: false\n",
			"release":          "artifacts:\n  attestations:\n    - name: release\n      type: decision\n      for_control: change-approval\n",
		}
		running := map[string]string{"web:1": good, "api:1": bad, "pr:1": pr, "datadog-agent": agent, "mystery": mystery, "legacy:1": legacy}
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for n := range policies {
				if !yield(n) {
					return
				}
			}
		}) {
			p.policy(name, policySchema+policies[name], http.StatusCreated)
			p.env("env-" + name)
			p.report("env-"+name, running)
			p.attach("env-"+name, name).want(t, http.StatusOK)
		}
		k.send(http.MethodPut, "/allowlists/"+testOrg+"/env-trail-compliance", map[string]any{"artifact_fingerprint": legacy,
			"artifact_name": "legacy:1", "description": "grandfathered"}).want(t, http.StatusCreated)

		for _, c := range []struct {
			policy, fp string
			compliant  bool
			failing    []string // resolutions of the rules that fail
		}{
			{"provenance", good, true, nil},
			{"provenance", agent, true, nil}, // an artifact of no flow excused by an exception
			{"provenance", mystery, false, []string{"no_provenance"}},
			{"trail-compliance", good, true, nil},
			{"trail-compliance", bad, false, []string{"non_compliant_in_trail"}},
			{"trail-compliance", mystery, false, []string{"no_provenance"}},
			{"named", good, true, nil},
			{"named", bad, false, []string{"non_compliant_attestation"}},
			{"any-snyk", good, true, nil},
			{"any-snyk", bad, false, []string{"missing_attestation"}},
			{"risky", good, true, nil},
			{"risky", bad, true, nil}, // api is not high risk: the rule does not apply
			{"pr-exists", pr, true, nil},
			{"pr-exists", bad, false, []string{"missing_attestation"}},
			{"release", good, true, nil},
			{"release", bad, false, []string{"non_compliant_attestation:change-approval"}},
			{"release", pr, false, []string{"missing_attestation:change-approval"}},
		} {
			res := p.assert(c.fp, url.Values{"environment_name": {"env-" + c.policy}})
			evals, _ := res["policy_evaluations"].([]any)
			if res["scope"] != "environment" || res["environment"] != "env-"+c.policy || len(evals) != 1 {
				t.Fatalf("%s %s: %v", c.policy, c.fp[:6], res)
			}
			got := failing(t, evals[0])
			if res["compliant"] != c.compliant || !slices.Equal(got, c.failing) {
				t.Errorf("%s on %s: compliant %v, failing %v; want %v, %v", c.policy, c.fp[:6], res["compliant"], got, c.compliant, c.failing)
			}
			if ev := evals[0].(map[string]any); ev["policy_name"] != c.policy || ev["policy_version"] != float64(1) {
				t.Errorf("%s: evaluation names %v version %v", c.policy, ev["policy_name"], ev["policy_version"])
			}
		}

		// An allowlisted artifact complies whatever the policy says, and says why.
		res := p.assert(legacy, url.Values{"environment_name": {"env-trail-compliance"}})
		allow, _ := res["allow_listing"].(map[string]any)
		if res["compliant"] != true || allow["description"] != "grandfathered" || allow["allowed_by_user_id"] == "" {
			t.Fatalf("allowlisted: %v", res)
		}
		if ev := res["policy_evaluations"].([]any)[0].(map[string]any); ev["status"] != "NON-COMPLIANT" {
			t.Errorf("allowlisted artifact's policy evaluation: %v", ev)
		}

		// Tagging the api flow high risk re-judges its running artifacts at once.
		k.send(http.MethodPatch, "/tags/"+testOrg+"/flow/api", map[string]any{"set_tags": map[string]string{"risk": "high"}}).want(t, 200)
		res = p.assert(bad, url.Values{"environment_name": {"env-risky"}})
		if got := failing(t, res["policy_evaluations"].([]any)[0]); res["compliant"] != false || !slices.Equal(got, []string{"missing_attestation"}) {
			t.Errorf("after tagging api high risk: compliant %v, failing %v", res["compliant"], got)
		}
		if env := k.get("/environments/"+testOrg+"/env-risky").want(t, 200).JSON(t); env["state"] != false ||
			fmt.Sprint(env["policies"]) != "[risky]" {
			t.Errorf("env-risky after tagging: %v", env)
		}

		// Policy scope: named policies on the fly, in the order asked.
		res = p.assert(bad, url.Values{"policy_name": {"named", "any-snyk"}})
		evals := res["policy_evaluations"].([]any)
		if res["scope"] != "policy" || res["compliant"] != false || len(evals) != 2 ||
			evals[0].(map[string]any)["policy_name"] != "named" || evals[1].(map[string]any)["policy_name"] != "any-snyk" {
			t.Errorf("policy scope: %v", res)
		}
		if res := p.assert(good[:7], url.Values{"policy_name": {"release"}}); res["compliant"] != true || res["fingerprint"] != good {
			t.Errorf("policy scope by prefix: %v", res)
		}
		// An artifact not running in the environment is judged on the fly; the environment's policies apply.
		p.env("empty")
		p.attach("empty", "named").want(t, 200)
		if res := p.assert(bad, url.Values{"environment_name": {"empty"}}); res["compliant"] != false || res["scope"] != "environment" {
			t.Errorf("not running: %v", res)
		}

		// Flow scope; an environment without policies answers in its own scope (CLIENT-2.md section
		// 14: no policy evaluations, compliant) and still lists the artifact's flows.
		p.env("plain")
		for _, q := range []url.Values{nil, {"environment_name": {"plain"}}, {"flow_name": {"web"}}} {
			res := p.assert(good, q)
			flows := res["flows"].([]any)
			f := flows[0].(map[string]any)
			statuses := f["compliance_status"].(map[string]any)["attestations_statuses"].([]any)
			scope, env := "flow", any(nil)
			if q.Has("environment_name") {
				scope, env = "environment", "plain"
			}
			if res["scope"] != scope || res["compliant"] != true || len(flows) != 1 || f["flow"] != "web" || f["trail"] != "t-good" ||
				len(statuses) != 4 || res["html_url"] == "" || res["environment"] != env {
				t.Errorf("%s scope %v: %v", scope, q, res)
			}
		}
		if res := p.assert(bad, url.Values{"environment_name": {"plain"}}); res["scope"] != "environment" || res["compliant"] != true ||
			fmt.Sprint(res["policy_evaluations"]) != "[]" || len(res["flows"].([]any)) == 0 {
			t.Errorf("environment without policies: %v", res)
		}
		if res := p.assert(bad, nil); res["compliant"] != false {
			t.Errorf("flow scope of a non-compliant artifact: %v", res)
		}

		wantError(t, k.get("/asserts/"+testOrg+"/fingerprint/aaaaa"), http.StatusBadRequest, "ambiguous", "fingerprint")
		wantError(t, k.get("/asserts/"+testOrg+"/fingerprint/aaa"), http.StatusBadRequest, "", "fingerprint")
		wantError(t, k.get("/asserts/"+testOrg+"/fingerprint/"+mystery), http.StatusNotFound,
			"Artifact with fingerprint '"+mystery+"' does not exist in organization '"+testOrg+"'", "")
		wantError(t, k.get("/asserts/"+testOrg+"/fingerprint/"+good+"?environment_name=plain&policy_name=named"), http.StatusBadRequest,
			"", "environment_name")
		wantError(t, k.get("/asserts/"+testOrg+"/fingerprint/"+good+"?policy_name=nope"), http.StatusNotFound,
			"Policy 'nope' does not exist in organization '"+testOrg+"'", "")
		wantError(t, k.get("/asserts/"+testOrg+"/fingerprint/"+good+"?environment_name=nope"), http.StatusNotFound,
			"Environment named 'nope' does not exist for organization '"+testOrg+"'", "")
	})
}

// TestPolicyLifecycle: versions, attach and detach, re-evaluation on evidence, decisions in snapshots, what-if and
// the error cases.
func TestPolicyLifecycle(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		p := policyKit{t, e.k}
		k := e.k
		p.flow("web")
		web := fingerprint("ab12")
		p.artifact("web", "t1", web, "web:1")
		p.env("prod")
		p.report("prod", map[string]string{"web:1": web})
		if s := k.get("/environments/"+testOrg+"/prod").want(t, 200).JSON(t); s["state"] != nil {
			t.Fatalf("state without policies: %v", s["state"])
		}

		tests := policySchema + "artifacts:\n  attestations:\n    - name: unit-tests\n      type: junit\n"
		p.policy("prod-policy", tests, http.StatusCreated)
		if r := p.policy("prod-policy", tests, http.StatusOK); !strings.Contains(string(r.Body), "unchanged") {
			t.Errorf("an identical version: %s", r.Body)
		}
		pol := k.get("/policies/"+testOrg+"/prod-policy").want(t, 200).JSON(t)
		versions := pol["versions"].([]any)
		if len(versions) != 1 || versions[0].(map[string]any)["policy_yaml"] != tests || pol["description"] != "policy prod-policy" ||
			versions[0].(map[string]any)["created_by"] == "" || fmt.Sprint(pol["consuming_envs"]) != "[]" {
			t.Fatalf("policy after create: %v", pol)
		}

		p.attach("prod", "prod-policy").want(t, http.StatusOK)
		env := k.get("/environments/"+testOrg+"/prod").want(t, 200).JSON(t)
		if env["state"] != false || fmt.Sprint(env["policies"]) != "[prod-policy]" {
			t.Fatalf("after attach: %v", env)
		}
		snap := k.get("/snapshots/"+testOrg+"/prod/-1").want(t, 200).JSON(t)
		art := snap["artifacts"].([]any)[0].(map[string]any)
		decisions := art["policy_decisions"].([]any)
		if snap["compliant"] != false || art["compliant"] != false || len(decisions) != 1 ||
			decisions[0].(map[string]any)["policy_name"] != "prod-policy" || decisions[0].(map[string]any)["policy_version"] != float64(1) {
			t.Fatalf("snapshot after attach: %v", snap)
		}
		if _, ok := art["policy_verdict"]; ok {
			t.Errorf("the stored verdict leaks into the view: %v", art)
		}
		if l := k.get("/policies/"+testOrg).want(t, 200).Array(t); len(l) != 1 || fmt.Sprint(l[0].(map[string]any)["consuming_envs"]) != "[prod]" {
			t.Errorf("policy list: %v", l)
		}

		// New evidence re-judges the running artifact (through its trail's evaluation).
		p.attest("web", "t1", "junit", "unit-tests", web, map[string]any{"junit_results": []map[string]any{{"name": "s", "failures": 0, "errors": 0}}})
		if env := k.get("/environments/"+testOrg+"/prod").want(t, 200).JSON(t); env["state"] != true {
			t.Fatalf("after the tests passed: state %v", env["state"])
		}
		if s := k.get("/snapshots/"+testOrg+"/prod/-1").want(t, 200).JSON(t); s["compliant"] != true ||
			s["artifacts"].([]any)[0].(map[string]any)["compliant"] != true {
			t.Fatalf("snapshot after the tests passed: %v", s)
		}

		// A new version (by the named path, payload optional) is recorded in later evaluations with its number.
		scan := policySchema + "artifacts:\n  attestations:\n    - name: unit-tests\n      type: junit\n    - name: scan\n      type: snyk\n"
		k.multipart(http.MethodPut, "/policies/"+testOrg+"/prod-policy", "payload", map[string]any{"comment": "needs a scan"},
			file{"policy_file", "p.yml", []byte(scan)}).want(t, http.StatusOK)
		res := p.assert(web, url.Values{"environment_name": {"prod"}})
		ev := res["policy_evaluations"].([]any)[0].(map[string]any)
		if res["compliant"] != false || ev["policy_version"] != float64(2) || !slices.Equal(failing(t, ev), []string{"missing_attestation"}) {
			t.Fatalf("after version 2: %v", res)
		}
		pol = k.get("/policies/"+testOrg+"/prod-policy").want(t, 200).JSON(t)
		if v := pol["versions"].([]any); len(v) != 2 || v[1].(map[string]any)["comment"] != "needs a scan" || pol["latest_version"] != float64(2) {
			t.Fatalf("versions: %v", pol["versions"])
		}

		// what-if: a draft judged against the latest snapshot, nothing attached or stored.
		draft := policySchema + "artifacts:\n  attestations:\n    - name: unit-tests\n      type: junit\n"
		w := k.multipart(http.MethodPost, "/environments/"+testOrg+"/prod/what-if", "payload", map[string]any{},
			file{"policy_file", "draft.yml", []byte(draft)}).want(t, http.StatusOK).JSON(t)
		arts := w["artifacts"].([]any)
		if w["compliant"] != true || w["failing_count"] != float64(0) || len(arts) != 1 || w["policy"] != "draft" ||
			arts[0].(map[string]any)["currently_compliant"] != false {
			t.Fatalf("what-if: %v", w)
		}
		w = k.multipart(http.MethodPost, "/environments/"+testOrg+"/prod/what-if", "payload", map[string]any{"name": "strict"},
			file{"policy_file", "strict.yml", []byte(scan)}).want(t, http.StatusOK).JSON(t)
		if w["compliant"] != false || w["failing_count"] != float64(1) || w["policy"] != "strict" {
			t.Fatalf("what-if of a failing draft: %v", w)
		}
		if l := k.get("/policies/"+testOrg).want(t, 200).Array(t); len(l) != 1 {
			t.Errorf("what-if stored a policy: %v", l)
		}

		// A raw Rego policy, marked by its file name.
		rego := "package acme.prod\n\nrule_evaluations := [{\"rule\": {\"type\": \"custom\"}, \"satisfied\": count(input.artifact.trails) > 0}]\n"
		k.multipart(http.MethodPut, "/policies/"+testOrg, "payload", map[string]any{"name": "rego-policy", "type": "env"},
			file{"policy_file", "provenance.rego", []byte(rego)}).want(t, http.StatusCreated)
		if v := k.get("/policies/"+testOrg+"/rego-policy").want(t, 200).JSON(t)["versions"].([]any)[0].(map[string]any); v["format"] != "rego" {
			t.Errorf("rego policy version: %v", v)
		}
		if res := p.assert(web, url.Values{"policy_name": {"rego-policy"}}); res["compliant"] != true {
			t.Errorf("rego policy assert: %v", res)
		}

		// Detach: no policy decides any more.
		k.send(http.MethodDelete, "/environments/"+testOrg+"/prod/policies", map[string]any{"policy_names": []string{"prod-policy"}}).
			want(t, http.StatusOK)
		env = k.get("/environments/"+testOrg+"/prod").want(t, 200).JSON(t)
		snap = k.get("/snapshots/"+testOrg+"/prod/-1").want(t, 200).JSON(t)
		if env["state"] != nil || fmt.Sprint(env["policies"]) != "[]" || snap["compliant"] != false ||
			len(snap["artifacts"].([]any)[0].(map[string]any)["policy_decisions"].([]any)) != 0 {
			t.Fatalf("after detach: %v, %v", env, snap)
		}

		// Error cases.
		wantError(t, p.attach("prod", "nope"), http.StatusNotFound, "Policy 'nope' does not exist in organization '"+testOrg+"'", "")
		wantError(t, p.attach("nope", "prod-policy"), http.StatusNotFound, "Environment named 'nope' does not exist for organization '"+testOrg+"'", "")
		wantError(t, k.send(http.MethodPost, "/environments/"+testOrg+"/prod/policies", map[string]any{"policy_names": []string{"prod-policy"}, "force": true}),
			http.StatusBadRequest, "Input payload validation failed", "force")
		wantError(t, k.send(http.MethodDelete, "/environments/"+testOrg+"/prod/policies", map[string]any{}), http.StatusBadRequest, "", "policy_names")
		wantError(t, p.policy("broken", policySchema+"artifacts: [unclosed\n", http.StatusBadRequest), http.StatusBadRequest, "Invalid policy", "policy_file")
		wantError(t, p.policy("broken", policySchema+"artifacts:\n  attestations:\n    - name: x\n      type: nonsense\n", http.StatusBadRequest),
			http.StatusBadRequest, "Invalid policy", "policy_file.artifacts.attestations[0].type")
		wantError(t, p.policy("broken", policySchema+"artifacts:\n  attestations:\n    - name: x\n      type: decision\n      for_control: NO-SUCH\n",
			http.StatusBadRequest), http.StatusBadRequest, "Invalid policy", "policy_file.artifacts.attestations[0].for_control")
		wantError(t, k.multipart(http.MethodPut, "/policies/"+testOrg, "payload", map[string]any{"name": "x", "type": "sql"},
			file{"policy_file", "x.yml", []byte(tests)}), http.StatusBadRequest, "Input payload validation failed", "type")
		wantError(t, k.multipart(http.MethodPut, "/policies/"+testOrg, "payload", map[string]any{"name": "x"}), http.StatusBadRequest,
			"Input payload validation failed", "policy_file")
		wantError(t, k.get("/policies/"+testOrg+"/nope"), http.StatusNotFound, "Policy 'nope' does not exist in organization '"+testOrg+"'", "")
		if l := k.get("/policies/"+testOrg).want(t, 200).Array(t); len(l) != 2 {
			t.Errorf("a bad policy was stored: %v", l)
		}
		body, _ := json.Marshal(map[string]any{"policy_names": []string{"prod-policy"}})
		reader := readerClient(t, e)
		wantError(t, reader.do(http.MethodPost, "/environments/"+testOrg+"/prod/policies", "application/json", body), http.StatusForbidden,
			"needs the write privilege", "")
		reader.multipart(http.MethodPost, "/environments/"+testOrg+"/prod/what-if", "payload", map[string]any{},
			file{"policy_file", "draft.yml", []byte(draft)}).want(t, http.StatusOK)
	})
}

// readerClient is a client whose key may read the organization but not write.
func readerClient(t *testing.T, e env) *kosli {
	t.Helper()
	const secret = "vt_policy_reader_key_0000000000000"
	if err := CreateOrgKey(context.Background(), e.store, mustOrg(t, e.store, testOrg), "auditor", store.RoleReader, secret); err != nil {
		t.Fatal(err)
	}
	return newKosli(t, e.base+"/api/v2", secret)
}
