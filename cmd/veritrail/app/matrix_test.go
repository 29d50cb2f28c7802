package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/veritrail/veritrail/internal/store"
)

// The access matrix calls every operation of the OpenAPI description as every kind of caller
// and checks each answer's status and that it holds no data of another organization. An
// operation without a sample below fails the test: add one when adding an operation.

// grants is the role table as docs/ARCHITECTURE.md states it, restated here so that a change
// to the code's table must be made on purpose in both places.
func grants(role string) []string {
	return map[string][]string{
		"admin":       {"read", "snapshot", "write", "admin"},
		"member":      {"read", "snapshot", "write"},
		"snapshotter": {"snapshot"},
		"reader":      {"read"},
	}[role]
}

// publicReads are the operations an anonymous caller may use in a public organization, as
// docs/ARCHITECTURE.md lists them.
func publicReads() []string {
	return []string{
		"getFlow", "listFlows", "getTrail", "listTrails",
		"getArtifact", "getArtifactsByCommit", "latestCommit", "listArtifacts",
		"getEnvironment", "listEnvironments", "listEnvironmentEvents",
		"getSnapshot", "listSnapshots", "diffSnapshots",
	}
}

// call is one request of the matrix.
type call struct {
	path   string    // below /api/v2, with its query
	body   any       // JSON body of a write (nil sends the CLI's null)
	form   *formCall // a multipart body instead
	status int       // the answer to a caller allowed to make it
}

type formCall struct {
	field   string
	payload any
	files   []file
}

// sample says how to call one operation. fresh is set when the caller is allowed, so the call
// takes effect: an operation that uses up its target (archive, rename, delete, revoke,
// rotate) then gets a new target of its own.
type sample struct {
	privilege string
	make      func(m *matrix, org string, fresh bool) call
}

func marker(org string) string { return "marker-of-" + org }

// fingerprintOf is a fingerprint unique to n.
func fingerprintOf(n int) string {
	h := sha256.Sum256([]byte(fmt.Sprint("matrix", n)))
	return hex.EncodeToString(h[:])
}

func read(path string) func(*matrix, string, bool) call {
	return func(_ *matrix, org string, _ bool) call {
		return call{path: strings.ReplaceAll(path, "ORG", org), status: http.StatusOK}
	}
}

func attest(kind string, data func(m *matrix, org string) map[string]any) sample {
	return sample{"write", func(m *matrix, org string, _ bool) call {
		payload := data(m, org)
		payload["attestation_name"] = fmt.Sprintf("%s-%d", kind, m.next())
		return call{path: "/attestations/" + org + "/app/trail/t1/" + kind, status: http.StatusCreated,
			form: &formCall{field: "data_json", payload: payload}}
	}}
}

