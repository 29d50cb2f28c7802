package app

import (
	"net/http"
	"strings"
	"testing"
)

const fullTemplate = `version: 1
trail:
  attestations:
  - name: pr
    type: pull_request
  - name: unit-tests
    type: junit
  artifacts:
  - name: backend
    attestations:
    - name: coverage
      type: custom:coverage
    - name: security
      type: decision
    - name: smoke
      type: generic
`

const coverageSchema = `{"type": "object", "properties": {"line_coverage": {"type": "number"}}, "required": ["line_coverage"]}`

var (
	fpBackend = strings.Repeat("ab", 32)
	commit    = strings.Repeat("c", 40)
)

func commitInfo() map[string]any {
	return map[string]any{"sha1": commit, "message": "Add feature", "author": "Jane Doe <jane@example.com>",
		"timestamp": 1747062671, "branch": "main", "url": "https://github.com/acme/app/commit/" + commit}
}

// TestEndToEnd walks a pipeline as the Kosli CLI drives it: a flow with a template, a trail,
// every kind of evidence, an artifact, and the trail's compliance at each step.
func TestEndToEnd(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		org := "/" + testOrg
		k.multipart(http.MethodPut, "/flows"+org+"/template_file", "data_json",
			map[string]any{"name": "app", "description": "the app"},
			file{"template_file", "template.yml", []byte(fullTemplate)}).want(t, http.StatusCreated)
		k.multipart(http.MethodPut, "/flows"+org+"/template_file", "data_json",
			map[string]any{"name": "app", "description": "the app, updated"},
			file{"template_file", "template.yml", []byte(fullTemplate)}).want(t, http.StatusOK)

		flow := k.get("/flows"+org+"/app").want(t, http.StatusOK).JSON(t)
		if flow["visibility"] != "private" || flow["description"] != "the app, updated" || flow["template"] != fullTemplate {
			t.Fatalf("flow: %v", flow)
		}

		k.multipart(http.MethodPut, "/trails"+org+"/app", "data_json",
			map[string]any{"name": commit, "git_commit_info": commitInfo(), "origin_url": "https://ci/run/1", "user_data": map[string]any{}},
		).want(t, http.StatusCreated)
		k.multipart(http.MethodPut, "/trails"+org+"/app", "data_json",
			map[string]any{"name": commit, "description": "again"}).want(t, http.StatusOK)

		trailPath := "/trails" + org + "/app/" + commit
		tr := k.get(trailPath).want(t, http.StatusOK).JSON(t)
		if tr["compliance_state"] != "INCOMPLETE" || tr["created_by"] != "admin" {
			t.Fatalf("new trail: %v", tr)
		}

		att := "/attestations" + org + "/app/trail/" + commit + "/"
		k.multipart(http.MethodPost, att+"pull_request", "data_json", map[string]any{
			"attestation_name": "pr", "git_provider": "github", "git_commit_info": commitInfo(), "user_data": map[string]any{},
			"pull_requests": []any{map[string]any{"url": "https://github.com/acme/app/pull/1", "state": "MERGED",
				"merge_commit": commit, "author": "jane", "title": "Feature", "head_ref": "feat", "base_ref": "main",
				"approvers": []any{map[string]any{"username": "bob", "state": "APPROVED", "timestamp": 1747062000}},
				"commits": []any{map[string]any{"sha1": commit, "message": "Add feature", "author": "Jane Doe <jane@example.com>",
					"timestamp": 1747062671, "branch": "feat", "verified": true, "signature_state": "valid"}}}},
		}).want(t, http.StatusCreated)
		k.multipart(http.MethodPost, att+"junit", "data_json", map[string]any{
			"attestation_name": "unit-tests", "git_commit_info": commitInfo(), "user_data": map[string]any{},
			"junit_results": []any{map[string]any{"name": "suite", "failures": 0, "errors": 0, "skipped": 1, "total": 12, "duration": 1.5}},
		}, file{"attachment_file", "junit.xml", []byte("<testsuite/>")}).want(t, http.StatusCreated)

		// Evidence for the artifact before the artifact exists binds by template name.
		k.multipart(http.MethodPost, "/custom-attestation-types"+org, "data_json", map[string]any{
			"name": "coverage", "description": "line coverage",
			"evaluator": map[string]any{"content_type": "jq", "rules": []string{".line_coverage >= 80"}},
		}, file{"type_schema", "schema.json", []byte(coverageSchema)}).want(t, http.StatusCreated)
		k.multipart(http.MethodPost, att+"custom", "data_json", map[string]any{
			"attestation_name": "coverage", "target_artifacts": []string{"backend"}, "git_commit_info": commitInfo(),
			"type_name": "coverage", "attestation_data": map[string]any{"line_coverage": 91.5}, "user_data": map[string]any{},
		}).want(t, http.StatusCreated)

		k.send(http.MethodPost, "/artifacts"+org+"/app", map[string]any{
			"fingerprint": fpBackend, "filename": "backend:1.0", "git_commit": commit, "git_commit_info": commitInfo(),
			"build_url": "https://ci/run/1", "commit_url": "https://github.com/acme/app/commit/" + commit,
			"repo_url": "https://github.com/acme/app", "template_reference_name": "backend", "trail_name": commit,
		}).want(t, http.StatusCreated)

		k.send(http.MethodPost, "/controls"+org, map[string]any{"identifier": "SEC-1", "name": "Security review"}).
			want(t, http.StatusCreated)
		k.multipart(http.MethodPost, att+"system", "data_json", map[string]any{
			"attestation_name": "security", "artifact_fingerprint": fpBackend, "type_name": "decision",
			"control": "SEC-1", "attestation_data": map[string]any{"is_compliant": true}, "user_data": map[string]any{},
		}).want(t, http.StatusCreated)

		tr = k.get(trailPath).want(t, http.StatusOK).JSON(t)
		if tr["compliance_state"] != "INCOMPLETE" {
			t.Fatalf("smoke missing, want INCOMPLETE: %v", tr["compliance_status"])
		}
		k.multipart(http.MethodPost, att+"generic", "data_json", map[string]any{
			"attestation_name": "smoke", "artifact_fingerprint": fpBackend, "is_compliant": true, "user_data": map[string]any{},
		}).want(t, http.StatusCreated)

		tr = k.get(trailPath).want(t, http.StatusOK).JSON(t)
		if tr["compliance_state"] != "COMPLIANT" || tr["is_compliant"] != true {
			t.Fatalf("want COMPLIANT: %v", tr["compliance_status"])
		}
		cs := tr["compliance_status"].(map[string]any)
		backend := cs["artifacts_statuses"].(map[string]any)["backend"].(map[string]any)
		if backend["artifact_fingerprint"] != fpBackend || backend["status"] != "COMPLIANT" {
			t.Fatalf("backend status: %v", backend)
		}
		for _, s := range backend["attestations_statuses"].([]any) {
			s := s.(map[string]any)
			if s["status"] != "COMPLETE" || s["is_compliant"] != true {
				t.Fatalf("artifact attestation: %v", s)
			}
		}

		art := k.get("/artifacts"+org+"/app/fingerprint/"+fpBackend[:7]).want(t, http.StatusOK).JSON(t)
		if art["state"] != "COMPLIANT" || art["trail_name"] != commit || !strings.Contains(art["html_url"].(string), "/acme/flows/app/artifacts/"+fpBackend) {
			t.Fatalf("artifact: %v", art)
		}

		// A failing unit test run turns the trail and the artifact non-compliant.
		k.multipart(http.MethodPost, att+"junit", "data_json", map[string]any{
			"attestation_name": "unit-tests", "user_data": map[string]any{},
			"junit_results": []any{map[string]any{"name": "suite", "failures": 2, "errors": 0, "skipped": 0, "total": 12, "duration": 1.5}},
		}).want(t, http.StatusCreated)
		tr = k.get(trailPath).want(t, http.StatusOK).JSON(t)
		if tr["compliance_state"] != "NON-COMPLIANT" {
			t.Fatalf("want NON-COMPLIANT: %v", tr["compliance_status"])
		}
		if art := k.get("/artifacts" + org + "/app/fingerprint/" + fpBackend).JSON(t); art["state"] != "NON-COMPLIANT" {
			t.Fatalf("artifact after failing tests: %v", art["state"])
		}

		prs := k.get(att+"pr").want(t, http.StatusOK).Array(t)
		commits := prs[0].(map[string]any)["pull_requests"].([]any)[0].(map[string]any)["commits"].([]any)
		if commits[0].(map[string]any)["verified"] != true {
			t.Fatalf("github commits keep verified: %v", commits)
		}
		junits := k.get(att+"unit-tests").want(t, http.StatusOK).Array(t)
		if len(junits) != 2 || junits[1].(map[string]any)["has_audit_package"] != true {
			t.Fatalf("junit attestations: %v", junits)
		}
	})
}
