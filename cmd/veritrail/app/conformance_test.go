package app

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// The statements of CLIENT-2.md that docs/CLIENT-CONFORMANCE.md marks "fixed", each sent as the
// Kosli CLI sends it, on both run modes.

// fieldTexts checks a validation failure and returns its errors object.
func fieldTexts(t *testing.T, r reply) map[string]string {
	t.Helper()
	wantError(t, r, http.StatusBadRequest, "Input payload validation failed", "")
	var body struct {
		Message string            `json:"message"`
		Errors  map[string]string `json:"errors"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Message != "Input payload validation failed" {
		t.Fatalf("not a validation failure with errors of strings: %s", r.Body)
	}
	return body.Errors
}

// TestConformanceQueryParameters: a query parameter that is not a number or a boolean, empty
// or out of range, is named "query.<name>" in pydantic's words (CLIENT-2.md section 5), as
// `kosli list ... --page-limit ”` and the like make the CLI print them.
func TestConformanceQueryParameters(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S", "description": ""}).want(t, http.StatusCreated)
		for _, c := range []struct {
			path  string
			field string
			text  string
		}{
			{"/controls/" + testOrg + "?page=1&per_page=", "query.per_page",
				"Input should be a valid integer, unable to parse string as an integer [input: ]"},
			{"/controls/" + testOrg + "?page=1&per_page=ten", "query.per_page",
				"Input should be a valid integer, unable to parse string as an integer [input: ten]"},
			{"/controls/" + testOrg + "?page=1&per_page=15&archived=maybe", "query.archived",
				"Input should be a valid boolean, unable to interpret input [input: maybe]"},
			{"/environments/" + testOrg + "?page=1&per_page=", "query.per_page",
				"Input should be a valid integer, unable to parse string as an integer [input: ]"},
			{"/flows/" + testOrg + "?search_by_name=a&case_sensitive=perhaps", "query.case_sensitive",
				"Input should be a valid boolean, unable to interpret input [input: perhaps]"},
			{"/snapshots/" + testOrg + "/prod?page=1&per_page=15&interval=&reverse=sometimes", "query.reverse",
				"Input should be a valid boolean, unable to interpret input [input: sometimes]"},
			{"/environments/" + testOrg + "/prod/events?page=1&per_page=101&interval=&reverse=false", "query.per_page",
				"Input should be less than or equal to 100 [input: 101]"},
			{"/repos/" + testOrg + "?page=1&per_page=51", "query.per_page",
				"Input should be less than or equal to 50 [input: 51]"},
			{"/environments/" + testOrg + "/prod/events?page=0&per_page=15&interval=&reverse=false", "query.page",
				"Input should be greater than or equal to 1 [input: 0]"},
		} {
			errs := fieldTexts(t, k.get(c.path))
			if errs[c.field] != c.text {
				t.Errorf("%s: errors %v, want %s: %q", c.path, errs, c.field, c.text)
			}
		}
		// An empty string parameter is a value, not an error (interval= is always sent).
		k.get("/snapshots/"+testOrg+"/prod?page=1&per_page=15&interval=&reverse=false").want(t, http.StatusOK)
	})
}

// TestConformanceBodyTexts: the body-field texts of CLIENT-2.md sections 2 and 5: a value that
// is not an object names its input, an empty origin_url is not a URL, a missing data_json part
// is "Field required [input: None]".
func TestConformanceBodyTexts(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		setupFlow(t, k)
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S", "description": ""}).want(t, http.StatusCreated)
		k.send(http.MethodPost, "/controls/"+testOrg, map[string]any{"identifier": "SEC-1", "name": "s"}).want(t, http.StatusCreated)
		generic := "/attestations/" + testOrg + "/app/trail/t1/generic"
		for _, c := range []struct {
			name        string
			r           reply
			field, text string
		}{
			{"annotations", k.multipart(http.MethodPost, generic, "data_json", map[string]any{"attestation_name": "a", "is_compliant": true,
				"user_data": map[string]any{}, "annotations": ""}), "annotations", "Input should be a valid dictionary [input: ]"},
			{"origin_url", k.multipart(http.MethodPost, generic, "data_json", map[string]any{"attestation_name": "a", "is_compliant": true,
				"user_data": map[string]any{}, "origin_url": ""}), "origin_url", "Input should be a valid URL, input is empty"},
			{"trail origin_url", k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t2", "origin_url": ""}),
				"origin_url", "Input should be a valid URL, input is empty"},
			{"override external_urls", k.send(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/override", map[string]any{
				"attestation_name": "a", "reason": "r", "new_compliance_status": true, "original_attestation_type": "generic",
				"user_data": map[string]any{}, "external_urls": []any{"x"}}), "external_urls", `Input should be a valid dictionary [input: ["x"]]`},
			{"set_tags", k.send(http.MethodPatch, "/tags/"+testOrg+"/env/prod", map[string]any{"set_tags": "", "remove_tags": []string{}}),
				"set_tags", "Input should be a valid dictionary [input: ]"},
			{"links", k.send(http.MethodPut, "/controls/"+testOrg+"/SEC-1", map[string]any{"links": "https://example.com"}),
				"links", "Input should be a valid dictionary [input: https://example.com]"},
			{"missing data_json", k.multipart(http.MethodPost, generic, "payload", map[string]any{"attestation_name": "a"}),
				"data_json", "Field required [input: None]"},
		} {
			if errs := fieldTexts(t, c.r); errs[c.field] != c.text {
				t.Errorf("%s: errors %v, want %s: %q", c.name, errs, c.field, c.text)
			}
		}
		// A relative origin_url is refused too; an absolute one is kept.
		if errs := fieldTexts(t, k.multipart(http.MethodPost, generic, "data_json", map[string]any{"attestation_name": "a",
			"is_compliant": true, "user_data": map[string]any{}, "origin_url": "ci/run/1"})); errs["origin_url"] == "" {
			t.Errorf("a relative origin_url: %v", errs)
		}
		k.multipart(http.MethodPost, generic, "data_json", map[string]any{"attestation_name": "a", "is_compliant": true,
			"user_data": map[string]any{}, "origin_url": "https://ci.example.com/run/1"}).want(t, http.StatusCreated)
	})
}

// TestConformanceAccessDenied: an organization the key may not use is refused with the path
// asked for, whichever route (`kosli enable beta --org other`, `update default-org other`).
func TestConformanceAccessDenied(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		wantMessage(t, k.send(http.MethodPut, "/organizations/elsewhere/experimental_features", map[string]any{"experimental_features_enabled": true}),
			http.StatusForbidden, "Access denied to /api/v2/organizations/elsewhere/experimental_features")
		wantMessage(t, k.send(http.MethodPut, "/user/elsewhere", nil), http.StatusForbidden, "Access denied to /api/v2/user/elsewhere")
		wantMessage(t, k.get("/flows/elsewhere"), http.StatusForbidden, "Access denied to /api/v2/flows/elsewhere")
	})
}

// TestConformanceDeepRepoNames: a GitLab repository in nested subgroups arrives as one path
// segment per part of its name (url.JoinPath), four and more included, for `kosli get repo`
// and `kosli tag repo`.
func TestConformanceDeepRepoNames(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "app", "description": ""},
			file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)
		for _, name := range []string{"top/sub/team/app", "top/sub/team/deeper/still/app"} {
			k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t-" + strconv.Itoa(len(name)),
				"repo_info": map[string]any{"id": strconv.Itoa(len(name)), "name": name, "url": "https://gitlab.com/" + name, "provider": "gitlab"}}).
				want(t, http.StatusCreated)
			r := k.get("/repos/"+testOrg+"/"+name).want(t, http.StatusOK).JSON(t)
			if r["name"] != name || r["provider"] != "gitlab" {
				t.Fatalf("repo %s: %v", name, r)
			}
			if r := k.get("/repos/"+testOrg+"/"+name+"?provider=gitlab").want(t, http.StatusOK).JSON(t); r["name"] != name {
				t.Fatalf("repo %s with its provider: %v", name, r)
			}
		}
		wantMessage(t, k.get("/repos/"+testOrg+"/top/sub/team/nope"), http.StatusNotFound, "Repo 'top/sub/team/nope' not found")
		ten := "a/b/c/d/e/f/g/h/i/j" // the deepest name served: ten segments
		wantMessage(t, k.get("/repos/"+testOrg+"/"+ten), http.StatusNotFound, "Repo '"+ten+"' not found")
		wantMessage(t, k.get("/repos/"+testOrg+"/top/sub/team/app?provider=github"), http.StatusNotFound, "Repo 'top/sub/team/app' not found")
	})
}

// TestConformanceEmptyBoundary: `start=` or `end=` given empty is "Invalid interval value: "
// (CLIENT-2.md section 2); left out, the default window.
func TestConformanceEmptyBoundary(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S", "description": ""}).want(t, http.StatusCreated)
		events := "/environments/" + testOrg + "/prod/events?page=1&per_page=15&interval=&reverse=false"
		wantMessage(t, k.get(events+"&start="), http.StatusBadRequest, "Invalid interval value: ")
		wantMessage(t, k.get(events+"&start=1&end="), http.StatusBadRequest, "Invalid interval value: ")
		k.get(events).want(t, http.StatusOK)
	})
}

// TestConformanceHostPrefix: `--host http://HOST/vt` makes the CLI send /vt/api/v2/... and
// /vt/ready (CLIENT.md, transport); with a base URL of that path the server answers there, and
// still at the root for a proxy that strips the prefix.
func TestConformanceHostPrefix(t *testing.T) {
	forEachModeWith(t, func(c *Config) { c.Ingest.BaseURL = "http://veritrail.test/vt" }, func(t *testing.T, e env) {
		k := newKosli(t, e.base+"/vt/api/v2", testToken)
		k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "app", "description": ""},
			file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)
		flow := k.get("/flows/"+testOrg+"/app").want(t, http.StatusOK).JSON(t)
		if flow["html_url"] != "http://veritrail.test/vt/"+testOrg+"/flows/app" {
			t.Errorf("html_url under the prefix: %v", flow["html_url"])
		}
		if r := newKosli(t, e.base+"/vt", "").get("/ready").want(t, http.StatusOK); string(r.Body) != "OK" {
			t.Errorf("/vt/ready: %q", r.Body)
		}
		e.k.get("/flows/"+testOrg+"/app").want(t, http.StatusOK) // at the root, as behind a stripping proxy
		wantMessage(t, k.get("/flows/"+testOrg+"/nope"), http.StatusNotFound, "Flow named 'nope' does not exist for organization '"+testOrg+"'")
		newKosli(t, e.base+"/vtx/api/v2", testToken).get("/flows/"+testOrg+"/app").want(t, http.StatusNotFound)
	})
}

