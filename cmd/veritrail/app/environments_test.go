package app

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func k8sItem(pod string, digests map[string]string, created int) map[string]any {
	return map[string]any{"podName": pod, "namespace": "prod", "digests": digests, "creationTimestamp": created}
}

// TestEnvironmentsAndSnapshots reports snapshots the way the Kosli CLI's reporters do and
// reads them back: repeats create nothing, scaling is a `changed` event, provenance is found,
// logical environments show the union of their members, archived environments answer 404.
func TestEnvironmentsAndSnapshots(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k, org := e.k, testOrg
		setupFlow(t, k)
		fpA, fpB := strings.Repeat("a", 64), strings.Repeat("b", 64)
		k.send(http.MethodPost, "/artifacts/"+org+"/app", map[string]any{"fingerprint": fpA, "filename": "web:1",
			"build_url": "b", "commit_url": "c", "trail_name": "t1", "repo_info": map[string]any{"name": "acme/web"}}).want(t, 201)

		k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "prod", "type": "K8S", "description": "cluster"}).want(t, 201)
		k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "prod", "type": "K8S", "description": "the cluster"}).want(t, 200)
		wantError(t, k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "x", "type": "nope"}), 400, "Input payload validation failed", "type")
		k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "staging", "type": "K8S"}).want(t, 201)
		k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "all", "type": "logical", "included_environments": []string{"prod"}}).want(t, 201)

		envView := k.get("/environments/"+org+"/prod").want(t, 200).JSON(t)
		if envView["description"] != "the cluster" || envView["state"] != nil || envView["last_reported_at"] != nil {
			t.Fatalf("environment: %v", envView)
		}

		report := func(env string, items ...map[string]any) {
			t.Helper()
			k.send(http.MethodPut, "/environments/"+org+"/"+env+"/report/K8S", map[string]any{"artifacts": items}).want(t, 201)
		}
		web := map[string]string{"web": fpA}
		report("prod", k8sItem("web-1", web, 100))
		report("prod", k8sItem("web-1", web, 100)) // a repeat: no new snapshot
		report("prod", k8sItem("web-1", web, 100), k8sItem("web-2", web, 110))
		report("prod", k8sItem("web-1", web, 100), k8sItem("web-2", web, 110), k8sItem("api-1", map[string]string{"api": fpB}, 120))
		report("prod", k8sItem("api-1", map[string]string{"api": fpB}, 120))

		list := k.get("/snapshots/"+org+"/prod").want(t, 200).Array(t)
		if len(list) != 4 || list[0].(map[string]any)["index"] != float64(4) || list[0].(map[string]any)["to"] != float64(0) {
			t.Fatalf("snapshots: %v", list)
		}
		s2 := k.get("/snapshots/"+org+"/prod/2").want(t, 200).JSON(t)
		arts := s2["artifacts"].([]any)
		web2 := arts[0].(map[string]any)
		if ann := web2["annotation"].(map[string]any); ann["type"] != "changed" || ann["was"] != float64(1) || ann["now"] != float64(2) {
			t.Fatalf("scaled artifact annotation: %v", web2)
		}
		flows := web2["flows"].([]any)
		if len(flows) != 1 || flows[0].(map[string]any)["flow_name"] != "app" || flows[0].(map[string]any)["trail_name"] != "t1" {
			t.Fatalf("provenance: %v", web2["flows"])
		}
		for expr, want := range map[string]float64{"-1": 4, "%23-2": 3, "~1": 3, "%231": 1, "@%7Bnow%7D": 4} {
			if got := k.get("/snapshots/"+org+"/prod/"+expr).want(t, 200).JSON(t)["index"]; got != want {
				t.Errorf("snapshot %s: index %v, want %v", expr, got, want)
			}
		}
		wantError(t, k.get("/snapshots/"+org+"/staging/-1"), 404, "Snapshot 'staging#-1' resolves to 'staging#0'. len(snapshots) == 0. Indexes are 1-based", "")
		wantError(t, k.get("/snapshots/"+org+"/prod/~x"), 400, "Input payload validation failed", "expr")

		// Events, newest first by default; each parameter narrows them.
		events := k.get("/environments/"+org+"/prod/events").want(t, 200).Array(t)
		var types []string
		for _, ev := range events {
			m := ev.(map[string]any)
			types = append(types, fmt.Sprint(m["snapshot_index"], m["type"]))
			if m["type"] == "started" && m["sha256"] == fpA && m["pipeline"] != "app" {
				t.Fatalf("event lacks pipeline: %v", m)
			}
		}
		if strings.Join(types, ",") != "4exited,3started,2changed,1started" {
			t.Fatalf("events: %v", types)
		}
		if ev := k.get("/environments/" + org + "/prod/events?reverse=true").Array(t); ev[0].(map[string]any)["snapshot_index"] != float64(1) {
			t.Fatalf("reverse: %v", ev[0])
		}
		if ev := k.get("/environments/" + org + "/prod/events?start=2&end=3").Array(t); len(ev) != 2 {
			t.Fatalf("start/end: %d events", len(ev))
		}
		if ev := k.get("/environments/" + org + "/prod/events?interval=-1..-1").Array(t); len(ev) != 1 {
			t.Fatalf("interval: %d events", len(ev))
		}
		if ev := k.get("/environments/" + org + "/prod/events?repo_name=acme/web").Array(t); len(ev) != 3 {
			t.Fatalf("repo_name: %d events", len(ev))
		}
		if ev := k.get("/environments/" + org + "/prod/events?per_page=1&page=2").Array(t); len(ev) != 1 || ev[0].(map[string]any)["snapshot_index"] != float64(3) {
			t.Fatalf("paging: %v", ev)
		}
		future := fmt.Sprint(time.Now().Add(time.Hour).Unix())
		for query, want := range map[string]int{
			"start=1h&end=NOW":              4, // a time reference: every snapshot of the last hour
			"start=-2":                      2,
			"start_ts=" + future:            1, // the snapshot current then is the latest
			"start=1&start_ts=" + future:    1, // start_ts wins over start
			"end_ts=1&end=-1":               0, // end_ts wins over end
			"interval=1..3&start=3":         1, // start wins over the deprecated interval's start
			"from=" + future:                0,
			"to=" + future + "&start=2days": 4,
		} {
			if ev := k.get("/environments/"+org+"/prod/events?"+query).want(t, 200).Array(t); len(ev) != want {
				t.Errorf("events?%s: %d, want %d", query, len(ev), want)
			}
		}
		// CLIENT-2.md section 3: a plain message naming the value, without field errors.
		wantMessage(t, k.get("/environments/"+org+"/prod/events?start=yesterday"), 400, "Invalid interval value: yesterday")
		wantError(t, k.get("/environments/"+org+"/prod/events?per_page=101"), 400, "", "query.per_page")
		wantError(t, k.get("/environments/"+org+"/prod/events?page=0"), 400, "", "query.page")

		// The logical environment follows its member.
		if s := k.get("/snapshots/"+org+"/all/-1").want(t, 200).JSON(t); len(s["artifacts"].([]any)) != 1 {
			t.Fatalf("logical snapshot: %v", s)
		}
		// The artifact knows where it runs.
		if a := k.get("/artifacts/" + org + "/app/fingerprint/" + fpA).JSON(t); len(a["running"].([]any)) != 0 {
			t.Fatalf("web exited prod but still shows running: %v", a["running"])
		}
		report("staging", k8sItem("web-1", web, 100))
		a := k.get("/artifacts/" + org + "/app/fingerprint/" + fpA).JSON(t)
		if len(a["running"].([]any)) != 1 || a["running"].([]any)[0].(map[string]any)["environment_name"] != "staging" {
			t.Fatalf("web runs in staging: %v", a["running"])
		}
		exitedFrom := map[string]bool{}
		for _, x := range a["exited"].([]any) {
			exitedFrom[x.(map[string]any)["environment_name"].(string)] = true
		}
		if len(exitedFrom) != 2 || !exitedFrom["prod"] || !exitedFrom["all"] { // "all" is the logical environment holding prod
			t.Fatalf("web exited prod and all: %v", a["exited"])
		}
		var history []string
		for _, h := range a["history"].([]any) {
			history = append(history, h.(map[string]any)["type"].(string))
		}
		if got := strings.Join(history, ","); !strings.HasPrefix(got, "artifact_creation_reported,artifact_started") ||
			!strings.HasSuffix(got, "artifact_started") || !strings.Contains(got, "artifact_exited") {
			t.Fatalf("history: %s", got)
		}
		tr := k.get("/trails/" + org + "/app/t1").JSON(t)
		var trailEvents []string
		for _, ev := range tr["events"].([]any) {
			trailEvents = append(trailEvents, ev.(map[string]any)["type"].(string))
		}
		if got := strings.Join(trailEvents, ","); !strings.Contains(got, "artifact_started_running") || !strings.Contains(got, "artifact_stopped_running") {
			t.Fatalf("trail events: %s", got)
		}

		// Allowlist, search, PATCH, rename, archive.
		k.send(http.MethodPut, "/allowlists/"+org+"/prod", map[string]any{"artifact_fingerprint": fpB, "artifact_name": "api", "description": "hotfix"}).want(t, 201)
		if found := k.get("/search/"+org+"/sha/"+fpA[:8]).want(t, 200).JSON(t); found["resolved_to"].(map[string]any)["type"] != "fingerprint" {
			t.Fatalf("search: %v", found)
		}
		wantError(t, k.get("/search/"+org+"/sha/0000000"), 404, "No matches for '0000000'.", "")
		k.send(http.MethodPatch, "/environments/"+org+"/prod", map[string]any{"description": ""}).want(t, 200)
		if v := k.get("/environments/" + org + "/prod").JSON(t); v["description"] != "" {
			t.Fatalf("empty description should clear: %v", v["description"])
		}
		k.send(http.MethodPut, "/environments/"+org+"/staging/archive", nil).want(t, 200)
		wantError(t, k.get("/environments/"+org+"/staging"), 404, "Environment named 'staging' does not exist for organization 'acme'", "")
		wantError(t, k.send(http.MethodPut, "/environments/"+org+"/staging/report/K8S", map[string]any{"artifacts": []any{}}), 404, "does not exist", "")
		wantError(t, k.get("/snapshots/"+org+"/staging"), 404, "does not exist", "")
	})
}

