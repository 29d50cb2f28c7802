package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// The Kosli CLI contract of CLIENT-2.md, sent as the CLI sends it, on both run modes.

// TestContractErrorBodies: only validation failures carry "errors" (an object keyed by field);
// every other error is {"message": ...} alone, since the CLI appends ": " and the value of a
// present "errors" key, and would print ": <nil>" for a null one.
func TestContractErrorBodies(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		setupFlow(t, k)
		for name, r := range map[string]reply{
			"unknown flow":    k.get("/flows/" + testOrg + "/nope"),
			"unknown trail":   k.get("/trails/" + testOrg + "/app/nope"),
			"unknown route":   k.get("/no-such-route/" + testOrg),
			"wrong method":    k.send(http.MethodDelete, "/flows/"+testOrg, nil),
			"empty snappish":  k.get("/env-diff/" + testOrg + "?snappish1=&snappish2=x"),
			"unknown control": k.get("/controls/" + testOrg + "/NOPE"),
		} {
			if r.Status < 400 || r.Status >= 500 {
				t.Errorf("%s: status %d: %s", name, r.Status, r.Body)
				continue
			}
			body := r.JSON(t)
			if _, ok := body["errors"]; ok {
				t.Errorf("%s: a non-validation error carries \"errors\": %s", name, r.Body)
			}
			if msg, _ := body["message"].(string); msg == "" {
				t.Errorf("%s: no message: %s", name, r.Body)
			}
		}
		wantMessage(t, k.get("/flows/"+testOrg+"/nope"), http.StatusNotFound, "Flow named 'nope' does not exist for organization '"+testOrg+"'")
		wantMessage(t, k.get("/env-diff/"+testOrg+"?snappish1=&snappish2=x"), http.StatusBadRequest, "Bad snappish ")

		// A validation failure: "errors" is an object of single strings keyed by field.
		r := k.send(http.MethodPost, "/controls/"+testOrg, map[string]any{"identifier": "bad id", "name": "x"})
		wantError(t, r, http.StatusBadRequest, "Input payload validation failed", "identifier")
		var body struct {
			Errors map[string]string `json:"errors"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("errors is not an object of strings: %s", r.Body)
		}
	})
}

// wantMessage checks an error whose body is exactly {"message": message}.
func wantMessage(t *testing.T, r reply, status int, message string) {
	t.Helper()
	r.want(t, status)
	body := r.JSON(t)
	if len(body) != 1 || body["message"] != message {
		t.Fatalf("body %s, want {\"message\": %q}", r.Body, message)
	}
}

// TestContractReady: /ready at the host root answers the plain text OK without a token; the
// CLI prints the raw body, so a JSON string would show its quotes.
func TestContractReady(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		r := newKosli(t, e.base, "").get("/ready").want(t, http.StatusOK)
		if string(r.Body) != "OK" {
			t.Fatalf("/ready body %q, want OK", r.Body)
		}
	})
}

// TestContractSnapshotCompliant: compliant is a boolean in snapshot lists and gets, false for
// an environment no policy decides (the CLI type-asserts a boolean; `assert snapshot` then
// prints NON-COMPLIANT).
func TestContractSnapshotCompliant(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S", "description": ""}).want(t, http.StatusCreated)
		k.send(http.MethodPut, "/environments/"+testOrg+"/prod/report/K8S", map[string]any{"artifacts": []any{}}).want(t, http.StatusCreated)
		list := k.get("/snapshots/"+testOrg+"/prod?page=1&per_page=15&interval=&reverse=false").want(t, http.StatusOK).Array(t)
		if len(list) != 1 || list[0].(map[string]any)["compliant"] != false {
			t.Fatalf("snapshot list: %v", list)
		}
		for _, frag := range []string{"-1", "1", "%231"} {
			if s := k.get("/snapshots/"+testOrg+"/prod/"+frag).want(t, http.StatusOK).JSON(t); s["compliant"] != false {
				t.Fatalf("snapshot %s: compliant %v", frag, s["compliant"])
			}
		}
	})
}

// TestContractCustomTypes: `kosli create attestation-type` sends no type_schema without
// --schema and its summary as an array of {name, expression}; the gets answer CLIENT-2.md
// section 4's shape, versioned or not.
func TestContractCustomTypes(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		setupFlow(t, k)
		types := "/custom-attestation-types/" + testOrg
		summary := []any{
			map[string]any{"name": "count", "expression": `[.a, .b] | map(select(.x == 1)) | length`},
			map[string]any{"name": "first", "expression": `.a["k"] | tostring`},
		}
		k.multipart(http.MethodPost, types, "data_json", map[string]any{"name": "loose", "summary": summary}).want(t, http.StatusCreated)
		k.multipart(http.MethodPost, types, "data_json", map[string]any{"name": "loose", "description": "second",
			"evaluator": map[string]any{"content_type": "jq", "rules": []string{".ok == true"}}},
			file{"type_schema", "schema.json", []byte(`{"type":"object","required":["ok"]}`)}).want(t, http.StatusOK)

		ct := k.get(types+"/loose").want(t, http.StatusOK).JSON(t)
		for _, key := range []string{"name", "org", "description", "archived", "created_by", "created_at", "last_modified_at", "versions"} {
			if _, ok := ct[key]; !ok {
				t.Errorf("type lacks %q: %v", key, ct)
			}
		}
		vs := ct["versions"].([]any)
		v1, v2 := vs[0].(map[string]any), vs[1].(map[string]any)
		if got, _ := json.Marshal(v1["summary"]); string(got) != mustJSON(t, summary) {
			t.Errorf("summary %s, want %s verbatim and in order", got, mustJSON(t, summary))
		}
		if s, ok := v1["type_schema"].(map[string]any); !ok || len(s) != 0 {
			t.Errorf("version 1 type_schema %v, want {}", v1["type_schema"])
		}
		if ev := v1["evaluator"].(map[string]any); len(ev) != 1 || ev["content_type"] != "default" {
			t.Errorf("version 1 evaluator %v, want {content_type: default}", ev)
		}
		if v2["summary"] != nil || v2["evaluator"].(map[string]any)["content_type"] != "jq" ||
			v2["type_schema"].(map[string]any)["type"] != "object" {
			t.Errorf("version 2: %v", v2)
		}

		one := k.get(types+"/loose?version=1").want(t, http.StatusOK).JSON(t)
		if len(one) != 4 || len(one["versions"].([]any)) != 1 || one["versions"].([]any)[0].(map[string]any)["version"] != float64(1) {
			t.Errorf("?version=1: %v", one)
		}
		if all := k.get(types+"/loose?version=latest").want(t, http.StatusOK).JSON(t); len(all["versions"].([]any)) != 2 {
			t.Errorf("a non-integer version answers the whole type: %v", all)
		}
		wantMessage(t, k.get(types+"/loose?version=7"), http.StatusNotFound, "version 7 does not exist for custom attestation type 'loose'")
		wantMessage(t, k.get(types+"/nope"), http.StatusNotFound, "Custom attestation type 'nope' does not exist for org '"+testOrg+"'")

		// Without a description the key is left out; a type without schema or rules takes any data.
		k.multipart(http.MethodPost, types, "data_json", map[string]any{"name": "anything"}).want(t, http.StatusCreated)
		if ct := k.get(types+"/anything").want(t, http.StatusOK).JSON(t); ct["description"] != nil {
			t.Errorf("description of a type without one: %v", ct)
		}
		k.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/custom", "data_json", map[string]any{
			"attestation_name": "extra", "type_name": "anything", "attestation_data": []any{"any", 1, nil},
		}).want(t, http.StatusCreated)

		k.send(http.MethodPut, types+"/anything/archive", nil).want(t, http.StatusOK)
		if ct := k.get(types+"/anything").want(t, http.StatusOK).JSON(t); ct["archived"] != true {
			t.Errorf("archived type: %v", ct)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestContractDefaultOrg: `kosli update default-org` (PUT /user/<org>, body null), `kosli get
// default-org` and `kosli enable beta`.
func TestContractDefaultOrg(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		defaultOrg := func(k *kosli) any {
			return k.get("/user/default-org").want(t, http.StatusOK).JSON(t)["default_org_name"]
		}
		k.send(http.MethodPut, "/user/"+testOrg, nil).want(t, http.StatusOK)
		if got := defaultOrg(k); got != testOrg {
			t.Errorf("a service account key's default organization: %v", got)
		}
		wantMessage(t, k.send(http.MethodPut, "/user/nowhere", nil), http.StatusForbidden, "Access denied to /api/v2/user/nowhere")

		// A person in two organizations: the first by name until one is chosen, then the choice.
		seed := Seed{Organizations: []SeedOrg{{Name: testOrg}, {Name: "zeta"}},
			Users: []SeedUser{{Name: "jane", Memberships: []SeedMembership{{Org: "zeta", Role: "member"}, {Org: testOrg, Role: "reader"}},
				APIKeys: []SeedKey{{Secret: "vt_jane_personal_key_00000000000"}}}}}
		if err := ApplySeed(context.Background(), e.store, seed); err != nil {
			t.Fatal(err)
		}
		jane := newKosli(t, e.base+"/api/v2", "vt_jane_personal_key_00000000000")
		if got := defaultOrg(jane); got != testOrg {
			t.Errorf("default organization before a choice: %v, want %s", got, testOrg)
		}
		jane.send(http.MethodPut, "/user/zeta", nil).want(t, http.StatusOK)
		if got := defaultOrg(jane); got != "zeta" {
			t.Errorf("default organization after choosing zeta: %v", got)
		}
		wantMessage(t, newKosli(t, e.base+"/api/v2", "").get("/user/default-org"), http.StatusUnauthorized,
			"Authentication required: send an API key as 'Authorization: Bearer <key>'")

		for _, on := range []bool{true, false} {
			k.send(http.MethodPut, "/organizations/"+testOrg+"/experimental_features", map[string]any{"experimental_features_enabled": on}).
				want(t, http.StatusOK)
		}
	})
}