// TestConformanceSarifAndSbom: `kosli attest sarif` posts to .../sarif with sarif_results and
// is_compliant; `kosli attest sbom` posts a system attestation of type_name sbom with the
// file's format, SHA-256 and summary, and the file itself as attachment_file.
func TestConformanceSarifAndSbom(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		setupFlow(t, k)
		trail := "/attestations/" + testOrg + "/app/trail/t1/"
		results := map[string]any{"schema_version": 1, "tool": map[string]any{"name": "Trivy", "version": "0.50.0"},
			"results": []any{map[string]any{"high_count": 1, "medium_count": 0, "low_count": 0,
				"high": []any{map[string]any{"id": "CVE-1", "message": "bad", "locations": []any{map[string]any{"uri": "go.mod", "lines": "3"}}}}}}}
		k.multipart(http.MethodPost, trail+"sarif", "data_json", map[string]any{"attestation_name": "scan", "user_data": map[string]any{},
			"sarif_results": results, "is_compliant": false}, file{"attachment_file", "scan.sarif", []byte(`{"version":"2.1.0"}`)}).
			want(t, http.StatusCreated)
		if errs := fieldTexts(t, k.multipart(http.MethodPost, trail+"sarif", "data_json", map[string]any{"attestation_name": "scan2",
			"user_data": map[string]any{}, "is_compliant": true})); errs["sarif_results"] != "Field required" {
			t.Errorf("sarif without results: %v", errs)
		}

		sbomFile := []byte(`{"bomFormat":"CycloneDX","specVersion":"1.5"}`)
		sum := sha256.Sum256(sbomFile)
		k.multipart(http.MethodPost, trail+"system", "data_json", map[string]any{"attestation_name": "bom", "user_data": map[string]any{},
			"type_name": "sbom", "annotations": map[string]any{"sbom_format": "cyclonedx-json", "sbom_sha256": hex.EncodeToString(sum[:])},
			"attestation_data": map[string]any{"format": "cyclonedx-json", "original_fingerprint": hex.EncodeToString(sum[:]),
				"document": map[string]any{"package_count": 0}}}, file{"attachment_file", "bom.json", sbomFile}).want(t, http.StatusCreated)
		if errs := fieldTexts(t, k.multipart(http.MethodPost, trail+"system", "data_json", map[string]any{"attestation_name": "bom2",
			"type_name": "sbom", "attestation_data": map[string]any{"format": "spdx-json", "original_fingerprint": "abc"}})); errs["attestation_data.original_fingerprint"] !=
			"String should match pattern '^[a-f0-9]{64}$' [input: abc]" {
			t.Errorf("sbom with a bad fingerprint: %v", errs)
		}

		for name, want := range map[string]struct {
			typ       string
			compliant bool
		}{"scan": {"sarif", false}, "bom": {"sbom", true}} {
			got := k.get("/attestations/"+testOrg+"/app/trail/t1/"+name).want(t, http.StatusOK).Array(t)
			if len(got) != 1 {
				t.Fatalf("attestation %s: %v", name, got)
			}
			a := got[0].(map[string]any)
			if a["attestation_type"] != want.typ || a["is_compliant"] != want.compliant {
				t.Errorf("attestation %s: type %v compliant %v, want %s %v", name, a["attestation_type"], a["is_compliant"], want.typ, want.compliant)
			}
		}
	})
}