func samples() map[string]sample {
	all := map[string]sample{
		// Reads.
		"getFlow":                {"read", read("/flows/ORG/app")},
		"listFlows":              {"read", read("/flows/ORG")},
		"getTrail":               {"read", read("/trails/ORG/app/t1")},
		"listTrails":             {"read", read("/trails/ORG")},
		"getArtifact":            {"read", read("/artifacts/ORG/app/fingerprint/" + fpBackend)},
		"getArtifactsByCommit":   {"read", read("/artifacts/ORG/app/commit_sha/" + commit)},
		"latestCommit":           {"read", read("/artifacts/ORG/app/" + fpBackend + "/latest_commit")},
		"listArtifacts":          {"read", read("/artifacts/ORG")},
		"getEnvironment":         {"read", read("/environments/ORG/prod")},
		"listEnvironments":       {"read", read("/environments/ORG")},
		"listEnvironmentEvents":  {"read", read("/environments/ORG/prod/events")},
		"getSnapshot":            {"read", read("/snapshots/ORG/prod/-1")},
		"listSnapshots":          {"read", read("/snapshots/ORG/prod")},
		"diffSnapshots":          {"read", read("/env-diff/ORG?snappish1=prod%231&snappish2=prod")},
		"getApproval":            {"read", read("/approvals/ORG/app/1")},
		"listApprovals":          {"read", read("/approvals/ORG/app")},
		"getTrailAttestation":    {"read", read("/attestations/ORG/app/trail/t1/tests")},
		"getArtifactAttestation": {"read", read("/attestations/ORG/app/artifact/" + fpBackend + "/smoke")},
		"listAttestations":       {"read", read("/attestations/ORG")},
		"getCustomType":          {"read", read("/custom-attestation-types/ORG/coverage")},
		"listCustomTypes":        {"read", read("/custom-attestation-types/ORG")},
		"getDefaultOrg":          {"read", read("/user/default-org")},
		"listRepos":              {"read", read("/repos/ORG")},
		"getRepo":                {"read", read("/repos/ORG/solo")},
		"setDefaultOrg": {"read", func(_ *matrix, org string, _ bool) call {
			return call{path: "/user/" + org, status: http.StatusOK}
		}},
		"setExperimentalFeatures": {"admin", func(_ *matrix, org string, _ bool) call {
			return call{path: "/organizations/" + org + "/experimental_features", status: http.StatusOK,
				body: map[string]any{"experimental_features_enabled": true}}
		}},
		"searchSha": {"read", read("/search/ORG/sha/" + fpBackend[:8])},
		"getEvidence": {"read", func(m *matrix, org string, _ bool) call {
			return call{path: "/attestations/" + org + "/app/trail/t1/attestation/" + m.fixtures[org].evidenceID + "/evidence",
				status: http.StatusOK}
		}},
		"listServiceAccounts": {"admin", read("/service-accounts/ORG")},
		"getServiceAccount":   {"admin", read("/service-accounts/ORG/svc")},
		"listAPIKeys":         {"admin", read("/service-accounts/ORG/svc/api-keys")},
		"getAPIKey": {"admin", func(m *matrix, org string, _ bool) call {
			return call{path: "/service-accounts/" + org + "/svc/api-keys/" + m.fixtures[org].keyID, status: http.StatusOK}
		}},
		"listAudit":                    {"admin", read("/audit/ORG")},
		"getControl":                   {"read", read("/controls/ORG/SEC-1")},
		"listEnvironmentNotifications": {"read", read("/organizations/ORG/environments_notifications")},
		"getEnvironmentNotification":   {"read", read("/organizations/ORG/environments_notifications/1")},
		"listActions":                  {"read", read("/actions/ORG")},
		"getPolicy":                    {"read", read("/policies/ORG/pol")},
		"listPolicies":                 {"read", read("/policies/ORG")},
		"assertArtifact":               {"read", read("/asserts/ORG/fingerprint/" + fpBackend)},
		"whatIfPolicy": {"read", func(m *matrix, org string, _ bool) call {
			return call{path: "/environments/" + org + "/polenv/what-if", status: http.StatusOK,
				form: &formCall{field: "payload", payload: map[string]any{"name": "draft"},
					files: []file{{"policy_file", "draft.yml", []byte(matrixPolicy(m.next()))}}}}
		}},
		"whatIfFlowTemplate": {"read", func(_ *matrix, org string, _ bool) call {
			return call{path: "/flows/" + org + "/app/what-if", status: http.StatusOK,
				form: &formCall{field: "payload", payload: map[string]any{"name": "draft"},
					files: []file{{"template_file", "draft.yml", []byte(simpleTemplate)}}}}
		}},
		"listNotificationDeadLetters": {"admin", read("/organizations/ORG/environments_notifications/1/dead_letters")},
		"listRejectedMessages":        {"admin", read("/rejected-messages/ORG")},
		"getRejectedMessage":          {"admin", read("/rejected-messages/ORG/dead-of-ORG")},
		"replayRejectedMessage": {"admin", func(_ *matrix, org string, _ bool) call {
			return call{path: "/rejected-messages/" + org + "/dead-of-" + org + "/replay", status: http.StatusAccepted}
		}},
		"listControls": {"read", read("/controls/ORG")},

		// Evidence writes.
		"createFlowWithTemplate": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/flows/" + org + "/template_file", status: http.StatusCreated, form: &formCall{field: "data_json",
				payload: map[string]any{"name": fmt.Sprintf("f-%d", m.next())},
				files:   []file{{"template_file", "t.yml", []byte(simpleTemplate)}}}}
		}},
		"createFlow": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/flows/" + org, status: http.StatusCreated,
				body: map[string]any{"name": fmt.Sprintf("f-%d", m.next()), "description": "", "template": []string{"tests"}}}
		}},
		"renameFlow": {"write", func(m *matrix, org string, fresh bool) call {
			return call{path: "/flows/" + org + "/" + m.flow(org, fresh) + "/rename", status: http.StatusOK,
				body: map[string]any{"new_name": fmt.Sprintf("renamed-%d", m.next())}}
		}},
		"archiveFlow": {"write", func(m *matrix, org string, fresh bool) call {
			return call{path: "/flows/" + org + "/" + m.flow(org, fresh) + "/archive", status: http.StatusOK}
		}},
		"updateTags": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/tags/" + org + "/flow/app", status: http.StatusOK,
				body: map[string]any{"set_tags": map[string]string{"team": fmt.Sprint("t", m.next())}}}
		}},
		"beginTrail": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/trails/" + org + "/app", status: http.StatusCreated,
				form: &formCall{field: "data_json", payload: map[string]any{"name": fmt.Sprintf("t-%d", m.next())}}}
		}},
		"reportArtifact": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/artifacts/" + org + "/app", status: http.StatusCreated, body: map[string]any{
				"fingerprint": fingerprintOf(m.next()), "filename": "x", "build_url": "b", "commit_url": "c", "trail_name": "t1"}}
		}},
		"attest_generic": attest("generic", func(*matrix, string) map[string]any { return map[string]any{"is_compliant": true} }),
		"attest_junit": attest("junit", func(*matrix, string) map[string]any {
			return map[string]any{"junit_results": []any{map[string]any{"name": "s", "failures": 0, "errors": 0, "total": 1}}}
		}),
		"attest_snyk": attest("snyk", func(*matrix, string) map[string]any {
			return map[string]any{"snyk_results": map[string]any{"results": []any{}}}
		}),
		"attest_sonar": attest("sonar", func(*matrix, string) map[string]any {
			return map[string]any{"sonar_results": map[string]any{"qualityGate": map[string]any{"status": "OK"}}}
		}),
		"attest_jira": attest("jira", func(*matrix, string) map[string]any {
			return map[string]any{"jira_results": []any{map[string]any{"issue_id": "J-1", "issue_exists": true}}}
		}),
		"attest_pull_request": attest("pull_request", func(*matrix, string) map[string]any {
			return map[string]any{"git_provider": "github", "pull_requests": []any{map[string]any{
				"url": "https://github.com/acme/app/pull/1", "state": "MERGED", "merge_commit": commit, "commits": []any{}}}}
		}),
		"attest_custom": attest("custom", func(*matrix, string) map[string]any {
			return map[string]any{"type_name": "coverage", "attestation_data": map[string]any{"line_coverage": 90}}
		}),
		"attest_system": attest("system", func(*matrix, string) map[string]any {
			return map[string]any{"type_name": "decision", "control": "SEC-1", "attestation_data": map[string]any{"is_compliant": true}}
		}),
		"overrideAttestation": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/attestations/" + org + "/app/trail/t1/override", status: http.StatusCreated,
				body: map[string]any{"attestation_name": "tests", "reason": "matrix", "new_compliance_status": "COMPLIANT"}}
		}},
		"createCustomType": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/custom-attestation-types/" + org, status: http.StatusCreated, form: &formCall{field: "data_json",
				payload: map[string]any{"name": fmt.Sprintf("ct-%d", m.next())},
				files:   []file{{"type_schema", "s.json", []byte(`{"type": "object"}`)}}}}
		}},
		"archiveCustomType": {"write", func(m *matrix, org string, fresh bool) call {
			name := "coverage"
			if fresh {
				name = fmt.Sprintf("ct-%d", m.next())
				m.admin(org).multipart(http.MethodPost, "/custom-attestation-types/"+org, "data_json", map[string]any{"name": name},
					file{"type_schema", "s.json", []byte(`{"type": "object"}`)}).want(m.t, http.StatusCreated)
				m.admin(org).get("/custom-attestation-types/"+org+"/"+name).want(m.t, http.StatusOK)
			}
			return call{path: "/custom-attestation-types/" + org + "/" + name + "/archive", status: http.StatusOK}
		}},
		"createControl": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/controls/" + org, status: http.StatusCreated,
				body: map[string]any{"identifier": fmt.Sprintf("CTL-%d", m.next()), "name": "matrix"}}
		}},
		"updateControl": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/controls/" + org + "/SEC-1", status: http.StatusOK,
				body: map[string]any{"description": fmt.Sprintf("%s %d", marker(org), m.next())}}
		}},
		"archiveControl": {"write", func(m *matrix, org string, fresh bool) call {
			id := "SEC-1"
			if fresh { // SEC-1 stays active for the decisions
				id = fmt.Sprintf("CTL-%d", m.next())
				m.admin(org).send(http.MethodPost, "/controls/"+org, map[string]any{"identifier": id, "name": "to archive"}).
					want(m.t, http.StatusCreated)
				m.admin(org).get("/controls/"+org+"/"+id).want(m.t, http.StatusOK) // applied, for every key
			}
			return call{path: "/controls/" + org + "/" + id + "/archive", status: http.StatusOK}
		}},
		"unarchiveControl": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/controls/" + org + "/SEC-1/unarchive", status: http.StatusOK}
		}},
		"createEnvironmentNotification": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/organizations/" + org + "/environments_notifications", status: http.StatusCreated,
				body: matrixRule(fmt.Sprintf("rule-%d", m.next()))}
		}},
		"updateEnvironmentNotification": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/organizations/" + org + "/environments_notifications/1", status: http.StatusOK,
				body: matrixRule(fmt.Sprintf("%s %d", marker(org), m.next()))}
		}},
		"deleteEnvironmentNotification": {"write", func(m *matrix, org string, fresh bool) call {
			number := float64(1)
			if fresh { // rule 1 stays for the other samples
				r := m.admin(org).send(http.MethodPost, "/organizations/"+org+"/environments_notifications", matrixRule("to delete")).
					want(m.t, http.StatusCreated).JSON(m.t)
				number = r["number"].(float64)
			}
			return call{path: fmt.Sprintf("/organizations/%s/environments_notifications/%.0f", org, number), status: http.StatusOK}
		}},
		"createPolicy": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/policies/" + org, status: http.StatusCreated,
				form: &formCall{field: "payload", payload: map[string]any{"name": fmt.Sprintf("pol-%d", m.next()), "type": "env"},
					files: []file{{"policy_file", "policy.yml", []byte(matrixPolicy(0))}}}}
		}},
		"putPolicy": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/policies/" + org + "/pol", status: http.StatusOK, // a new version of pol
				form: &formCall{field: "payload", payload: map[string]any{"type": "env"},
					files: []file{{"policy_file", "policy.yml", []byte(matrixPolicy(m.next()))}}}}
		}},
		"attachPolicies": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/environments/" + org + "/polenv/policies", status: http.StatusOK, body: map[string]any{"policy_names": []string{"pol"}}}
		}},
		"attachPoliciesPut": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/environments/" + org + "/polenv/policies", status: http.StatusOK,
				body: map[string]any{"policy_names": []string{"pol"}}}
		}},
		"detachPolicies": {"write", func(m *matrix, org string, fresh bool) call {
			if fresh { // attached first, so that there is something to detach
				m.admin(org).send(http.MethodPost, "/environments/"+org+"/polenv/policies", map[string]any{"policy_names": []string{"pol"}}).
					want(m.t, http.StatusOK)
				m.admin(org).get("/environments/"+org+"/polenv").want(m.t, http.StatusOK)
			}
			return call{path: "/environments/" + org + "/polenv/policies", status: http.StatusOK, body: map[string]any{"policy_names": []string{"pol"}}}
		}},
		"createEnvironment": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/environments/" + org, status: http.StatusCreated,
				body: map[string]any{"name": fmt.Sprintf("e-%d", m.next()), "type": "server"}}
		}},
		"updateEnvironment": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/environments/" + org + "/prod", status: http.StatusOK,
				body: map[string]any{"description": fmt.Sprintf("%s %d", marker(org), m.next())}}
		}},
		"renameEnvironment": {"write", func(m *matrix, org string, fresh bool) call {
			return call{path: "/environments/" + org + "/" + m.environment(org, "server", fresh) + "/rename", status: http.StatusOK,
				body: map[string]any{"new_name": fmt.Sprintf("renamed-%d", m.next())}}
		}},
		"archiveEnvironment": {"write", func(m *matrix, org string, fresh bool) call {
			return call{path: "/environments/" + org + "/" + m.environment(org, "server", fresh) + "/archive", status: http.StatusOK}
		}},
		"joinEnvironment": {"write", func(m *matrix, org string, fresh bool) call {
			return call{path: "/environments/" + org + "/" + m.environment(org, "logical", fresh) + "/join", status: http.StatusOK,
				body: map[string]any{"physical_env_name": "prod"}}
		}},
		"allowArtifact": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/allowlists/" + org + "/prod", status: http.StatusCreated,
				body: map[string]any{"artifact_fingerprint": fingerprintOf(m.next()), "description": "matrix"}}
		}},
		"reportApproval": {"write", func(m *matrix, org string, _ bool) call {
			return call{path: "/approvals/" + org + "/app", status: http.StatusCreated, body: map[string]any{"artifact_fingerprint": fpBackend}}
		}},
		"reportSnapshot": {"snapshot", func(m *matrix, org string, _ bool) call {
			return call{path: "/environments/" + org + "/prod/report/server", status: http.StatusCreated, body: map[string]any{
				"artifacts": []any{map[string]any{"digests": map[string]string{"web": fingerprintOf(m.next())}, "creationTimestamp": 1}}}}
		}},

		// Identity writes.
		"createServiceAccount": {"admin", func(m *matrix, org string, _ bool) call {
			return call{path: "/service-accounts/" + org, status: http.StatusCreated,
				body: map[string]any{"name": fmt.Sprintf("sa-%d", m.next()), "privilege": "reader"}}
		}},
		"updateServiceAccount": {"admin", func(m *matrix, org string, _ bool) call {
			return call{path: "/service-accounts/" + org + "/svc", status: http.StatusOK,
				body: map[string]any{"description": fmt.Sprintf("%s %d", marker(org), m.next())}}
		}},
		"deleteServiceAccount": {"admin", func(m *matrix, org string, fresh bool) call {
			name := "svc"
			if fresh {
				name = fmt.Sprintf("sa-%d", m.next())
				m.admin(org).send(http.MethodPost, "/service-accounts/"+org, map[string]any{"name": name, "privilege": "reader"}).
					want(m.t, http.StatusCreated)
			}
			return call{path: "/service-accounts/" + org + "/" + name, status: http.StatusOK}
		}},
		"createAPIKey": {"admin", func(m *matrix, org string, _ bool) call {
			return call{path: "/service-accounts/" + org + "/svc/api-keys", status: http.StatusCreated,
				body: map[string]any{"description": "matrix"}}
		}},
		"revokeAPIKey": {"admin", func(m *matrix, org string, fresh bool) call {
			return call{path: "/service-accounts/" + org + "/svc/api-keys/" + m.key(org, fresh), status: http.StatusOK}
		}},
		"rotateAPIKey": {"admin", func(m *matrix, org string, fresh bool) call {
			return call{path: "/service-accounts/" + org + "/svc/api-keys/" + m.key(org, fresh) + "/rotate", status: http.StatusCreated,
				body: map[string]any{"grace_period_hours": 1}}
		}},
		"attest_sarif": attest("sarif", func(*matrix, string) map[string]any {
			return map[string]any{"is_compliant": true, "sarif_results": map[string]any{"results": []any{}}}
		}),
	}
	return all
}