// TestContractOverrideLinksCloudRun: `kosli attest override` sends the common attestation
// payload (repo_info, description, annotations, external_urls...) and may override an
// attestation the template expects but nobody reported; `kosli update control --link` sends
// links as an object; `kosli snapshot cloud-run` names the type in its body.
func TestContractOverrideLinksCloudRun(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		setupFlow(t, k)
		override := map[string]any{
			"attestation_name": "tests", "reason": "flaky runner", "new_compliance_status": true, "original_attestation_type": "generic",
			"git_commit_info": map[string]any{"sha1": "0123456789abcdef0123456789abcdef01234567", "message": "m", "author": "a",
				"timestamp": 1700000000, "branch": "main"},
			"repo_info":     map[string]any{"url": "https://github.com/acme/app", "name": "acme/app", "id": "42", "provider": "github"},
			"external_urls": map[string]any{"ci": map[string]any{"href": "https://ci.example.com/1"}},
			"origin_url":    "https://ci.example.com/1", "description": "overridden by the release manager",
			"user_data": map[string]any{"ticket": "REL-1"}, "annotations": map[string]any{"k": "v"},
		}
		// Nothing named tests was reported: the override stands in for it.
		if r := k.send(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/override", override).want(t, http.StatusCreated); strings.TrimSpace(string(r.Body)) != `"OK"` {
			t.Fatalf("override body %s, want \"OK\"", r.Body)
		}
		tr := k.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK).JSON(t)
		if cs := tr["compliance_status"].(map[string]any); cs["is_compliant"] != true {
			t.Fatalf("trail after overriding its only expected attestation: %v", cs)
		}
		// Then a reported one overridden the other way.
		k.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
			map[string]any{"attestation_name": "tests", "is_compliant": true}).want(t, http.StatusCreated)
		override["new_compliance_status"] = false
		k.send(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/override", override).want(t, http.StatusCreated)
		tr = k.get("/trails/"+testOrg+"/app/t1").want(t, http.StatusOK).JSON(t)
		if cs := tr["compliance_status"].(map[string]any); cs["is_compliant"] != false {
			t.Fatalf("trail after overriding its attestation to non-compliant: %v", cs)
		}
		override["annotations"] = ""
		wantError(t, k.send(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/override", override),
			http.StatusBadRequest, "Input payload validation failed", "annotations")

		// Control links replace each other; a name-only update keeps them.
		k.send(http.MethodPost, "/controls/"+testOrg, map[string]any{"identifier": "SEC-1", "name": "Security"}).want(t, http.StatusCreated)
		k.send(http.MethodPut, "/controls/"+testOrg+"/SEC-1", map[string]any{"links": map[string]any{"runbook": "https://example.com/runbook",
			"doc": "https://example.com/doc"}}).want(t, http.StatusOK)
		k.send(http.MethodPut, "/controls/"+testOrg+"/SEC-1", map[string]any{"links": map[string]any{"runbook": "https://example.com/v2"}}).
			want(t, http.StatusOK)
		k.send(http.MethodPut, "/controls/"+testOrg+"/SEC-1", map[string]any{"name": "Security review"}).want(t, http.StatusOK)
		c := k.get("/controls/"+testOrg+"/SEC-1").want(t, http.StatusOK).JSON(t)
		if got := mustJSON(t, c["links"]); got != `{"runbook":"https://example.com/v2"}` || c["name"] != "Security review" {
			t.Fatalf("control after three updates: links %s, name %v", got, c["name"])
		}
		wantError(t, k.send(http.MethodPut, "/controls/"+testOrg+"/SEC-1", map[string]any{"links": "https://example.com"}),
			http.StatusBadRequest, "Input payload validation failed", "links")
		wantMessage(t, k.send(http.MethodPut, "/controls/"+testOrg+"/NOPE", map[string]any{"links": map[string]any{}}),
			http.StatusNotFound, "Control 'NOPE' does not exist in organization '"+testOrg+"'")

		// Cloud Run, as the CLI sends it.
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "run", "type": "cloud-run", "description": ""}).
			want(t, http.StatusCreated)
		digest := "4d3ef2b3c4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1"
		k.send(http.MethodPut, "/environments/"+testOrg+"/run/report/cloud-run", map[string]any{"type": "cloud-run", "artifacts": []any{
			map[string]any{"digests": map[string]any{"europe-docker.pkg.dev/acme/app@sha256:" + digest: digest}, "creationTimestamp": 1700000000,
				"kind": "service", "serviceName": "app", "revisionName": "app-00001"},
			map[string]any{"digests": map[string]any{"europe-docker.pkg.dev/acme/job@sha256:" + digest: digest}, "creationTimestamp": 1700000000,
				"kind": "job", "jobName": "migrate"},
		}}).want(t, http.StatusCreated)
		if s := k.get("/snapshots/"+testOrg+"/run/-1").want(t, http.StatusOK).JSON(t); len(s["artifacts"].([]any)) == 0 {
			t.Fatalf("cloud-run snapshot holds nothing: %v", s)
		}
		wantError(t, k.send(http.MethodPut, "/environments/"+testOrg+"/run/report/cloud-run", map[string]any{"type": "K8S", "artifacts": []any{}}),
			http.StatusBadRequest, "Input payload validation failed", "type")
	})
}