// TestConformanceSuccessBodies: the success bodies of CLIENT-2.md section 2: the JSON string
// "OK" from create environment, legacy create flow, tag and override, {"message":"OK"} from
// attest artifact; the status tells created (201) from updated (200).
func TestConformanceSuccessBodies(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		body := func(r reply, status int, want string) {
			t.Helper()
			if r.want(t, status); strings.TrimSpace(string(r.Body)) != want {
				t.Errorf("body %s, want %s", r.Body, want)
			}
		}
		envBody := map[string]any{"name": "prod", "type": "K8S", "description": ""}
		body(k.send(http.MethodPut, "/environments/"+testOrg, envBody), http.StatusCreated, `"OK"`)
		body(k.send(http.MethodPut, "/environments/"+testOrg, envBody), http.StatusOK, `"OK"`)
		legacy := map[string]any{"name": "legacy", "description": "", "visibility": "private", "template": []string{"artifact", "unit-test"}}
		body(k.send(http.MethodPut, "/flows/"+testOrg, legacy), http.StatusCreated, `"OK"`)
		body(k.send(http.MethodPut, "/flows/"+testOrg, legacy), http.StatusOK, `"OK"`)
		body(k.send(http.MethodPatch, "/tags/"+testOrg+"/environment/prod", map[string]any{"set_tags": map[string]string{"a": "b"},
			"remove_tags": []string{"absent"}}), http.StatusOK, `"OK"`)
		setupFlow(t, k)
		body(k.send(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/override", map[string]any{"attestation_name": "tests",
			"reason": "r", "new_compliance_status": true, "original_attestation_type": "generic", "user_data": map[string]any{}}),
			http.StatusCreated, `"OK"`)
		body(k.send(http.MethodPost, "/artifacts/"+testOrg+"/app", map[string]any{"fingerprint": strings.Repeat("a", 64), "filename": "app",
			"git_commit": "0123456789abcdef0123456789abcdef01234567", "build_url": "https://ci.example.com/1",
			"commit_url": "https://github.com/acme/app/commit/1", "trail_name": "t1", "template_reference_name": "app"}),
			http.StatusCreated, `{"message":"OK"}`)
	})
}

