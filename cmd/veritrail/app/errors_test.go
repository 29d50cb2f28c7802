package app

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/veritrail/veritrail/internal/store"
)

const simpleTemplate = "version: 1\ntrail:\n  attestations:\n  - name: tests\n    type: generic\n"

// setupFlow creates flow "app" with a simple template and begins trail "t1".
func setupFlow(t *testing.T, k *kosli) {
	t.Helper()
	k.multipart(http.MethodPut, "/flows/"+testOrg+"/template_file", "data_json", map[string]any{"name": "app", "description": ""},
		file{"template_file", "t.yml", []byte(simpleTemplate)}).want(t, http.StatusCreated)
	k.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "t1"}).want(t, http.StatusCreated)
}

// wantError checks the error body shape, the message and (when given) the field named. "errors"
// is an object naming fields, or absent: never null, which the Kosli CLI would print as <nil>.
func wantError(t *testing.T, r reply, status int, message, field string) {
	t.Helper()
	r.want(t, status)
	body := r.JSON(t)
	msg, ok := body["message"].(string)
	if !ok || !strings.Contains(msg, message) {
		t.Fatalf("message %q does not contain %q (body %s)", body["message"], message, r.Body)
	}
	errs, present := body["errors"]
	m, isObject := errs.(map[string]any)
	if present && (!isObject || len(m) == 0) {
		t.Fatalf("\"errors\" is not an object naming fields: %s", r.Body)
	}
	if field != "" {
		if _, ok := m[field]; !ok {
			t.Fatalf("errors do not name %q: %s", field, r.Body)
		}
	}
	if message == "Input payload validation failed" && !present {
		t.Fatalf("a validation failure names no field: %s", r.Body)
	}
}

func TestAuthentication(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		setupFlow(t, e.k)
		anon := newKosli(t, e.base+"/api/v2", "")
		wantError(t, anon.get("/flows/"+testOrg+"/app"), http.StatusUnauthorized, "Authentication required", "")
		wantError(t, newKosli(t, e.base+"/api/v2", "wrong").get("/flows/"+testOrg+"/app"), http.StatusUnauthorized, "Invalid API key", "")

		// Legacy basic auth: the key as user name, any password.
		req, _ := http.NewRequest(http.MethodGet, e.base+"/api/v2/flows/"+testOrg+"/app", nil)
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(testToken+":ignored")))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		checkAnswer(t, req.Method, req.URL.String(), resp.StatusCode, resp.Header, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("basic auth: %d", resp.StatusCode)
		}

		// A key of another organization sees neither the data nor whether it exists.
		ctx := context.Background()
		other, err := EnsureOrg(ctx, e.store, "other")
		if err != nil {
			t.Fatal(err)
		}
		if err := CreateOrgKey(ctx, e.store, other, "ci", store.RoleAdmin, "vt_other_org_key_0000000000000000"); err != nil {
			t.Fatal(err)
		}
		stranger := newKosli(t, e.base+"/api/v2", "vt_other_org_key_0000000000000000")
		for _, path := range []string{"/flows/" + testOrg + "/app", "/trails/" + testOrg + "/app/t1", "/flows/nosuchorg"} {
			r := stranger.get(path)
			wantError(t, r, http.StatusForbidden, "Access denied", "")
			if bytes.Contains(r.Body, []byte(`"app"`)) {
				t.Fatalf("foreign data leaked: %s", r.Body)
			}
		}
		wantError(t, stranger.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "x"}),
			http.StatusForbidden, "Access denied", "")

		// A reader may read but not write.
		if err := CreateOrgKey(ctx, e.store, store.Org{ID: mustOrg(t, e.store, testOrg).ID, Name: testOrg}, "auditor", store.RoleReader, "vt_reader_key_000000000000000000"); err != nil {
			t.Fatal(err)
		}
		reader := newKosli(t, e.base+"/api/v2", "vt_reader_key_000000000000000000")
		reader.get("/flows/"+testOrg+"/app").want(t, http.StatusOK)
		wantError(t, reader.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json", map[string]any{"name": "x"}),
			http.StatusForbidden, "needs the write privilege", "")
	})
}

