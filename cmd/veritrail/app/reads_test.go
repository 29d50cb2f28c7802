package app

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/internal/store"
)

// TestReads exercises every read the CLI makes after the writes of a small pipeline.
func TestReads(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k, org := e.k, testOrg
		setupFlow(t, k)
		k.multipart(http.MethodPut, "/flows/"+org+"/template_file", "data_json", map[string]any{"name": "other", "description": "x"},
			file{"template_file", "t.yml", []byte("version: 1\n")}).want(t, http.StatusCreated)

		// Flows: bare array without paging, {data, pagination} with it; search by name.
		if flows := k.get("/flows/"+org).want(t, 200).Array(t); len(flows) != 2 {
			t.Fatalf("flows: %v", flows)
		}
		paged := k.get("/flows/"+org+"?page=1&per_page=1").want(t, 200).JSON(t)
		if pg := paged["pagination"].(map[string]any); pg["total"] != float64(2) || pg["page_count"] != float64(2) {
			t.Fatalf("paged flows: %v", paged)
		}
		// Case-sensitive unless case_sensitive=false (CLIENT-2.md section 3).
		for query, want := range map[string]int{"search_by_name=OTH&case_sensitive=false": 1, "search_by_name=OTH": 0, "search_by_name=oth": 1} {
			if found := k.get("/flows/"+org+"?"+query).want(t, 200).Array(t); len(found) != want {
				t.Fatalf("%s: %v", query, found)
			}
		}

		// Artifacts, by fingerprint prefix, commit, list, latest_commit.
		fp2 := strings.Repeat("ab", 31) + "cd" // shares a long prefix with fpBackend
		for _, fp := range []string{fpBackend, fp2} {
			k.send(http.MethodPost, "/artifacts/"+org+"/app", map[string]any{"fingerprint": fp, "filename": "f-" + fp[60:],
				"build_url": "b", "commit_url": "c", "git_commit": commit, "trail_name": "t1",
				"git_commit_info": commitInfo(), "repo_info": map[string]any{"name": "acme/app", "url": "u", "id": "42"}}).want(t, http.StatusCreated)
		}
		wantError(t, k.get("/artifacts/"+org+"/app/fingerprint/"+fpBackend[:10]), http.StatusBadRequest, "ambiguous", "fingerprint")
		if a := k.get("/artifacts/"+org+"/app/fingerprint/"+fp2[:63]).want(t, 200).JSON(t); a["fingerprint"] != fp2 {
			t.Fatalf("prefix lookup: %v", a)
		}
		if arts := k.get("/artifacts/"+org+"/app/commit_sha/"+commit).want(t, 200).Array(t); len(arts) != 2 {
			t.Fatalf("by commit: %d", len(arts))
		}
		if arts := k.get("/artifacts/"+org+"?repo_name=acme/app").want(t, 200).Array(t); len(arts) != 2 {
			t.Fatalf("list by repo: %d", len(arts))
		}
		lc := k.get("/artifacts/"+org+"/app/"+strings.Repeat("0", 64)+"/latest_commit").want(t, 200).JSON(t)
		if lc["latest_commit"] != commit {
			t.Fatalf("latest_commit: %v", lc)
		}

		// Trails: list with filters.
		list := k.get("/trails/"+org+"?fingerprint="+fp2).want(t, 200).JSON(t)
		if data := list["data"].([]any); len(data) != 1 || data[0].(map[string]any)["name"] != "t1" {
			t.Fatalf("trails by fingerprint: %v", list)
		}
		if data := k.get("/trails/"+org+"?flow=other").want(t, 200).JSON(t)["data"].([]any); len(data) != 0 {
			t.Fatalf("trails of flow other: %v", data)
		}

		// Attestations: with evidence, by id, download.
		k.multipart(http.MethodPost, "/attestations/"+org+"/app/trail/t1/generic", "data_json",
			map[string]any{"attestation_name": "tests", "artifact_fingerprint": fp2, "is_compliant": true},
			file{"attachment_file", "evidence.tgz", []byte("tarball bytes")}).want(t, http.StatusCreated)
		byArtifact := k.get("/attestations/"+org+"/app/artifact/"+fp2+"/tests").want(t, 200).Array(t)
		att := byArtifact[0].(map[string]any)
		id := att["attestation_id"].(string)
		if att["has_audit_package"] != true || att["artifact_fingerprint"] != fp2 || att["reported_by"] != "admin" {
			t.Fatalf("attestation: %v", att)
		}
		listed := k.get("/attestations/"+org+"?attestation_id="+id).want(t, 200).JSON(t)
		if data := listed["data"].([]any); len(data) != 1 || data[0].(map[string]any)["attestation_id"] != id {
			t.Fatalf("by attestation_id: %v", listed)
		}
		href := att["_links"].(map[string]any)["evidence"].(map[string]any)["href"].(string)
		path := href[strings.Index(href, "/api/v2")+len("/api/v2"):]
		if body := k.get(path).want(t, 200).Body; string(body) != "tarball bytes" {
			t.Fatalf("evidence: %q", body)
		}

		// Custom types: versions, list, archive.
		for i := 0; i < 2; i++ {
			k.multipart(http.MethodPost, "/custom-attestation-types/"+org, "data_json", map[string]any{"name": "cov",
				"evaluator": map[string]any{"content_type": "jq", "rules": []string{".x > 1"}}},
				file{"type_schema", "s.json", []byte(`{"type":"object"}`)}).want(t, []int{201, 200}[i])
		}
		ct := k.get("/custom-attestation-types/"+org+"/cov").want(t, 200).JSON(t)
		if vs := ct["versions"].([]any); len(vs) != 2 || vs[1].(map[string]any)["version"] != float64(2) {
			t.Fatalf("custom type versions: %v", ct)
		}
		k.send(http.MethodPut, "/custom-attestation-types/"+org+"/cov/archive", nil).want(t, 200)
		if types := k.get("/custom-attestation-types/"+org).want(t, 200).Array(t); len(types) != 0 {
			t.Fatalf("archived type still listed: %v", types)
		}

		// Rename and archive a flow; the CLI sends the body `null` to archive.
		k.send(http.MethodPut, "/flows/"+org+"/other/rename", map[string]any{"new_name": "renamed"}).want(t, 200)
		k.get("/flows/"+org+"/renamed").want(t, 200)
		k.send(http.MethodPut, "/flows/"+org+"/renamed/archive", nil).want(t, 200)
		wantError(t, k.get("/flows/"+org+"/renamed"), http.StatusNotFound, "Flow named 'renamed' does not exist", "")
	})
}