// TestConformanceSearchLinks: a search result's html_url has no query string (CLIENT-2.md
// section 6), while get artifact's carries ?artifact_id=.
func TestConformanceSearchLinks(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		setupFlow(t, k)
		fp := strings.Repeat("b", 64)
		k.send(http.MethodPost, "/artifacts/"+testOrg+"/app", map[string]any{"fingerprint": fp, "filename": "app",
			"git_commit": "0123456789abcdef0123456789abcdef01234567", "build_url": "https://ci.example.com/1",
			"commit_url": "https://github.com/acme/app/commit/1", "trail_name": "t1", "template_reference_name": "app"}).want(t, http.StatusCreated)
		found := k.get("/search/"+testOrg+"/sha/"+fp[:7]).want(t, http.StatusOK).JSON(t)
		arts := found["artifacts"].([]any)
		if len(arts) != 1 {
			t.Fatalf("search: %v", found)
		}
		if link := arts[0].(map[string]any)["html_url"].(string); strings.Contains(link, "?") || !strings.HasSuffix(link, "/artifacts/"+fp) {
			t.Errorf("search html_url %q, want the artifact page without a query string", link)
		}
		art := k.get("/artifacts/"+testOrg+"/app/fingerprint/"+fp).want(t, http.StatusOK).JSON(t)
		if link := art["html_url"].(string); !strings.Contains(link, "?artifact_id=") {
			t.Errorf("get artifact html_url %q lacks artifact_id", link)
		}
	})
}