// TestEnvDiff compares two snapshots as `kosli diff snapshots` asks.
func TestEnvDiff(t *testing.T) {
	base, _ := startEmbedded(t)
	k := newKosli(t, base+"/api/v2", testToken)
	org := testOrg
	fpA, fpB := strings.Repeat("a", 64), strings.Repeat("b", 64)
	k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "prod", "type": "docker"}).want(t, 201)
	k.send(http.MethodPut, "/environments/"+org+"/prod/report/docker", map[string]any{"artifacts": []any{
		map[string]any{"digests": map[string]string{"web": fpA}, "creationTimestamp": 1}}}).want(t, 201)
	k.send(http.MethodPut, "/environments/"+org+"/prod/report/docker", map[string]any{"artifacts": []any{
		map[string]any{"digests": map[string]string{"web": fpA}, "creationTimestamp": 1},
		map[string]any{"digests": map[string]string{"api": fpB}, "creationTimestamp": 2}}}).want(t, 201)
	d := k.get("/env-diff/"+org+"?snappish1=prod%231&snappish2=prod~0").want(t, 200).JSON(t)
	s2 := d["snappish2"].(map[string]any)
	if s2["snapshot_id"] != "prod#2" || len(s2["artifacts"].([]any)) != 1 || len(d["not-changed"].(map[string]any)["artifacts"].([]any)) != 1 {
		t.Fatalf("env-diff: %v", d)
	}
	wantError(t, k.get("/env-diff/"+org+"?snappish1=nope%231&snappish2=prod"), 404, "Environment named 'nope' does not exist", "")
}