// fixtures are the records every organization of the matrix has, each carrying its marker.
type fixtures struct {
	evidenceID string // the attestation with an attachment
	keyID      string // a key of service account svc
}

type matrix struct {
	t        *testing.T
	e        env
	admins   map[string]*kosli
	fixtures map[string]fixtures
	n        int
	// shown counts the answers that showed their own organization's marker: without them
	// the check for other organizations' markers would prove nothing.
	shown map[string]int
}

func (m *matrix) next() int {
	m.n++
	return m.n
}

func (m *matrix) admin(org string) *kosli { return m.admins[org] }

// flow is the shared flow, or a new one when the call will use it up.
func (m *matrix) flow(org string, fresh bool) string {
	if !fresh {
		return "app"
	}
	name := fmt.Sprintf("f-%d", m.next())
	m.admin(org).multipart(http.MethodPut, "/flows/"+org+"/template_file", "data_json", map[string]any{"name": name},
		file{"template_file", "t.yml", []byte(simpleTemplate)}).want(m.t, http.StatusCreated)
	m.admin(org).get("/flows/"+org+"/"+name).want(m.t, http.StatusOK) // applied before another key uses it
	return name
}

func (m *matrix) environment(org, typ string, fresh bool) string {
	if !fresh {
		return "prod"
	}
	name := fmt.Sprintf("e-%d", m.next())
	m.admin(org).send(http.MethodPut, "/environments/"+org, map[string]any{"name": name, "type": typ}).want(m.t, http.StatusCreated)
	m.admin(org).get("/environments/"+org+"/"+name).want(m.t, http.StatusOK)
	return name
}