// TestContractSnapshotMessages: a snapshot past the end or of an empty environment "resolves
// to" an index (never "does not exist"), echoing /snapshots' index and env-diff's snappish as
// sent; `log environment --interval NOW` sends a bare expression.
func TestContractSnapshotMessages(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		for _, name := range []string{"prod", "empty"} {
			k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": name, "type": "K8S", "description": ""}).want(t, http.StatusCreated)
		}
		// Three reports that differ make three snapshots.
		for i := range 3 {
			fp := fmt.Sprintf("%064x", i+1)
			k.send(http.MethodPut, "/environments/"+testOrg+"/prod/report/K8S", map[string]any{"artifacts": []any{
				map[string]any{"digests": map[string]any{fmt.Sprintf("app:%d", i): fp}, "creationTimestamp": 1700000000},
			}}).want(t, http.StatusCreated)
		}
		prefix := "Org: '" + testOrg + "'. "
		for frag, echo := range map[string]string{"23": "prod#23", "%2323": "prod#23"} {
			wantMessage(t, k.get("/snapshots/"+testOrg+"/prod/"+frag), http.StatusNotFound,
				prefix+"Snapshot '"+echo+"' resolves to 'prod#23'. len(snapshots) == 3. Indexes are 1-based")
		}
		wantMessage(t, k.get("/snapshots/"+testOrg+"/empty/-1"), http.StatusNotFound,
			prefix+"Snapshot 'empty#-1' resolves to 'empty#0'. len(snapshots) == 0. Indexes are 1-based")
		wantMessage(t, k.get("/env-diff/"+testOrg+"?snappish1=empty&snappish2=prod"), http.StatusNotFound,
			prefix+"Snapshot 'empty' resolves to 'empty#0'. len(snapshots) == 0. Indexes are 1-based")
		wantMessage(t, k.get("/env-diff/"+testOrg+"?snappish1=prod&snappish2=empty"), http.StatusNotFound,
			prefix+"Snapshot 'empty' resolves to 'empty#0'. len(snapshots) == 0. Indexes are 1-based")

		wantMessage(t, k.get("/environments/"+testOrg+"/prod/events?page=1&per_page=15&interval=&reverse=false&start=xyz"),
			http.StatusBadRequest, "Invalid interval value: xyz")
		k.get("/environments/"+testOrg+"/prod/events?page=1&per_page=15&interval=&reverse=false&start_ts=1700000000.5").
			want(t, http.StatusOK).Array(t)
		events := k.get("/environments/"+testOrg+"/prod/events?page=1&per_page=15&interval=NOW&reverse=false").want(t, http.StatusOK)
		events.Array(t)
		if s := k.get("/snapshots/"+testOrg+"/prod?page=1&per_page=15&interval=NOW&reverse=false").want(t, http.StatusOK).Array(t); len(s) != 1 ||
			s[0].(map[string]any)["index"] != float64(3) {
			t.Fatalf("snapshots of the interval NOW: %v", s)
		}
	})
}