func mustOrg(t *testing.T, st store.Store, name string) store.Org {
	t.Helper()
	o, err := st.OrgByName(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestPublicEndpoints(t *testing.T) {
	base, _ := startEmbedded(t)
	anon := newKosli(t, base, "")
	if r := anon.get("/ready").want(t, http.StatusOK); string(r.Body) != "OK" {
		t.Fatalf("/ready: %q", r.Body)
	}
	spec := anon.get("/api/v2/openapi.json").want(t, http.StatusOK).JSON(t)
	if !strings.HasPrefix(spec["openapi"].(string), "3.1") {
		t.Fatalf("openapi version %v", spec["openapi"])
	}
	paths := spec["paths"].(map[string]any)
	for _, p := range []string{"/api/v2/trails/{org}/{flow}", "/api/v2/attestations/{org}/{flow}/trail/{trail}/custom", "/api/v2/artifacts/{org}/{flow}"} {
		if _, ok := paths[p]; !ok {
			t.Errorf("openapi lacks %s", p)
		}
	}
	wantError(t, anon.get("/api/v2/no/such/thing"), http.StatusNotFound, "Not found", "")
}

// TestBadInput checks that bad requests are 4xx naming the field, in the hosted service's words.
func TestBadInput(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		k := e.k
		org := testOrg
		setupFlow(t, k)
		att := "/attestations/" + org + "/app/trail/t1/"
		cases := []struct {
			name    string
			do      func() reply
			status  int
			message string
			field   string
		}{
			{"bad fingerprint", func() reply {
				return k.send(http.MethodPost, "/artifacts/"+org+"/app", map[string]any{"fingerprint": "xyz", "filename": "f",
					"build_url": "b", "commit_url": "c"})
			}, 400, "Input payload validation failed", "fingerprint"},
			{"bad git commit", func() reply {
				return k.send(http.MethodPost, "/artifacts/"+org+"/app", map[string]any{"fingerprint": fpBackend, "filename": "f",
					"build_url": "b", "commit_url": "c", "git_commit": "nothex"})
			}, 400, "Input payload validation failed", "git_commit"},
			{"unknown flow", func() reply {
				return k.multipart(http.MethodPut, "/trails/"+org+"/nope", "data_json", map[string]any{"name": "t"})
			}, 404, "Flow named 'nope' does not exist for organization 'acme'", ""},
			{"unknown trail", func() reply {
				return k.multipart(http.MethodPost, "/attestations/"+org+"/app/trail/nope/generic", "data_json", map[string]any{"attestation_name": "x"})
			}, 404, "Trail with name 'nope' does not exist for Organization 'acme' and Flow 'app'", ""},
			{"bad trail name", func() reply {
				return k.multipart(http.MethodPut, "/trails/"+org+"/app", "data_json", map[string]any{"name": "-bad name"})
			}, 400, "Input payload validation failed", "name"},
			{"missing data_json", func() reply {
				return k.multipart(http.MethodPut, "/trails/"+org+"/app", "other", map[string]any{"name": "t"})
			}, 400, "Input payload validation failed", "data_json"},
			{"data_json not JSON", func() reply {
				return k.multipart(http.MethodPut, "/trails/"+org+"/app", "data_json", rawJSON("{"))
			}, 400, "Input payload validation failed", "data_json"},
			{"invalid template", func() reply {
				return k.multipart(http.MethodPut, "/flows/"+org+"/template_file", "data_json", map[string]any{"name": "f2"},
					file{"template_file", "t.yml", []byte("version: 1\ntrail:\n  attestations:\n  - name: foo\n    type: not-supported\n")})
			}, 400, "Input payload validation failed", "template_file.trail.attestations[0].type"},
			{"template YAML syntax", func() reply {
				return k.multipart(http.MethodPut, "/flows/"+org+"/template_file", "data_json", map[string]any{"name": "f2"},
					file{"template_file", "t.yml", []byte("trail: [unclosed")})
			}, 400, "Input payload validation failed", "template_file"},
			{"unknown fingerprint", func() reply {
				return k.multipart(http.MethodPost, att+"generic", "data_json", map[string]any{"attestation_name": "x", "artifact_fingerprint": fpBackend})
			}, 404, `Artifact with fingerprint ` + fpBackend + ` does not exist in trail "t1" of flow "app" belonging to organization "acme"`, ""},
			{"target without fingerprint or commit", func() reply {
				return k.multipart(http.MethodPost, att+"generic", "data_json", map[string]any{"attestation_name": "x", "target_artifacts": []string{"backend"}})
			}, 400, "requires at least one of: artifact_fingerprint or git_commit_info.", ""},
			{"unknown custom type", func() reply {
				return k.multipart(http.MethodPost, att+"custom", "data_json", map[string]any{"attestation_name": "x", "type_name": "nope", "attestation_data": map[string]any{}})
			}, 404, "Custom attestation type 'nope' does not exist for org 'acme'", ""},
			{"decision without control", func() reply {
				return k.multipart(http.MethodPost, att+"system", "data_json", map[string]any{"attestation_name": "x", "type_name": "decision", "attestation_data": map[string]any{"is_compliant": true}})
			}, 400, "Input payload validation failed", "control"},
			{"attachment over 10 MB", func() reply {
				return k.multipart(http.MethodPost, att+"generic", "data_json", map[string]any{"attestation_name": "x"},
					file{"attachment_file", "big.bin", bytes.Repeat([]byte("x"), 10<<20+1)})
			}, 413, "", ""},
			{"short fingerprint too short", func() reply { return k.get("/artifacts/" + org + "/app/fingerprint/abcd") }, 400, "Input payload validation failed", "fingerprint"},
			{"unknown artifact", func() reply { return k.get("/artifacts/" + org + "/app/fingerprint/abcde") }, 404,
				"Artifact with fingerprint 'abcde' does not exist in flow 'app' belonging to organization 'acme'", ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { wantError(t, c.do(), c.status, c.message, c.field) })
		}

		// Custom data that does not match the type's schema is refused, naming the field.
		k.multipart(http.MethodPost, "/custom-attestation-types/"+org, "data_json", map[string]any{"name": "person"},
			file{"type_schema", "s.json", []byte(`{"type":"object","properties":{"age":{"type":"integer"}}}`)}).want(t, http.StatusCreated)
		wantError(t, k.multipart(http.MethodPost, att+"custom", "data_json", map[string]any{"attestation_name": "p", "type_name": "person",
			"attestation_data": map[string]any{"age": "old"}}), 400, "Input payload validation failed", "attestation_data.age")

		// Nothing of the refused requests was written.
		tr := k.get("/trails/"+org+"/app/t1").want(t, http.StatusOK).JSON(t)
		if n := len(tr["compliance_status"].(map[string]any)["attestations_statuses"].([]any)); n != 1 {
			t.Fatalf("refused requests left attestations behind: %s", tr["compliance_status"])
		}
	})
}