func (m *matrix) key(org string, fresh bool) string {
	if !fresh {
		return m.fixtures[org].keyID
	}
	return m.admin(org).send(http.MethodPost, "/service-accounts/"+org+"/svc/api-keys", nil).
		want(m.t, http.StatusCreated).JSON(m.t)["id"].(string)
}

// setUp gives org the fixtures every sample refers to, through its admin client.
func (m *matrix) setUp(org string) {
	t, k, mk := m.t, m.admin(org), marker(org)
	k.multipart(http.MethodPut, "/flows/"+org+"/template_file", "data_json", map[string]any{"name": "app", "description": mk},
		file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)
	// The trail's repo_info makes the organization's repo (the marker in its URL).
	k.multipart(http.MethodPut, "/trails/"+org+"/app", "data_json", map[string]any{"name": "t1", "description": mk,
		"repo_info": map[string]any{"id": "42", "name": "acme/app", "url": "https://github.com/" + mk, "provider": "github"}}).
		want(t, http.StatusCreated)
	k.send(http.MethodPost, "/artifacts/"+org+"/app", map[string]any{"fingerprint": fpBackend, "filename": mk, "build_url": "b",
		"commit_url": "c", "git_commit": commit, "trail_name": "t1",
		"repo_info": map[string]any{"id": "7", "name": "solo", "url": "https://git.example.com/" + mk, "provider": "git"}}).want(t, http.StatusCreated)
	k.multipart(http.MethodPost, "/attestations/"+org+"/app/trail/t1/generic", "data_json",
		map[string]any{"attestation_name": "tests", "description": mk,
			"repo_info": map[string]any{"id": "9", "name": "grp/acme/app", "url": "https://gitlab.com/" + mk, "provider": "gitlab"}},
		file{"attachment_file", "e.txt", []byte(mk)}).
		want(t, http.StatusCreated)
	k.multipart(http.MethodPost, "/attestations/"+org+"/app/trail/t1/generic", "data_json",
		map[string]any{"attestation_name": "smoke", "artifact_fingerprint": fpBackend, "description": mk}).want(t, http.StatusCreated)
	k.multipart(http.MethodPost, "/custom-attestation-types/"+org, "data_json", map[string]any{"name": "coverage", "description": mk},
		file{"type_schema", "s.json", []byte(coverageSchema)}).want(t, http.StatusCreated)
	k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "prod", "type": "server", "description": mk}).
		want(t, http.StatusCreated)
	k.send(http.MethodPost, "/controls/"+org, map[string]any{"identifier": "SEC-1", "name": "Security review", "description": mk}).
		want(t, http.StatusCreated)
	// polenv has the policy samples to itself: no notification rule watches it.
	k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "polenv", "type": "server", "description": mk}).
		want(t, http.StatusCreated)
	k.multipart(http.MethodPut, "/policies/"+org, "payload", map[string]any{"name": "pol", "description": mk, "type": "env"},
		file{"policy_file", "policy.yml", []byte(matrixPolicy(0))}).want(t, http.StatusCreated)
	if r := k.send(http.MethodPost, "/organizations/"+org+"/environments_notifications", matrixRule(mk)).
		want(t, http.StatusCreated).JSON(t); r["number"] != float64(1) {
		t.Fatalf("the first rule of %s is number %v", org, r["number"])
	}
	k.send(http.MethodPut, "/environments/"+org+"/prod/report/server", map[string]any{"artifacts": []any{
		map[string]any{"digests": map[string]string{mk: fpBackend}, "creationTimestamp": 1}}}).want(t, http.StatusCreated)
	k.send(http.MethodPost, "/approvals/"+org+"/app", map[string]any{"artifact_fingerprint": fpBackend, "description": mk}).
		want(t, http.StatusCreated)
	k.send(http.MethodPost, "/service-accounts/"+org, map[string]any{"name": "svc", "description": mk, "privilege": "reader"}).
		want(t, http.StatusCreated)
	key := k.send(http.MethodPost, "/service-accounts/"+org+"/svc/api-keys", map[string]any{"description": mk}).
		want(t, http.StatusCreated).JSON(t)
	// A rejected message, as the evaluator writes one (its replays are rejected again).
	err := m.e.store.Update(context.Background(), func(tx store.Tx) error {
		return tx.InsertRejected(context.Background(), store.RejectedMessage{ID: "dead-of-" + org, OrgID: mustOrg(t, m.e.store, org).ID,
			Kind: "trail.begun", Payload: []byte(`{"description":"` + mk + `"}`), Reason: "no flow", Class: store.ClassPermanent, RejectedAt: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	// This read waits until the writes above are applied, so that other keys find them.
	tests := k.get("/attestations/"+org+"/app/trail/t1/tests").want(t, http.StatusOK).Array(t)
	m.fixtures[org] = fixtures{evidenceID: tests[0].(map[string]any)["attestation_id"].(string), keyID: key["id"].(string)}
}

// caller is one kind of caller: the operations it may use, and the status of a refusal.
type caller struct {
	name    string
	k       *kosli
	allows  func(o operation) bool
	refused int
}

// inDefaultOrg are the operations that name no organization: the caller acts in its own
// default one, so a key of another organization is as welcome as any.
func inDefaultOrg(id string) bool { return id == "getDefaultOrg" }

func withRole(name string, k *kosli, role string) caller {
	return caller{name, k, func(o operation) bool { return slices.Contains(grants(role), o.privilege) }, http.StatusForbidden}
}

func refusedAll(name string, k *kosli, status int) caller {
	return caller{name, k, func(operation) bool { return false }, status}
}

// foreignKey is a valid key of another organization, refused in this one except for what it
// may do anywhere: the public reads of a public organization, the operations naming none.
func foreignKey(name string, k *kosli, public bool) caller {
	return caller{name, k, func(o operation) bool { return public && o.public || inDefaultOrg(o.id) }, http.StatusForbidden}
}

// inPublicOrg is a caller of a public organization, who may use its public reads.
func inPublicOrg(name string, k *kosli, status int) caller {
	return caller{name, k, func(o operation) bool { return o.public }, status}
}

// operation is one operation as the OpenAPI description declares it.
type operation struct {
	id, method, path string
	privilege        string
	public           bool
	re               *regexp.Regexp
}

// operations reads every operation from the served OpenAPI description.
func operations(t *testing.T, base string) []operation {
	t.Helper()
	var spec struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Privilege   string `json:"x-veritrail-privilege"`
			Public      bool   `json:"x-veritrail-public"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(newKosli(t, base, "").get("/api/v2/openapi.json").want(t, http.StatusOK).Body, &spec); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\\\{[^}]+\\\}`)
	var ops []operation
	for path, methods := range spec.Paths {
		re := regexp.MustCompile("^" + param.ReplaceAllString(regexp.QuoteMeta(strings.TrimPrefix(path, "/api/v2")), "[^/]+") + "$")
		for method, o := range methods {
			ops = append(ops, operation{id: o.OperationID, method: strings.ToUpper(method), path: path,
				privilege: o.Privilege, public: o.Public, re: re})
		}
	}
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.id, b.id) })
	return ops
}