// TestContractArtifactHistory: an artifact reported into a trail and never attested has one
// history event, "<template_reference_name> reported"; running and exited are arrays.
func TestContractArtifactHistory(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "app", "description": ""},
			file{"template_file", "t.yml", []byte("version: 1\ntrail:\n  artifacts:\n  - name: build\n")}).want(t, http.StatusCreated)
		k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t1"}).want(t, http.StatusCreated)
		fp := fmt.Sprintf("%064x", 7)
		commit := "0123456789abcdef0123456789abcdef01234567"
		r := k.send(http.MethodPost, "/artifacts/"+testOrg+"/app", map[string]any{"fingerprint": fp, "filename": "app:1", "git_commit": commit,
			"build_url": "https://ci.example.com/1", "commit_url": "https://github.com/acme/app/commit/" + commit,
			"template_reference_name": "build", "trail_name": "t1"}).want(t, http.StatusCreated)
		if got := r.JSON(t); got["message"] != "OK" || len(got) != 1 {
			t.Fatalf("report artifact body: %s", r.Body)
		}
		a := k.get("/artifacts/"+testOrg+"/app/fingerprint/"+fp).want(t, http.StatusOK).JSON(t)
		h := a["history"].([]any)
		if len(h) != 1 || h[0].(map[string]any)["event"] != "build reported" {
			t.Fatalf("history of an artifact never attested: %v", h)
		}
		if _, ok := h[0].(map[string]any)["timestamp"].(float64); !ok {
			t.Fatalf("history timestamp: %v", h)
		}
		for _, key := range []string{"running", "exited"} {
			if _, ok := a[key].([]any); !ok {
				t.Fatalf("%s is not an array: %v", key, a[key])
			}
		}

		// Running and exited name the environment and the snapshot it started or left in.
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S", "description": ""}).want(t, http.StatusCreated)
		k.send(http.MethodPut, "/environments/"+testOrg+"/prod/report/K8S", map[string]any{"artifacts": []any{
			map[string]any{"digests": map[string]any{"app": fp}, "creationTimestamp": 1700000000}}}).want(t, http.StatusCreated)
		a = k.get("/artifacts/"+testOrg+"/app/fingerprint/"+fp).want(t, http.StatusOK).JSON(t)
		if r := a["running"].([]any); len(r) != 1 || r[0].(map[string]any)["environment_name"] != "prod" || r[0].(map[string]any)["snapshot_index"] != float64(1) {
			t.Fatalf("running: %v", r)
		}
		// Item 9: the artifact's links carry its id, in the hosted 8-4-4-4-8 form, in the snapshot
		// as on the artifact itself.
		link, _ := a["html_url"].(string)
		if !regexp.MustCompile(`\?artifact_id=[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{8}$`).MatchString(link) {
			t.Fatalf("artifact html_url %q lacks an 8-4-4-4-8 artifact_id", link)
		}
		snap := k.get("/snapshots/"+testOrg+"/prod/-1").want(t, http.StatusOK).JSON(t)
		if arts := snap["artifacts"].([]any); len(arts) != 1 || arts[0].(map[string]any)["html_url"] != link {
			t.Fatalf("snapshot artifact html_url, want %q: %v", link, arts)
		}
		k.send(http.MethodPut, "/environments/"+testOrg+"/prod/report/K8S", map[string]any{"artifacts": []any{}}).want(t, http.StatusCreated)
		a = k.get("/artifacts/"+testOrg+"/app/fingerprint/"+fp).want(t, http.StatusOK).JSON(t)
		if x := a["exited"].([]any); len(x) != 1 || x[0].(map[string]any)["environment_name"] != "prod" || x[0].(map[string]any)["snapshot_index"] != float64(2) {
			t.Fatalf("exited: %v", x)
		}
	})
}

