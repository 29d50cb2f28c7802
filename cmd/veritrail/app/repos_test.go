package app

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestContractDeepRepoNames: a repository name of any depth (GitLab nests groups:
// gitlab.com/group/sub/sub2/repo) works for get repo, tag repo and list artifacts --repo, in the
// forms the CLI sends: the name's '/' as path separators (url.JoinPath), or escaped as %2F.
func TestContractDeepRepoNames(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		const name = "gitlab.com/group/sub/sub2/repo"
		k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "app", "description": ""},
			file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)
		info := map[string]any{"id": "9001", "name": name, "url": "https://" + name, "provider": "gitlab"}
		k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t1", "repo_info": info}).
			want(t, http.StatusCreated)
		commit := strings.Repeat("d", 40)
		k.send(http.MethodPost, "/artifacts/"+testOrg+"/app", map[string]any{"fingerprint": fmt.Sprintf("%064x", 9), "filename": "app:1",
			"git_commit": commit, "build_url": "https://ci.example.com/1", "commit_url": "https://" + name + "/-/commit/" + commit,
			"trail_name": "t1", "repo_info": info}).want(t, http.StatusCreated)

		// `kosli get repo`: url.JoinPath(base, "repos", org, name) keeps the name's '/'.
		p, err := url.JoinPath("/repos", testOrg, name)
		if err != nil {
			t.Fatal(err)
		}
		if p != "/repos/"+testOrg+"/"+name {
			t.Fatalf("url.JoinPath gave %s", p)
		}
		var id string
		for _, path := range []string{p, p + "?provider=gitlab", "/repos/" + testOrg + "/" + url.PathEscape(name)} {
			r := k.get(path).want(t, http.StatusOK).JSON(t)
			if r["name"] != name || r["provider"] != "gitlab" {
				t.Fatalf("GET %s: %v", path, r)
			}
			id, _ = r["id"].(string)
		}
		wantMessage(t, k.get(p+"?provider=github"), http.StatusNotFound, "Repo '"+name+"' not found")
		wantMessage(t, k.get("/repos/"+testOrg+"/gitlab.com/group/sub/sub2/nope"), http.StatusNotFound,
			"Repo 'gitlab.com/group/sub/sub2/nope' not found")
		wantError(t, k.do(http.MethodPatch, p, "application/json", []byte("null")), http.StatusMethodNotAllowed, "Method PATCH is not allowed", "")

		// `kosli tag repo` resolves the name as above, then tags the inner id.
		k.send(http.MethodPatch, "/tags/"+testOrg+"/repo/"+id, map[string]any{"set_tags": map[string]string{"team": "deep"}, "remove_tags": []string{}}).
			want(t, http.StatusOK)
		if r := k.get(p).want(t, http.StatusOK).JSON(t); r["tags"].(map[string]any)["team"] != "deep" {
			t.Fatalf("tagged repo: %v", r)
		}

		// `kosli list artifacts --repo`.
		q := url.Values{"page": {"1"}, "per_page": {"15"}, "repo_name": {name}}
		if got := k.get("/artifacts/"+testOrg+"?"+q.Encode()).want(t, http.StatusOK).Array(t); len(got) != 1 {
			t.Fatalf("artifacts of %s: %v", name, got)
		}
	})
}