// TestAccessMatrix calls every operation as: no key, a key of another organization, a key of
// each role, a user's personal key, an expired key, a revoked key, a key in its rotation
// grace period and the same key after it; and, in a public organization, with no key and
// with a key of another organization.
func TestAccessMatrix(t *testing.T) {
	clock := newTestClock()
	forEachModeWith(t, func(c *Config) { c.Now = clock.Now }, func(t *testing.T, e env) {
		ops := operations(t, e.base)
		all := samples()
		checkDeclarations(t, ops, all)

		ctx := context.Background()
		m := &matrix{t: t, e: e, admins: map[string]*kosli{testOrg: e.k}, fixtures: map[string]fixtures{}, shown: map[string]int{}}
		for _, org := range []string{"other", "pub"} {
			m.admins[org] = keyFor(t, e, org, "admin", store.RoleAdmin)
		}
		if err := e.store.SetOrgPublic(ctx, mustOrg(t, e.store, "pub").ID, true); err != nil {
			t.Fatal(err)
		}
		for _, org := range []string{testOrg, "other", "pub"} {
			m.setUp(org)
		}

		// The keys of acme's callers, made as an administrator would.
		k := e.k
		keyOf := func(account, privilege string, body any) (secret, id string) {
			k.send(http.MethodPost, "/service-accounts/"+testOrg, map[string]any{"name": account, "privilege": privilege}).
				want(t, http.StatusCreated)
			v := k.send(http.MethodPost, "/service-accounts/"+testOrg+"/"+account+"/api-keys", body).want(t, http.StatusCreated).JSON(t)
			return v["key"].(string), v["id"].(string)
		}
		client := func(secret string) *kosli { return newKosli(t, e.base+"/api/v2", secret) }
		callers := []caller{
			refusedAll("no key", client(""), http.StatusUnauthorized),
			foreignKey("key of another organization", m.admin("other"), false),
		}
		for _, role := range []string{"admin", "member", "snapshotter", "reader"} {
			secret, _ := keyOf("role-"+role, role, nil)
			callers = append(callers, withRole(role, client(secret), role))
		}
		seed := Seed{Users: []SeedUser{{Name: "matrix-user", DisplayName: "Matrix User",
			Memberships: []SeedMembership{{Org: testOrg, Role: "member"}}, APIKeys: []SeedKey{{Secret: "vt_matrix_user_key_0000000"}}}},
			Organizations: []SeedOrg{{Name: testOrg}}}
		if err := ApplySeed(ctx, e.store, seed); err != nil {
			t.Fatal(err)
		}
		callers = append(callers, withRole("personal key of a member", client("vt_matrix_user_key_0000000"), "member"))

		expiring, _ := keyOf("expiring", "admin", map[string]any{"expires_at": float64(clock.Now().Add(10 * time.Minute).Unix())})
		revoked, revokedID := keyOf("revoked", "admin", nil)
		k.send(http.MethodDelete, "/service-accounts/"+testOrg+"/revoked/api-keys/"+revokedID, nil).want(t, http.StatusOK)
		clock.Advance(20 * time.Minute)
		rotated, rotatedID := keyOf("rotated", "admin", nil)
		k.send(http.MethodPost, "/service-accounts/"+testOrg+"/rotated/api-keys/"+rotatedID+"/rotate",
			map[string]any{"grace_period_hours": 1}).want(t, http.StatusCreated)
		callers = append(callers,
			refusedAll("expired key", client(expiring), http.StatusUnauthorized),
			refusedAll("revoked key", client(revoked), http.StatusUnauthorized),
			withRole("key in its rotation grace period", client(rotated), "admin"),
		)

		for _, o := range ops {
			s, ok := all[o.id]
			if !ok {
				continue // reported by checkDeclarations
			}
			for _, c := range callers {
				m.check(o, s, testOrg, c)
			}
			m.check(o, s, "pub", inPublicOrg("no key (public organization)", client(""), http.StatusUnauthorized))
			m.check(o, s, "pub", foreignKey("key of another organization (public organization)", k, true))
		}

		if m.shown[testOrg] < 10 || m.shown["pub"] < 5 {
			t.Errorf("few answers showed their organization's data (%v): the leak check would prove little", m.shown)
		}

		// An hour and a bit later the grace period is over.
		clock.Advance(61 * time.Minute)
		after := refusedAll("key after its rotation grace period", client(rotated), http.StatusUnauthorized)
		for _, o := range ops {
			if s, ok := all[o.id]; ok {
				m.check(o, s, testOrg, after)
			}
		}
	})
}