// TestContractListFilters: the list parameters of `kosli list environments`, `list controls`
// and `list flows`, with their defaults, validation messages and answers' shapes.
func TestContractListFilters(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		for _, env := range []struct{ name, typ string }{{"prod-eu", "K8S"}, {"Prod-us", "ECS"}, {"staging", "K8S"}, {"lab", "server"}} {
			k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": env.name, "type": env.typ, "description": ""}).
				want(t, http.StatusCreated)
		}
		k.send(http.MethodPatch, "/tags/"+testOrg+"/environment/prod-eu", map[string]any{"set_tags": map[string]string{"team": "a", "tier": "1"},
			"remove_tags": []string{}}).want(t, http.StatusOK)
		k.send(http.MethodPatch, "/tags/"+testOrg+"/environment/staging", map[string]any{"set_tags": map[string]string{"team": "b"},
			"remove_tags": []string{}}).want(t, http.StatusOK)
		names := func(r reply) string {
			var got []string
			for _, x := range r.want(t, http.StatusOK).Array(t) {
				got = append(got, x.(map[string]any)["name"].(string))
			}
			return strings.Join(got, ",")
		}
		envs := "/environments/" + testOrg
		for query, want := range map[string]string{
			"":                              "Prod-us,lab,prod-eu,staging",
			"?name=PROD":                    "Prod-us,prod-eu",
			"?type=K8S":                     "prod-eu,staging",
			"?type=K8S&type=server":         "lab,prod-eu,staging",
			"?tag=team":                     "prod-eu,staging",
			"?tag=team:b":                   "staging",
			"?tag=team&tag=tier:1":          "prod-eu",
			"?name=prod&type=K8S":           "prod-eu",
			"?sort_direction=desc":          "staging,prod-eu,lab,Prod-us",
			"?sort=name&sort_direction=asc": "Prod-us,lab,prod-eu,staging",
			"?name=nothing":                 "",
			"?space_id=s1":                  "",
		} {
			if got := names(k.get(envs + query)); got != want {
				t.Errorf("environments%s: %s, want %s", query, got, want)
			}
		}
		paged := k.get(envs+"?page=1&per_page=1&type=K8S").want(t, http.StatusOK).JSON(t)
		if paged["total_count"] != float64(2) || paged["total_pages"] != float64(2) || paged["per_page"] != float64(1) ||
			len(paged["environments"].([]any)) != 1 {
			t.Errorf("paged environments: %v", paged)
		}
		r := k.get(envs + "?type=k8s")
		wantError(t, r, http.StatusBadRequest, "Input payload validation failed", "query.type[0]")
		if !strings.Contains(string(r.Body), `Input should be 'K8S', 'ECS', 'S3', 'lambda', 'server', 'docker', 'azure-apps', 'cloud-run' or 'logical' [input: k8s]`) {
			t.Errorf("type message: %s", r.Body)
		}
		wantError(t, k.get(envs+"?sort=size"), http.StatusBadRequest, "Input payload validation failed", "query.sort")
		wantError(t, k.get(envs+"?sort_direction=up"), http.StatusBadRequest, "Input payload validation failed", "query.sort_direction")

		// Controls: search (identifier or name), tag, archived only, direction, per_page echoed.
		for _, c := range []struct{ id, name string }{{"SEC-1", "Security review"}, {"OPS-1", "Change approval"}, {"SEC-2", "Secrets scan"}} {
			k.send(http.MethodPost, "/controls/"+testOrg, map[string]any{"identifier": c.id, "name": c.name}).want(t, http.StatusCreated)
		}
		k.send(http.MethodPost, "/controls/"+testOrg+"/SEC-2/archive", nil).want(t, http.StatusOK)
		k.send(http.MethodPatch, "/tags/"+testOrg+"/control/OPS-1", map[string]any{"set_tags": map[string]string{"owner": "ops"},
			"remove_tags": []string{}}).want(t, http.StatusOK)
		ids := func(query string) string {
			body := k.get("/controls/"+testOrg+"?page=1&per_page=15"+query).want(t, http.StatusOK).JSON(t)
			if body["per_page"] != float64(15) {
				t.Errorf("controls%s: per_page %v", query, body["per_page"])
			}
			var got []string
			for _, x := range body["controls"].([]any) {
				got = append(got, x.(map[string]any)["identifier"].(string))
			}
			return strings.Join(got, ",")
		}
		for query, want := range map[string]string{
			"": "OPS-1,SEC-1", "&search=sec": "SEC-1", "&search=APPROVAL": "OPS-1", "&tag=owner:ops": "OPS-1",
			"&archived=true": "SEC-2", "&sort_direction=desc": "SEC-1,OPS-1",
		} {
			if got := ids(query); got != want {
				t.Errorf("controls%s: %s, want %s", query, got, want)
			}
		}
		wantError(t, k.get("/controls/"+testOrg+"?page=1&per_page=15&sort_direction=sideways"), http.StatusBadRequest,
			"Input payload validation failed", "query.sort_direction")
		wantError(t, k.get("/controls/"+testOrg+"?page=1&per_page=15&archived=maybe"), http.StatusBadRequest, "Input payload validation failed", "")

		// Tags take the word the user typed; a missing control's message begins with a quote.
		for _, kind := range []string{"environments/prod-eu", "environment/prod-eu", "env/prod-eu", "controls/OPS-1", "control/OPS-1"} {
			r := k.send(http.MethodPatch, "/tags/"+testOrg+"/"+kind, map[string]any{"set_tags": map[string]string{}, "remove_tags": []string{"absent"}})
			if r.want(t, http.StatusOK); strings.TrimSpace(string(r.Body)) != `"OK"` {
				t.Errorf("tag %s: %s", kind, r.Body)
			}
		}
		wantMessage(t, k.send(http.MethodPatch, "/tags/"+testOrg+"/control/NOPE", map[string]any{"set_tags": map[string]string{}, "remove_tags": []string{}}),
			http.StatusNotFound, `"Control 'NOPE' does not exist in organization '`+testOrg+`'`)

		// Flows: an empty search is refused.
		wantMessage(t, k.get("/flows/"+testOrg+"?search_by_name="), http.StatusBadRequest, "Empty string is not allowed for flow names.")
	})
}

