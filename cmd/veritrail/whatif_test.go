package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
)

// TestPolicyWhatIf runs "policy what-if" against an embedded server: flags first, then the Kosli CLI's
// environment variables.
func TestPolicyWhatIf(t *testing.T) {
	const org, token = "acme", "vt_whatif_test_token_0123456789ab"
	r, err := app.StartEmbedded(context.Background(), app.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), BootstrapOrg: org,
		BootstrapToken: token, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	host := "http://" + r.Addr
	send := func(method, path, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, host+"/api/v2"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
		}
	}
	send(http.MethodPut, "/environments/"+org, `{"name": "prod", "type": "server"}`)
	send(http.MethodPut, "/environments/"+org+"/prod/report/server",
		`{"artifacts": [{"digests": {"mystery": "`+strings.Repeat("e", 64)+`"}, "creationTimestamp": 1}]}`)
	dir := writeFiles(t, map[string]string{
		"strict.yml":  "_schema: https://kosli.com/schemas/policy/environment/v1\nartifacts:\n  provenance:\n    required: true\n",
		"lenient.yml": "_schema: https://kosli.com/schemas/policy/environment/v1\n",
	})

	out, _, err := runPolicyCmd(t, "what-if", "--host", host, "--api-token", token, "--org", org, "--environment", "prod",
		filepath.Join(dir, "strict.yml"))
	if err == nil || !strings.Contains(err.Error(), "1 of 1 artifact(s) would fail policy 'strict'") {
		t.Fatalf("what-if of a failing draft: err %v", err)
	}
	if !strings.Contains(out, "FAIL  mystery") || !strings.Contains(out, "provenance: no_provenance:") {
		t.Errorf("what-if output:\n%s", out)
	}

	t.Setenv("KOSLI_HOST", host)
	t.Setenv("KOSLI_API_TOKEN", token)
	t.Setenv("KOSLI_ORG", org)
	out, _, err = runPolicyCmd(t, "what-if", "--environment", "prod", "--name", "relaxed", filepath.Join(dir, "lenient.yml"))
	if err != nil || !strings.Contains(out, "Policy 'relaxed' against prod#1: 0 of 1 artifact(s) would fail.") {
		t.Fatalf("what-if from the environment: %v\n%s", err, out)
	}
	var buf bytes.Buffer
	if err := run(context.Background(), []string{"policy", "what-if", "--environment", "prod", "--json", filepath.Join(dir, "lenient.yml")},
		&buf, &buf); err != nil || !strings.Contains(buf.String(), `"failing_count":0`) {
		t.Fatalf("what-if --json: %v\n%s", err, buf.String())
	}

	_, _, err = runPolicyCmd(t, "what-if", "--environment", "nope", filepath.Join(dir, "lenient.yml"))
	if err == nil || !strings.Contains(err.Error(), "Environment named 'nope' does not exist for organization 'acme'") {
		t.Errorf("unknown environment: %v", err)
	}
	_, _, err = runPolicyCmd(t, "what-if", "--environment", "prod", "--api-token", "", filepath.Join(dir, "lenient.yml"))
	if err == nil || !strings.Contains(err.Error(), "--api-token") {
		t.Errorf("without a token: %v", err)
	}
}
