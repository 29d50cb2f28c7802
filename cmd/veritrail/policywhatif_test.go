package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
)

// TestPolicyWhatIfTemplate runs "policy what-if" of flow templates against an embedded server: three trails
// (compliant, incomplete, non-compliant under the flow's template) judged by a stricter and a laxer draft.
func TestPolicyWhatIfTemplate(t *testing.T) {
	const org, token = "acme", "vt_whatif_test_token_0123456789ab"
	r, err := app.StartEmbedded(context.Background(), app.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), BootstrapOrg: org,
		BootstrapToken: token, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	host := "http://" + r.Addr
	// send posts a multipart form: data_json, and a file part when file is not "".
	send := func(method, path string, data map[string]any, file, content string) (int, []byte) {
		t.Helper()
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		if data != nil {
			b, _ := json.Marshal(data)
			if err := w.WriteField("data_json", string(b)); err != nil {
				t.Fatal(err)
			}
		}
		if file != "" {
			part, _ := w.CreateFormFile(file, file+".yml")
			if _, err := part.Write([]byte(content)); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		req, _ := http.NewRequest(method, host+"/api/v2"+path, &buf)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", w.FormDataContentType())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	must := func(status int, body []byte) {
		t.Helper()
		if status != http.StatusOK && status != http.StatusCreated {
			t.Fatalf("%d %s", status, body)
		}
	}
	must(send(http.MethodPut, "/flows/"+org+"/template_file", map[string]any{"name": "api"}, "template_file",
		"version: 1\ntrail:\n  attestations:\n    - {name: pr, type: generic}\n"))
	for _, tr := range []struct {
		name string
		pr   *bool
	}{{"t1", new(true)}, {"t2", nil}, {"t3", new(false)}} {
		must(send(http.MethodPut, "/trails/"+org+"/api", map[string]any{"name": tr.name}, "", ""))
		if tr.pr != nil {
			must(send(http.MethodPost, "/attestations/"+org+"/api/trail/"+tr.name+"/generic",
				map[string]any{"attestation_name": "pr", "is_compliant": *tr.pr, "user_data": map[string]any{}}, "", ""))
		}
	}
	dir := writeFiles(t, map[string]string{
		"strict.yml": "version: 1\ntrail:\n  attestations:\n    - {name: pr, type: generic}\n    - {name: scan, type: generic}\n",
		"lax.yml":    "version: 1\n",
		"bad.yml":    "version: 1\ntrail: {attestations: [{name: pr, type: nope}]}\n",
	})
	flags := []string{"what-if", "--host", host, "--api-token", token, "--org", org, "--flow", "api"}

	out, _, err := runPolicyCmd(t, append(flags, filepath.Join(dir, "strict.yml"))...)
	if err == nil || err.Error() != "1 trail(s) compliant today would not be under template 'strict'" {
		t.Errorf("strict draft: err %v", err)
	}
	want := "Template 'strict' against the latest 3 of 3 trail(s) of flow 'api': 1 would change state.\n" +
		"SAME    t3  NON-COMPLIANT\n" +
		"      trail: pr (generic) is not compliant\n" +
		"      trail: scan (generic) is missing\n" +
		"SAME    t2  INCOMPLETE\n" +
		"      trail: pr (generic) is missing\n" +
		"      trail: scan (generic) is missing\n" +
		"CHANGE  t1  COMPLIANT -> INCOMPLETE\n" +
		"      trail: scan (generic) is missing\n"
	if out != want {
		t.Errorf("strict draft:\n%s\nwant\n%s", out, want)
	}

	out, _, err = runPolicyCmd(t, append(flags, "--trails", "2", "--name", "relaxed", "--json", filepath.Join(dir, "lax.yml"))...)
	if err != nil {
		t.Fatalf("lax draft: %v\n%s", err, out)
	}
	var answer flowWhatIfAnswer
	if err := json.Unmarshal([]byte(out), &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Template != "relaxed" || answer.TrailCount != 3 || answer.JudgedCount != 2 || answer.Changed != 1 || answer.Worse != 0 ||
		answer.Trails[0].Name != "t3" || answer.Trails[1].DraftState != "COMPLIANT" {
		t.Errorf("lax draft, the latest 2 trails: %+v", answer)
	}

	_, _, err = runPolicyCmd(t, append(flags, filepath.Join(dir, "bad.yml"))...)
	if err == nil || !strings.Contains(err.Error(), `template_file.trail.attestations[0].type: "nope" is not a supported attestation type`) {
		t.Errorf("invalid draft: %v", err)
	}
	_, _, err = runPolicyCmd(t, append(flags[:len(flags)-1], "nope", filepath.Join(dir, "lax.yml"))...)
	if err == nil || !strings.Contains(err.Error(), "Flow named 'nope' does not exist for organization 'acme'") {
		t.Errorf("unknown flow: %v", err)
	}
	t.Setenv("VERITRAIL_FLOW", "") // --flow's defaults, empty: not given
	t.Setenv("KOSLI_FLOW", "")
	_, _, err = runPolicyCmd(t, "what-if", "--host", host, "--api-token", token, "--org", org, filepath.Join(dir, "lax.yml"))
	if err == nil || !strings.Contains(err.Error(), "--flow is required") {
		t.Errorf("without --flow: %v", err)
	}
	// --kind policy sends the template as a policy, which needs an environment.
	_, _, err = runPolicyCmd(t, append(flags, "--kind", "policy", filepath.Join(dir, "lax.yml"))...)
	if err == nil || !strings.Contains(err.Error(), "--environment is required") {
		t.Errorf("--kind policy: %v", err)
	}

	// The endpoint is in the OpenAPI description, and stores nothing: the trails keep their state.
	resp, err := http.Get(host + "/api/v2/openapi.json")
	if err == nil {
		defer resp.Body.Close()
		doc, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(doc), `"/api/v2/flows/{org}/{flow}/what-if"`) || !strings.Contains(string(doc), "whatIfFlowTemplate") {
			t.Errorf("the OpenAPI description lacks the flow what-if (status %d)", resp.StatusCode)
		}
	} else {
		t.Error(err)
	}
	out, _, err = runPolicyCmd(t, append(flags, filepath.Join(dir, "lax.yml"))...)
	if err != nil || !strings.Contains(out, "CHANGE  t2  INCOMPLETE -> COMPLIANT\n") || !strings.Contains(out, "SAME    t1  COMPLIANT\n") {
		t.Errorf("after the drafts: %v\n%s", err, out)
	}
}