// TestContractMessages: the validation texts of CLIENT-2.md sections 5 and 11, as the CLI
// prints them, and an attestation looked up by an unknown name.
func TestContractMessages(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		setupFlow(t, k)
		fieldText := func(r reply, field string) string {
			t.Helper()
			wantError(t, r, http.StatusBadRequest, "Input payload validation failed", field)
			var body struct {
				Errors map[string]string `json:"errors"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatalf("errors is not an object of strings: %s", r.Body)
			}
			return body.Errors[field]
		}
		for _, c := range []struct {
			name  string
			r     reply
			field string
			text  string
		}{
			{"control identifier", k.send(http.MethodPost, "/controls/"+testOrg, map[string]any{"identifier": "bad id", "name": "x"}),
				"identifier", `String should match pattern '^[a-zA-Z0-9\-._~]+$' [input: bad id]`},
			{"environment type", k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "x", "type": "k8s", "description": ""}),
				"type", `Input should be 'K8S', 'ECS', 'S3', 'lambda', 'server', 'docker', 'azure-apps', 'cloud-run' or 'logical' [input: k8s]`},
			{"environment name", k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "-x", "type": "K8S", "description": ""}),
				"name", `String should match pattern '^[a-zA-Z0-9][a-zA-Z0-9\.\-_]*$' [input: -x]`},
			{"flow rename", k.send(http.MethodPut, "/flows/"+testOrg+"/app/rename", map[string]any{"new_name": "-a"}),
				"new_name", `String should match pattern '^[a-zA-Z0-9][a-zA-Z0-9\.\-_~]*$' [input: -a]`},
			{"external fingerprint", k.send(http.MethodPost, "/artifacts/"+testOrg+"/app", map[string]any{
				"fingerprint": fmt.Sprintf("%064x", 1), "filename": "a", "git_commit": "0123456789abcdef0123456789abcdef01234567",
				"build_url": "https://ci.example.com/1", "commit_url": "https://github.com/acme/app/commit/1", "trail_name": "t1",
				"external_urls": map[string]any{"sbom": map[string]any{"href": "https://sbom.example.com", "fingerprint": "7509e5bda0"}}}),
				"external_urls.sbom.fingerprint", `String should match pattern '^[a-f0-9]{64}$' [input: 7509e5bda0]`},
		} {
			if got := fieldText(c.r, c.field); got != c.text {
				t.Errorf("%s: %q, want %q", c.name, got, c.text)
			}
		}
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S", "description": ""}).want(t, http.StatusCreated)
		if got := fieldText(k.send(http.MethodPut, "/environments/"+testOrg+"/prod/rename", map[string]any{"new_name": "a~b"}), "new_name"); got !=
			`String should match pattern '^[a-zA-Z0-9][a-zA-Z0-9\.\-_]*$' [input: a~b]` {
			t.Errorf("environment rename: %q", got)
		}

		// Invalid templates: create flow answers the validation message; begin trail pydantic's.
		bad := []byte("version: 1\ntrail:\n  attestations:\n  - name: tests\n    type: not-supported\n")
		r := k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "f2", "description": ""},
			file{"template_file", "t.yml", bad})
		if r.want(t, http.StatusBadRequest); r.JSON(t)["message"] != "Input payload validation failed" {
			t.Errorf("create flow with an invalid template: %s", r.Body)
		}
		r = k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t9"}, file{"template_file", "t.yml", bad})
		if msg, _ := r.want(t, http.StatusBadRequest).JSON(t)["message"].(string); !regexp.MustCompile(`\d+ validation errors for Template\n.`).MatchString(msg) {
			t.Errorf("begin trail with an invalid template: %q", msg)
		}

		// An attestation name nobody reported: an empty list.
		if got := k.get("/attestations/"+testOrg+"/app/trail/t1/nope").want(t, http.StatusOK).Array(t); len(got) != 0 {
			t.Errorf("unknown attestation name: %v", got)
		}
	})
}

// TestContractOpenAPIStatuses: the description lists the 200 of create-or-update operations
// beside their 201, and the 409 of create control.
func TestContractOpenAPIStatuses(t *testing.T) {
	base, _ := startEmbedded(t)
	var spec struct {
		Paths map[string]map[string]struct {
			Responses map[string]any `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(newKosli(t, base, "").get("/api/v2/openapi.json").want(t, http.StatusOK).Body, &spec); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path, status string }{
		{"put", "/environments/{org}", "200"}, {"put", "/environments/{org}", "201"}, {"put", "/trails/{org}/{flow}", "200"},
		{"post", "/custom-attestation-types/{org}", "200"}, {"put", "/policies/{org}", "200"}, {"post", "/controls/{org}", "409"},
		{"put", "/user/{org}", "200"}, {"get", "/user/default-org", "200"},
	} {
		if _, ok := spec.Paths["/api/v2"+c.path][c.method].Responses[c.status]; !ok {
			t.Errorf("%s %s does not list %s", c.method, c.path, c.status)
		}
	}
}

// TestContractRepos: repositories come from the repo_info of trails, attestations and
// artifacts; `kosli get repo` sends a name with '/' as several path segments, `list repos`
// its filters, `tag repo` the inner id.
func TestContractRepos(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		github := func(id string) map[string]any {
			return map[string]any{"id": id, "name": "acme/app", "url": "https://github.com/acme/app", "provider": "github"}
		}
		k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "app", "description": ""},
			file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)
		k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t1", "repo_info": github("42")}).
			want(t, http.StatusCreated)
		k.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
			map[string]any{"attestation_name": "tests", "repo_info": github("43")}).want(t, http.StatusCreated)
		commit := "0123456789abcdef0123456789abcdef01234567"
		k.send(http.MethodPost, "/artifacts/"+testOrg+"/app", map[string]any{"fingerprint": fmt.Sprintf("%064x", 3), "filename": "app:1",
			"git_commit": commit, "build_url": "https://ci.example.com/1", "commit_url": "https://gitlab.com/acme/app/-/commit/" + commit,
			"trail_name": "t1", "repo_info": map[string]any{"id": "7", "name": "acme/app", "url": "https://gitlab.com/acme/app",
				"provider": "gitlab"}}).want(t, http.StatusCreated)

		repos := "/repos/" + testOrg
		list := func(query string) []any {
			t.Helper()
			body := k.get(repos+"?page=1&per_page=15"+query).want(t, http.StatusOK).JSON(t)
			for _, key := range []string{"page", "per_page", "total_pages", "total_count"} {
				if _, ok := body[key].(float64); !ok {
					t.Fatalf("list repos%s: %s is not a number: %v", query, key, body)
				}
			}
			return body["repos"].([]any)
		}
		if got := list(""); len(got) != 3 {
			t.Fatalf("repos: %v", got)
		}
		wantMessage(t, k.get(repos+"/acme/app"), http.StatusBadRequest,
			"Multiple repos named 'acme/app' exist (github, gitlab). Specify the 'provider'")
		r := k.get(repos+"/acme/app?provider=gitlab").want(t, http.StatusOK).JSON(t)
		id, _ := r["id"].(string)
		if id == "" || r["name"] != "acme/app" || r["provider"] != "gitlab" || r["url"] != "https://gitlab.com/acme/app" || mustJSON(t, r["tags"]) != "{}" {
			t.Fatalf("repo: %v", r)
		}
		k.get(repos+"/acme/app?provider=github").want(t, http.StatusOK) // two github repos of that name: one of them
		if byID := k.get(repos+"/anything?id="+id).want(t, http.StatusOK).JSON(t); byID["id"] != id {
			t.Fatalf("repo by id: %v", byID)
		}
		wantMessage(t, k.get(repos+"/acme/nope"), http.StatusNotFound, "Repo 'acme/nope' not found")
		wantMessage(t, k.get(repos+"/acme/app?provider=bitbucket"), http.StatusNotFound, "Repo 'acme/app' not found")
		wantMessage(t, k.get(repos+"/x?id=nope"), http.StatusNotFound, "Repo 'nope' not found")

		for query, want := range map[string]int{"&search=ACME/A": 3, "&name=acme/app&provider=gitlab": 1, "&repo_id=42": 1,
			"&name=acme": 0, "&tag=team": 0, "&sort_direction=desc": 3} {
			if got := list(query); len(got) != want {
				t.Errorf("list repos%s: %d, want %d", query, len(got), want)
			}
		}
		wantError(t, k.get(repos+"?page=1&per_page=15&provider=svn"), http.StatusBadRequest, "Input payload validation failed", "query.provider")

		// Tag repo by its inner id, as the CLI resolves it.
		k.send(http.MethodPatch, "/tags/"+testOrg+"/repo/"+id, map[string]any{"set_tags": map[string]string{"team": "a"}, "remove_tags": []string{}}).
			want(t, http.StatusOK)
		if got := list("&tag=team:a"); len(got) != 1 || got[0].(map[string]any)["id"] != id {
			t.Errorf("tagged repos: %v", got)
		}
		wantMessage(t, k.send(http.MethodPatch, "/tags/"+testOrg+"/repos/nope", map[string]any{"set_tags": map[string]string{}, "remove_tags": []string{}}),
			http.StatusNotFound, "Repo 'nope' not found")

		// Lists filtered by repository name.
		if got := k.get("/artifacts/"+testOrg+"?page=1&per_page=15&repo_name=acme/app").want(t, http.StatusOK).Array(t); len(got) != 1 {
			t.Errorf("artifacts of acme/app: %v", got)
		}
		wantMessage(t, k.get("/artifacts/"+testOrg+"?page=1&per_page=15&repo_name=acme/nope"), http.StatusNotFound, "Repo 'acme/nope' not found")
		k.send(http.MethodPut, "/environments/"+testOrg, map[string]any{"name": "prod", "type": "K8S", "description": ""}).want(t, http.StatusCreated)
		wantMessage(t, k.get("/environments/"+testOrg+"/prod/events?page=1&per_page=15&interval=&reverse=false&repo_name=acme/nope"),
			http.StatusNotFound, "Repo 'acme/nope' not found")
	})
}