// TestPersonalKeyAcrossOrgs: a user's personal key works in each organization the user belongs to,
// with the user's role there, and created_by shows the user's display name.
func TestPersonalKeyAcrossOrgs(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		ctx := context.Background()
		st := e.store
		second, err := EnsureOrg(ctx, st, "second")
		if err != nil {
			t.Fatal(err)
		}
		user := store.User{ID: uuid.NewString(), Name: "jane", DisplayName: "Jane Doe"}
		if err := st.CreateUser(ctx, user); err != nil {
			t.Fatal(err)
		}
		if err := st.AddMember(ctx, user.ID, mustOrg(t, st, testOrg).ID, store.RoleMember); err != nil {
			t.Fatal(err)
		}
		if err := st.AddMember(ctx, user.ID, second.ID, store.RoleReader); err != nil {
			t.Fatal(err)
		}
		secret := "vt_personal_key_of_jane_00000000"
		if err := st.CreateKey(ctx, store.APIKey{ID: uuid.NewString(), Hash: auth.HashKey(secret), UserID: user.ID, Name: "jane"}); err != nil {
			t.Fatal(err)
		}
		jane := newKosli(t, e.base+"/api/v2", secret)
		jane.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "app"},
			file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)
		jane.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t1"}).want(t, http.StatusCreated)
		if tr := jane.get("/trails/"+testOrg+"/app/t1").want(t, 200).JSON(t); tr["created_by"] != "Jane Doe" {
			t.Fatalf("created_by %v", tr["created_by"])
		}
		jane.get("/flows/second").want(t, 200)
		wantError(t, jane.multipart(http.MethodPut, "/flows/second/template_file", "data_json", map[string]any{"name": "x"}),
			http.StatusForbidden, "needs the write privilege", "")
	})
}

// TestTags: tags of flows and environments, and the trail filter by flow tag.
func TestTags(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k, org := e.k, testOrg
		setupFlow(t, k)
		k.send(http.MethodPatch, "/tags/"+org+"/flow/app", map[string]any{"set_tags": map[string]string{"team": "web", "tier": "1"}}).want(t, 200)
		k.send(http.MethodPatch, "/tags/"+org+"/flow/app", map[string]any{"remove_tags": []string{"tier"}}).want(t, 200)
		if tags := k.get("/flows/" + org + "/app").JSON(t)["tags"].(map[string]any); len(tags) != 1 || tags["team"] != "web" {
			t.Fatalf("flow tags: %v", tags)
		}
		if data := k.get("/trails/" + org + "?flow_tag=team=web").JSON(t)["data"].([]any); len(data) != 1 {
			t.Fatalf("trails by flow tag: %v", data)
		}
		if data := k.get("/trails/" + org + "?flow_tag=team=api").JSON(t)["data"].([]any); len(data) != 0 {
			t.Fatalf("trails by another tag: %v", data)
		}
		k.send(http.MethodPut, "/environments/"+org, map[string]any{"name": "prod", "type": "server"}).want(t, 201)
		k.send(http.MethodPatch, "/tags/"+org+"/env/prod", map[string]any{"set_tags": map[string]string{"url": "https://x"}}).want(t, 200)
		if tags := k.get("/environments/" + org + "/prod").JSON(t)["tags"].(map[string]any); tags["url"] != "https://x" {
			t.Fatalf("environment tags: %v", tags)
		}
		wantError(t, k.send(http.MethodPatch, "/tags/"+org+"/flow/nope", map[string]any{}), 404, "Flow named 'nope' does not exist", "")
	})
}