// rawJSON is a JSON part sent exactly as written (even when invalid).
type rawJSON string

func (j rawJSON) MarshalJSON() ([]byte, error) { return []byte(j), nil }

// TestConcurrentBegins checks that racing begins of one trail never answer 5xx.
func TestConcurrentBegins(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		setupFlow(t, e.k)
		var wg sync.WaitGroup
		statuses := make(chan int, 40)
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := newKosli(t, e.base+"/api/v2", testToken)
				statuses <- c.multipart(http.MethodPut, "/trails/"+testOrg+"/app", "data_json",
					map[string]any{"name": "race", "description": fmt.Sprint(i)}).Status
			}()
		}
		wg.Wait()
		close(statuses)
		for s := range statuses {
			if s != http.StatusCreated && s != http.StatusOK {
				t.Fatalf("concurrent begin answered %d", s)
			}
		}
		e.k.get("/trails/"+testOrg+"/app/race").want(t, http.StatusOK)
	})
}

// TestReadYourWrites checks that a GET right after each 201 reflects it, with no sleep.
func TestReadYourWrites(t *testing.T) {
	forEachMode(t, func(t *testing.T, e env) {
		setupFlow(t, e.k)
		for i := range 20 {
			name := fmt.Sprintf("ryw-%d", i)
			e.k.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
				map[string]any{"attestation_name": name, "is_compliant": i%2 == 0}).want(t, http.StatusCreated)
			got := e.k.get("/attestations/"+testOrg+"/app/trail/t1/"+name).want(t, http.StatusOK).Array(t)
			if len(got) != 1 || got[0].(map[string]any)["is_compliant"] != (i%2 == 0) {
				t.Fatalf("read after write %d: %v", i, got)
			}
		}
	})
}

// TestTypeErrorNamesField: a data_json field of the wrong JSON type is a 400 naming that field.
func TestTypeErrorNamesField(t *testing.T) {
	base, _ := startEmbedded(t)
	k := newKosli(t, base+"/api/v2", testToken)
	setupFlow(t, k)
	wantError(t, k.multipart(http.MethodPost, "/attestations/"+testOrg+"/app/trail/t1/generic", "data_json",
		map[string]any{"attestation_name": "x", "is_compliant": "yes"}), http.StatusBadRequest, "Input payload validation failed", "is_compliant")
}