// checkDeclarations holds the served OpenAPI description to the matrix: every operation has
// a sample, declares the privilege the sample expects, and is public exactly when listed.
func checkDeclarations(t *testing.T, ops []operation, all map[string]sample) {
	t.Helper()
	seen := map[string]bool{}
	for _, o := range ops {
		seen[o.id] = true
		s, ok := all[o.id]
		if !ok {
			t.Errorf("operation %s (%s %s) has no sample in the access matrix", o.id, o.method, o.path)
			continue
		}
		if o.privilege != s.privilege {
			t.Errorf("operation %s declares the %q privilege; the matrix expects %q", o.id, o.privilege, s.privilege)
		}
		if o.public != slices.Contains(publicReads(), o.id) {
			t.Errorf("operation %s: public = %v in the OpenAPI description, but the documented public set says otherwise", o.id, o.public)
		}
	}
	for id := range all {
		if !seen[id] {
			t.Errorf("the matrix has a sample for %s, which the OpenAPI description lacks", id)
		}
	}
}

// check makes one call and checks its status and that the body holds no other
// organization's data (and, when refused, none of the addressed organization's either).
func (m *matrix) check(o operation, s sample, org string, c caller) {
	t := m.t
	t.Helper()
	allowed := c.allows(o)
	cl := s.make(m, org, allowed)
	want := c.refused
	if allowed {
		want = cl.status
	}
	if p, _, _ := strings.Cut(cl.path, "?"); !o.re.MatchString(p) {
		t.Fatalf("the sample of %s calls %s, not a path of %s", o.id, cl.path, o.path)
	}
	var r reply
	switch {
	case cl.form != nil:
		r = c.k.multipart(o.method, cl.path, cl.form.field, cl.form.payload, cl.form.files...)
	case o.method == http.MethodGet:
		r = c.k.get(cl.path)
	default:
		r = c.k.send(o.method, cl.path, cl.body)
	}
	what := fmt.Sprintf("%s %s (%s) by %s", o.method, cl.path, o.id, c.name)
	if r.Status != want {
		t.Errorf("%s: status %d, want %d: %.300s", what, r.Status, want, r.Body)
		return
	}
	if r.Status < 300 && bytes.Contains(r.Body, []byte(marker(org))) {
		m.shown[org]++
	}
	for _, other := range []string{testOrg, "other", "pub"} {
		if (other != org || r.Status >= 300) && bytes.Contains(r.Body, []byte(marker(other))) {
			t.Errorf("%s: the answer holds data of %s: %.300s", what, other, r.Body)
		}
	}
	if r.Status >= 300 {
		var e struct {
			Message *string `json:"message"`
		}
		if json.Unmarshal(r.Body, &e) != nil || e.Message == nil {
			t.Errorf("%s: %d without an error body: %.300s", what, r.Status, r.Body)
		}
	}
}

// matrixRule is a notification rule body. Nothing it watches fires (no policy decides the
// compliance of prod), so its receiver is never called.
func matrixRule(name string) map[string]any {
	return map[string]any{"name": name, "environments": []string{"prod"}, "triggers": []string{"ON_COMPLIANT_ENV"},
		"targets": []any{map[string]any{"type": "WEBHOOK", "webhook": "https://hooks.example.com/veritrail"}}}
}

// matrixPolicy is a valid environment policy; n makes its text (so its version) differ.
func matrixPolicy(n int) string {
	return fmt.Sprintf("_schema: https://kosli.com/schemas/policy/environment/v1\n# version %d\nartifacts:\n  provenance:\n    required: true\n", n)
}