// TestConformanceLookups: an unknown attestation id is 200 {"data": []} (CLIENT-2.md section
// 11); an assert with neither environment nor policy has scope "flow" (section 14).
func TestConformanceLookups(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		setupFlow(t, k)
		got := k.get("/attestations/"+testOrg+"?attestation_id=01234567-89ab-cdef-0123-456789abcdef").want(t, http.StatusOK).JSON(t)
		if data, ok := got["data"].([]any); !ok || len(data) != 0 {
			t.Errorf("unknown attestation id: %v", got)
		}
		fp := strings.Repeat("c", 64)
		k.send(http.MethodPost, "/artifacts/"+testOrg+"/app", map[string]any{"fingerprint": fp, "filename": "app",
			"git_commit": "0123456789abcdef0123456789abcdef01234567", "build_url": "https://ci.example.com/1",
			"commit_url": "https://github.com/acme/app/commit/1", "trail_name": "t1", "template_reference_name": "app"}).want(t, http.StatusCreated)
		res := k.get("/asserts/"+testOrg+"/fingerprint/"+fp).want(t, http.StatusOK).JSON(t)
		if _, ok := res["compliant"].(bool); !ok || res["scope"] != "flow" || len(res["flows"].([]any)) != 1 {
			t.Errorf("assert without environment or policy: %v", res)
		}
		wantMessage(t, k.get("/asserts/"+testOrg+"/fingerprint/"+strings.Repeat("d", 64)+"?flow_name=app"), http.StatusNotFound,
			"Artifact with fingerprint '"+strings.Repeat("d", 64)+"' does not exist in flow 'app' belonging to organization '"+testOrg+"'")
	})
}

// TestConformanceAttachPolicyPut: CLIENT-2.md section 16 lists PUT and DELETE on an
// environment's /policies; PUT attaches as POST does.
func TestConformanceAttachPolicyPut(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S", "description": ""}).want(t, http.StatusCreated)
		k.multipart(http.MethodPut, "/policies/"+testOrg, "payload", map[string]any{"name": "p1", "description": "", "comment": "", "type": "env"},
			file{"policy_file", "p.yml", []byte("_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  provenance:\n    required: true\n")}).
			want(t, http.StatusCreated)
		k.send(http.MethodPut, "/environments/"+testOrg+"/prod/policies", map[string]any{"policy_names": []string{"p1"}}).want(t, http.StatusOK)
		if got := k.get("/environments/"+testOrg+"/prod").want(t, http.StatusOK).JSON(t)["policies"]; mustJSON(t, got) != `["p1"]` {
			t.Errorf("policies after PUT: %v", got)
		}
		k.send(http.MethodDelete, "/environments/"+testOrg+"/prod/policies", map[string]any{"policy_names": []string{"p1"}}).want(t, http.StatusOK)
		if got := k.get("/environments/"+testOrg+"/prod").want(t, http.StatusOK).JSON(t)["policies"]; mustJSON(t, got) != `[]` {
			t.Errorf("policies after DELETE: %v", got)
		}
	})
}

// TestConformanceSnapshotFields: `kosli get snapshot` reads index, timestamp, type, compliant,
// is_latest, html_url and, per artifact, name, fingerprint, compliant, creationTimestamp,
// annotation, flow_name, git_commit and policy_decisions (CLIENT.md).
func TestConformanceSnapshotFields(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "server", "description": ""}).want(t, http.StatusCreated)
		k.send(http.MethodPut, "/environments/"+testOrg+"/prod/report/server", map[string]any{"artifacts": []any{
			map[string]any{"digests": map[string]any{"web": strings.Repeat("e", 64)}, "creationTimestamp": 1700000000}}}).want(t, http.StatusCreated)
		s := k.get("/snapshots/"+testOrg+"/prod/-1").want(t, http.StatusOK).JSON(t)
		if s["index"] != float64(1) || s["type"] != "server" || s["is_latest"] != true {
			t.Errorf("snapshot: %v", s)
		}
		for _, key := range []string{"timestamp", "compliant", "html_url", "artifacts"} {
			if s[key] == nil {
				t.Errorf("snapshot lacks %s: %v", key, s)
			}
		}
		arts := s["artifacts"].([]any)
		if len(arts) != 1 {
			t.Fatalf("artifacts: %v", arts)
		}
		a := arts[0].(map[string]any)
		for _, key := range []string{"name", "fingerprint", "compliant", "creationTimestamp", "annotation", "flow_name", "git_commit", "policy_decisions"} {
			if _, ok := a[key]; !ok {
				t.Errorf("snapshot artifact lacks %s: %v", key, a)
			}
		}
	})
}