// TestApprovals: numbers count up per flow; state follows the approvals given.
func TestApprovals(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k, org := e.k, testOrg
		setupFlow(t, k)
		fp := strings.Repeat("c", 64)
		k.send(http.MethodPost, "/artifacts/"+org+"/app", map[string]any{"fingerprint": fp, "filename": "app:2",
			"build_url": "b", "commit_url": "c", "trail_name": "t1"}).want(t, 201)
		k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "prod", "type": "server"}).want(t, 201)
		k.send(http.MethodPost, "/approvals/"+org+"/app", map[string]any{"artifact_fingerprint": fp, "environment": "prod",
			"description": "release 2", "src_commit_list": []string{commit}, "approvals": []any{}, "user_data": map[string]any{}}).want(t, 201)
		k.send(http.MethodPost, "/approvals/"+org+"/app", map[string]any{"artifact_fingerprint": fp, "description": "release 2b",
			"src_commit_list": []string{commit}, "approvals": []any{map[string]any{"state": "APPROVED", "comment": "ok", "approved_by": "bob"}}}).want(t, 201)

		first := k.get("/approvals/"+org+"/app/1").want(t, 200).JSON(t)
		if first["state"] != "PENDING" || first["environment"] != "prod" || first["target_artifact"] != fp || first["release_number"] != float64(1) {
			t.Fatalf("approval 1: %v", first)
		}
		second := k.get("/approvals/"+org+"/app/2").want(t, 200).JSON(t)
		if second["state"] != "APPROVED" || second["approvals"].([]any)[0].(map[string]any)["approved_by"] != "bob" {
			t.Fatalf("approval 2: %v", second)
		}
		if list := k.get("/approvals/"+org+"/app").want(t, 200).Array(t); len(list) != 2 {
			t.Fatalf("approvals: %v", list)
		}
		wantError(t, k.get("/approvals/"+org+"/app/3"), 404, "Approval number 3 does not exist", "")
		wantError(t, k.send(http.MethodPost, "/approvals/"+org+"/app", map[string]any{"artifact_fingerprint": strings.Repeat("d", 64)}),
			404, "does not exist in flow 'app'", "")
	})
}
